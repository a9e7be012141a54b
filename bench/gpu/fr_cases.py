"""Issue 31: record torch's flight recorder as JSON, read in process from a thread of each rank, for the unit tests
of launcher/watch/fr.c (tests/fixtures/fr/), and measure what reading it costs. Run on the GPU machine:
    python3 bench/gpu/fr_cases.py OUTDIR
Cases (3 gloo CPU ranks unless said; every collective is async and each rank polls work.is_completed(), as a rank
waits in a CUDA sync under NCCL; the process-group timeout is 30 minutes):
  stuck    rank 2 stays in its data loader at step 5 while ranks 0-1 enqueue the step's all_reduce
  op       rank 1 broadcasts at step 5 where ranks 0 and 2 all_reduce
  shape    rank 1 all_reduces 2 elements at step 5 where ranks 0 and 2 all_reduce 1
  healthy  20 steps, all ranks the same
  subgroup a world group and a group of ranks 0-1; rank 1 stays out of the subgroup's all_reduce #3
  p2p      rank 0 isends twice to rank 1, rank 1 irecvs once; rank 2 all_reduces alone (world)
  nccl     NCCL, 1 rank: 300 all_reduces, synchronize, then one more enqueued
  cost     gloo, 1 rank: the cost of a status read and of the entries after 2,000 collectives
Each rank writes OUTDIR/CASE.rankR.json (includeCollectives=True, onlyActive=False) and, for nccl, the NCCL and
FR dumps and their onlyActive form; cost writes OUTDIR/cost.json."""
import datetime, json, os, subprocess, sys, threading, time

CASES = ["stuck", "op", "shape", "healthy", "subgroup", "p2p", "nccl", "cost"]


def dump(C, fn, coll=True, active=False):
    return json.loads(getattr(C, fn)(includeCollectives=coll, onlyActive=active).decode())


def rank_main(case, out):
    import torch
    import torch.distributed as dist
    rank = int(os.environ["RANK"])
    backend = "nccl" if case == "nccl" else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(0)
    dist.init_process_group(backend, timeout=datetime.timedelta(minutes=30))
    C = torch._C._distributed_c10d
    dev = "cuda" if backend == "nccl" else "cpu"
    done = threading.Event()

    def dumper(delay):
        time.sleep(delay)
        docs = {}
        for fn in ("_dump_fr_trace_json", "_dump_nccl_trace_json"):
            if hasattr(C, fn):
                docs[fn] = dump(C, fn)
                if case == "nccl":
                    docs[fn + ":active"] = dump(C, fn, True, True)
                    docs[fn + ":status"] = dump(C, fn, False, False)
        main = docs["_dump_nccl_trace_json" if backend == "nccl" else "_dump_fr_trace_json"]
        with open(f"{out}/{case}.rank{rank}.json", "w") as f:
            json.dump(main, f, indent=1)
        if case == "nccl":
            with open(f"{out}/{case}.all.json", "w") as f:
                json.dump(docs, f, indent=1)
        done.set()
        sys.stdout.flush()
        os._exit(0)

    def wait(work):
        while not work.is_completed():
            time.sleep(0.01)

    if case == "cost":
        x = torch.ones(1)
        for _ in range(2000):
            dist.all_reduce(x)
        res = {}
        for label, coll, active in (("status", False, False), ("entries", True, False), ("active", True, True)):
            for fn in ("_dump_fr_trace_json", "_dump_nccl_trace_json"):
                if not hasattr(C, fn):
                    continue
                reps = 200 if not coll else 10
                t = time.perf_counter()
                for _ in range(reps):
                    b = getattr(C, fn)(includeCollectives=coll, onlyActive=active)
                    d = json.loads(b.decode())
                ms = (time.perf_counter() - t) * 1000 / reps
                res[f"{fn}:{label}"] = {"ms": round(ms, 4), "bytes": len(b), "entries": len(d.get("entries", []))}
        sys.path.insert(0, os.environ["FR_SITE"])
        import ddpfr  # the sampler's recorder functions, as the sitecustomize holds them
        st = ddpfr._ddplaunch_fr_state()
        t = time.perf_counter()
        for _ in range(1000):
            line = ddpfr._ddplaunch_fr_line(st, False)
        res["sampler_line_status"] = {"ms": round((time.perf_counter() - t), 4), "bytes": len(line)}
        t = time.perf_counter()
        for _ in range(10):
            line = ddpfr._ddplaunch_fr_line(ddpfr._ddplaunch_fr_state(), True)
        res["sampler_line_entries"] = {"ms": round((time.perf_counter() - t) * 100, 3), "bytes": len(line)}
        with open(f"{out}/cost.json", "w") as f:
            json.dump(res, f, indent=1)
        os._exit(0)

    if case == "nccl":
        x = torch.ones(4, device=dev)
        for _ in range(300):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.all_reduce(x, async_op=True)
        dumper(2)
    sub = dist.new_group([0, 1]) if case == "subgroup" else None
    threading.Thread(target=dumper, args=(4 if case != "healthy" else 8,), daemon=True).start()
    for step in range(20 if case == "healthy" else 6):
        x = torch.ones(2 if case == "shape" and rank == 1 and step == 5 else 1)
        if case == "stuck" and rank == 2 and step == 5:
            time.sleep(100000)
        if case == "op" and rank == 1 and step == 5:
            wait(dist.broadcast(x, src=0, async_op=True))
        elif case == "p2p" and step == 5:
            if rank == 0:
                dist.isend(torch.ones(3), 1)
                dist.isend(torch.ones(3), 1)
            elif rank == 1:
                wait(dist.irecv(torch.ones(3), 0))
            time.sleep(100000)
        else:
            wait(dist.all_reduce(x, async_op=True))
        if sub is not None and rank in (0, 1) and not (rank == 1 and step == 3):
            wait(dist.all_reduce(torch.ones(1), group=sub, async_op=True))
        if sub is not None and rank == 1 and step == 3:
            time.sleep(100000)
        time.sleep(0.05)
    time.sleep(100000)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    if len(sys.argv) > 2:
        return rank_main(sys.argv[2], out)
    import torch
    print("torch", torch.__version__, "python", sys.version.split()[0], flush=True)
    port = 29600
    for case in CASES:
        n = 1 if case in ("nccl", "cost") else 3
        port += 1
        procs = []
        for r in range(n):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port))
            procs.append(subprocess.Popen([sys.executable, __file__, out, case], env=env,
                                          stdout=open(f"{out}/{case}.rank{r}.log", "w"), stderr=subprocess.STDOUT))
        for p in procs:
            try:
                p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
        print(case, [p.returncode for p in procs], flush=True)


if __name__ == "__main__":
    main()
