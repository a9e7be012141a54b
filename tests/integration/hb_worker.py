"""Integration helper for 61-heartbeat-python: touches the heartbeat with examples/heartbeat.py every 100 ms
for STEPS steps. The rank named by STALL_RANK stops touching after 3 steps (but keeps running and printing)
while WORLD_SIZE > 2, so only the heartbeat can tell that it is stuck."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ["DDP_SRCDIR"], "examples"))
from heartbeat import heartbeat  # noqa: E402

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
stall_rank = int(os.environ.get("STALL_RANK", "-1"))
for step in range(steps):
    if rank == stall_rank and world > 2 and step >= 3:
        print(f"rank {rank} stuck at step {step}", flush=True)
        while True:
            time.sleep(0.2)
            print("still printing, not progressing", flush=True)
    heartbeat()
    time.sleep(0.1)
print(f"done r{rank} world {world} orig {os.environ.get('DDPLAUNCH_ORIG_WORLD_SIZE')}", flush=True)
