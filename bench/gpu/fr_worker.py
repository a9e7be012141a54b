"""Issue 31: an unmodified-looking training loop that waits for its collectives the way NCCL jobs do. Each step's
gradient all_reduce is enqueued (async_op=True) and the rank then waits by polling work.is_completed() in a function
of its own, as a CUDA sync waits: its Python stack names no collective. gloo on CPU (3 ranks) unless
FR_BACKEND=nccl; the process group keeps a 30-minute timeout.
FR_KIND: stuck   - FR_RANK stays in its data loading (load_batch) at step 5, forever;
         other   - FR_RANK broadcasts at step 5 where the others all_reduce;
         shape   - FR_RANK all_reduces 2 elements at step 5 where the others all_reduce 1;
         slow    - FR_RANK's data loading takes 40% longer every step; ends normally;
         ckpt    - rank 0 writes a checkpoint for FR_CKPT_S (40) seconds at step 5 while the others wait in a
                   barrier; ends normally;
         healthy - FR_STEPS steps of CPU work (a matmul loop), prints its elapsed time; ends normally.
Several process groups (issue 38; 4 or 8 ranks), each step's collectives before the gradient all_reduce:
         pair    - new_group([0, 1]) and new_group([2, 3]); FR_PAIR01 (2) all_reduces a step in [0, 1], one in
                   [2, 3]; FR_RANK (3) skips its pair all_reduce at step FR_AT (3);
         mesh    - init_device_mesh (2, N/2) ("dp", "tp") (new_group where torch has none): two tp all_reduces
                   and one dp a step; FR_RANK skips its second tp all_reduce at step FR_AT;
         tpshape - the mesh; FR_RANK all_reduces 8 elements in its second tp all_reduce at FR_AT (the others 4);
         order   - ranks 0-1 share two groups and all_reduce in the first, then the second; FR_RANK (1) takes
                   the second first from step FR_AT (0: from the start);
         dtype   - the pair groups; FR_RANK (1) all_reduces float64 in [0, 1] at FR_AT where rank 0 sends
                   float32 (gloo aborts a rank); FR_LATE (0) seconds late to it (its peer waits meanwhile);
         wdtype  - FR_RANK all_reduces float64 in the world group at FR_AT where the others send float32;
         dpslow  - the mesh; FR_RANK's data loading takes 40% longer; ends normally.
FR_STEPS steps (40) of FR_STEP_S seconds (0.3) of data loading; a line every 5 steps."""
import datetime, json, os, time
import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
culprit = int(os.environ.get("FR_RANK", "1"))
kind = os.environ.get("FR_KIND", "stuck")
backend = os.environ.get("FR_BACKEND", "gloo")
steps = int(os.environ.get("FR_STEPS", "40"))
step_s = float(os.environ.get("FR_STEP_S", "0.3"))
device = "cpu"
if backend == "nccl":
    print(f"rank {rank} NCCL_RAS_ADDR={os.environ.get('NCCL_RAS_ADDR')}", flush=True)
    device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
    torch.cuda.set_device(device)
torch.set_num_threads(1)
dist.init_process_group(backend, timeout=datetime.timedelta(minutes=30))
at = int(os.environ.get("FR_AT", "3"))
world = dist.get_world_size()
groups = {}
if kind in ("pair", "dtype"):
    pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]  # every rank makes both
    groups["pair"] = pairs[0] if rank < 2 else pairs[1]
