"""3 gloo ranks; in attempt 0 rank 2 stops taking part (sleeps), the others wait in all_reduce: the stall timeout
restarts the job, and the restart should start warm (issue 41). Heartbeat: DDPLAUNCH_HEARTBEAT_FILE each step."""
import datetime, os, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
r, a = dist.get_rank(), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
hb = os.environ.get("DDPLAUNCH_HEARTBEAT_FILE")
print("attempt", a, "rank", r, "up", flush=True)
t = torch.ones(1)
for i in range(15):
    if a == 0 and r == 2 and i == 3:
        time.sleep(3600)
    dist.all_reduce(t)
    if hb:
        open(hb, "a").close()
        os.utime(hb)
    time.sleep(0.2)
print("attempt", a, "rank", r, "done", flush=True)
dist.destroy_process_group()
