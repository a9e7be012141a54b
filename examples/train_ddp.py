#!/usr/bin/env python3
"""A small but real DistributedDataParallel training run, for ddplaunch (or torchrun).

Tiny MLP, synthetic regression data, gloo on CPU or NCCL on GPUs. Rank 0 prints the loss of every step.
The global batch stays the same when ddplaunch downsizes the job: with DDPLAUNCH_ORIG_WORLD_SIZE > WORLD_SIZE
each rank accumulates gradients over several micro-batches, so the result does not depend on the size.

    ddplaunch --nproc-per-node 4 examples/train_ddp.py --steps 20
"""
import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def heartbeat():
    """Prove progress to ddplaunch ([timeout] stall with heartbeat = file)."""
    path = os.environ.get("DDPLAUNCH_HEARTBEAT_FILE")
    if path:
        with open(path, "a"):
            os.utime(path)


def say(msg):
    # One write per line, so lines of different ranks never splice.
    os.write(1, (msg + "\n").encode())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--global-batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--backend", default=None, help="gloo or nccl (default: nccl when GPUs are visible)")
    p.add_argument("--pg-timeout", type=float, default=None, help="timeout of the training's collectives in seconds (once every rank joined)")
    p.add_argument("--hang-rank", type=int, default=-1, help="this rank stops before an all_reduce ...")
    p.add_argument("--hang-step", type=int, default=2, help="... at this step ...")
    p.add_argument("--hang-attempts", type=int, default=1, help="... in the first N attempts")
    p.add_argument("--fail-rank", type=int, default=-1, help="this rank exits with --exit-code ...")
    p.add_argument("--fail-step", type=int, default=1, help="... after this step")
    p.add_argument("--exit-code", type=int, default=3)
    p.add_argument("--step-sleep", type=float, default=0.0)
    args = p.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    orig_world = int(os.environ.get("DDPLAUNCH_ORIG_WORLD_SIZE", world))
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

    use_cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0
    backend = args.backend or ("nccl" if use_cuda else "gloo")
    if backend == "nccl":
        dev_index = 0 if torch.cuda.device_count() == 1 else local_rank
        torch.cuda.set_device(dev_index)
        device = torch.device("cuda", dev_index)
    else:
        device = torch.device("cpu")

    t0 = time.time()
    dist.init_process_group(backend)
    # --pg-timeout bounds the training's collectives, not the wait for every rank to join (ranks that import
    # torch seconds apart on a busy machine are not a hang): the default group joins with torch's default
    # timeout, the training runs in a group of all ranks made with the short one once everyone is there.
    group = None
    if args.pg_timeout:
        group = dist.new_group(timeout=datetime.timedelta(seconds=args.pg_timeout))
    heartbeat()

    # A collective whose answer we know: sum of (rank + 1) over all ranks.
    t = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(t, group=group)
    expected = world * (world + 1) / 2
    if rank == 0:
        say(f"allreduce sum={t.item():g} expected={expected:g} world_size={world} orig_world_size={orig_world} "
            f"backend={backend} attempt={attempt} first_allreduce_s={time.time() - t0:.3f} "
            f"allreduce_unix={time.time():.6f}")
    if t.item() != expected:
        say(f"rank {rank}: all_reduce gave {t.item()} instead of {expected}")
        sys.exit(1)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
    ddp = DDP(model, device_ids=[device.index] if backend == "nccl" else None, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    w_true = torch.linspace(-1, 1, 16).unsqueeze(1)

    # The global batch is split into orig_world micro-batches; each rank takes its share of them.
    micro = max(1, args.global_batch // orig_world)
    accum = max(1, orig_world // world)
    for step in range(args.steps):
        if rank == args.hang_rank and step == args.hang_step and attempt < args.hang_attempts:
            say(f"rank {rank}: hanging before step {step}'s all_reduce (attempt {attempt})")
            time.sleep(3600)
        g = torch.Generator().manual_seed(1000 + step)
        x_all = torch.randn(orig_world * micro, 16, generator=g)
        y_all = x_all @ w_true + 0.01 * torch.randn(orig_world * micro, 1, generator=g)
        opt.zero_grad()
        total = 0.0
        for k in range(accum):
            m = rank * accum + k
            x = x_all[m * micro:(m + 1) * micro].to(device)
            y = y_all[m * micro:(m + 1) * micro].to(device)
            loss = nn.functional.mse_loss(ddp(x), y) / accum
            if k < accum - 1:
                with ddp.no_sync():
                    loss.backward()
            else:
                loss.backward()
            total += loss.item()
        opt.step()
        lt = torch.tensor([total], device=device)
        dist.all_reduce(lt, group=group)
        heartbeat()
        if rank == 0:
            say(f"step {step} loss {lt.item() / world:.6f}")
        if rank == args.fail_rank and step == args.fail_step:
            say(f"rank {rank}: failing with exit code {args.exit_code}")
            sys.exit(args.exit_code)
        if args.step_sleep:
            time.sleep(args.step_sleep)

    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    if rank == 0:
        say(f"done steps={args.steps} world_size={world} checksum={checksum:.4f}")
    # Tear down in this order: torch 1.13 with gloo can deadlock when the DDP reducer's process group is
    # destroyed (holding the GIL) while a gloo worker thread still frees the last all_reduce's tensor (and
    # waits for the GIL); seen once in `make demo` on a loaded 2-core machine, rank 1 spinning forever.
    # The barrier lets every earlier collective retire first; the reducer then goes before the group.
    dist.barrier(group=group)
    del ddp, opt
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