elif kind in ("mesh", "tpshape", "dpslow"):
    try:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(device.split(":")[0], (2, world // 2), mesh_dim_names=("dp", "tp"))
        groups["tp"], groups["dp"] = mesh.get_group("tp"), mesh.get_group("dp")
    except ImportError:  # torch 1.x: the same groups, made as init_device_mesh does (dp first)
        tp = world // 2
        dps = [dist.new_group([c + tp * k for k in range(2)]) for c in range(tp)]
        tps = [dist.new_group([tp * k + c for c in range(tp)]) for k in range(2)]
        groups["tp"], groups["dp"] = tps[rank // tp], dps[rank % tp]
elif kind == "order":
    groups["a"], groups["b"] = dist.new_group([0, 1]), dist.new_group([0, 1])
model = torch.nn.Linear(64, 64).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def load_batch(step):
    if rank == culprit and kind == "stuck" and step == 5:
        print(f"rank {rank} stuck from now", flush=True)
        time.sleep(100000)  # stuck reading data
    if kind == "healthy":
        a = torch.randn(256, 256)
        for _ in range(40):
            a = (a @ a).tanh()
    else:
        time.sleep(step_s * (1.4 if rank == culprit and kind in ("slow", "dpslow") else 1.0))
    return torch.randn(32, 64, device=device)


dumped = [False]


def dump_recorder():
    """FR_DUMP_DIR: this rank's recorder, once it waited FR_DUMP_AFTER (25) s: JSON (DIR/json/rank_R) for the
    fixtures and the pickle (DIR/pkl/rank_R) for torch's analyzer (fr_trace)"""
    d = os.environ.get("FR_DUMP_DIR")
    if not d or dumped[0]:
        return
    dumped[0] = True
    C = torch._C._distributed_c10d
    for sub, fns in (("json", ("_dump_fr_trace_json", "_dump_nccl_trace_json")), ("pkl", ("_dump_fr_trace",))):
        for fn in fns:
            if not hasattr(C, fn):
                continue
            try:
                data = getattr(C, fn)(includeCollectives=True) if sub == "pkl" else \
                    getattr(C, fn)(includeCollectives=True, onlyActive=False)
            except Exception as e:  # recorded, not fatal: the run is what is measured
                print(f"rank {rank}: {fn}: {e}", flush=True)
                continue
            if sub == "json" and not json.loads(data.decode()).get("entries"):
                continue
            os.makedirs(os.path.join(d, sub), exist_ok=True)
            with open(os.path.join(d, sub, "rank_%d" % rank), "wb") as f:
                f.write(data)
            break


def wait_for(work):
    t = time.monotonic()
    while not work.is_completed():  # as torch.cuda.synchronize() waits for an NCCL kernel
        time.sleep(0.01)
        if time.monotonic() - t > float(os.environ.get("FR_DUMP_AFTER", "25")):
            dump_recorder()


def coll(group, n=4, dtype=torch.float32):
    work = dist.all_reduce(torch.ones(n, dtype=dtype, device=device), group=group, async_op=True)
    if dtype == torch.float64:  # the dtype cases' odd one: its recorder now (its peer may abort it next)
        dump_recorder()
    if backend == "nccl":
        work.wait()
        torch.cuda.synchronize()
    else:
        wait_for(work)


def subgroups(step):
    """this step's collectives in the subgroups, before the gradient all_reduce"""
    me = rank == culprit and step == at
    if kind in ("pair", "dtype"):
        for _ in range(int(os.environ.get("FR_PAIR01", "2")) if rank < 2 else 1):
            if kind == "pair" and me:
                print(f"rank {rank} skips its pair all_reduce", flush=True)
                continue
            if kind == "dtype" and me and float(os.environ.get("FR_LATE", "0")) > 0:
                time.sleep(float(os.environ["FR_LATE"]))  # late to it: its peer stands still in the collective
            coll(groups["pair"], dtype=torch.float64 if kind == "dtype" and me else torch.float32)
    elif kind in ("mesh", "tpshape", "dpslow"):
        coll(groups["tp"])
        if kind == "mesh" and me:
            print(f"rank {rank} skips its second tp all_reduce", flush=True)
        else:
            coll(groups["tp"], n=8 if kind == "tpshape" and me else 4)
        coll(groups["dp"])
    elif kind == "wdtype":
        coll(None, dtype=torch.float64 if me else torch.float32)
    elif kind == "order" and rank < 2:
        first = [groups["a"], groups["b"]]
        if rank == culprit and step >= at:
            first.reverse()
        for g in first:
            coll(g)


def sync_grads(step):
    flat = torch.cat([p.grad.flatten() for p in model.parameters()])
    if step == 5 and rank == culprit and kind in ("other", "shape"):
        print(f"rank {rank} at the mismatch", flush=True)
        if kind == "other":
            work = dist.broadcast(flat, src=0, async_op=True)
        else:
            work = dist.all_reduce(torch.ones(2, device=device), async_op=True)
    elif step == 5 and kind == "shape":
        work = dist.all_reduce(torch.ones(1, device=device), async_op=True)
    else:
        work = dist.all_reduce(flat, async_op=True)
    if backend == "nccl":
        work.wait()
        torch.cuda.synchronize()
    else:
        wait_for(work)


t0 = time.monotonic()
for step in range(steps):
    x = load_batch(step)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    subgroups(step)
    sync_grads(step)
    opt.step()
    if kind == "ckpt" and step == 5:
        if rank == 0:
            time.sleep(float(os.environ.get("FR_CKPT_S", "40")))  # writing a large checkpoint
        dist.barrier()
    if step % 5 == 0:
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
print(f"rank {rank} done in {time.monotonic() - t0:.3f} s", flush=True)
