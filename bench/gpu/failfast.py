#!/usr/bin/env python3
"""Benchmark worker: one NCCL (or gloo) all_reduce, then rank 1 exits with code 3; the others wait.
Rank 1 writes the time it exits and every other rank the time SIGTERM reached it, into $BENCH_DIR."""
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

out = os.environ["BENCH_DIR"]
rank = int(os.environ["RANK"])


def on_term(signo, frame):
    with open(os.path.join(out, f"term.{rank}"), "w") as f:
        f.write(f"{time.time():.6f}\n")
    os._exit(143)


signal.signal(signal.SIGTERM, on_term)
cuda = torch.cuda.is_available()
if cuda:
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
dist.init_process_group("nccl" if cuda else "gloo")
t = torch.ones(1, device="cuda" if cuda else "cpu")
dist.all_reduce(t)
if cuda:
    torch.cuda.synchronize()
if rank == 1:
    with open(os.path.join(out, "exit.1"), "w") as f:
        f.write(f"{time.time():.6f}\n")
    os._exit(3)
time.sleep(120)
