"""Integration helper for 62-filetimer: torch's own watchdog API, unchanged. Each step runs inside
timer.expires(after=1); rank HANG_RANK gets stuck in step 2 of attempt 0 while WORLD_SIZE > MIN_WORLD."""
import os
import sys
import time

import torch.distributed.elastic.timer as timer

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
hang_rank = int(os.environ.get("HANG_RANK", "1"))
min_world = int(os.environ.get("MIN_WORLD", "0"))
timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
for step in range(int(sys.argv[1]) if len(sys.argv) > 1 else 6):
    with timer.expires(after=1, scope=f"step{step}"):
        if rank == hang_rank and step == 2 and attempt == 0 and world > min_world:
            print(f"rank {rank} stuck in step {step}", flush=True)
            time.sleep(3600)
        time.sleep(0.05)
print(f"done r{rank} world {world} attempt {attempt}", flush=True)
