"""Runs a script with an imitation of torch 2.x's in-process flight recorder on a torch without one (1.13 here):
torch._C._distributed_c10d._dump_fr_trace_json(includeCollectives, onlyActive) returns the JSON torch 2.11 returns
(format as in tests/fixtures/fr, recorded on the GPU machine), built from this rank's calls to all_reduce,
broadcast and barrier, in every process group. As torch 2.11 does: pg_status is keyed by this process's own counter
of the groups it is a member of (in the order they were made), each entry's process_group is [name, desc] (the
same on every rank), sequence numbers count per group, a collective is completed once its work is (gloo's
pg_config is empty: the members are torch.distributed's own map, which torch 2.x keeps in _world).
Usage: python3 fake_recorder.py SCRIPT [args...]"""
import json, runpy, sys, time, types
import torch
import torch.distributed as dist

C = torch._C._distributed_c10d
c10d = dist.distributed_c10d
st = {"seq": {}, "entries": [], "record": 0}
DTYPES = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
          torch.int64: "Long", torch.int32: "Int"}
ARGS = {"all_reduce": ("tensor", "op", "group", "async_op"), "broadcast": ("tensor", "src", "group", "async_op"),
        "barrier": ("group", "async_op")}


def keys():
    """this process's groups in the order they were made: pg -> (key, name)"""
    return {pg: (i, str(name)) for i, (pg, name) in enumerate(c10d._pg_names.items())}


def wrap(name):
    real = getattr(dist, name)

    def f(*a, **k):
        named = dict(zip(ARGS[name], a), **k)
        pg = named.get("group") or c10d._get_default_group()
        key, gname = keys().get(pg, (0, "0"))
        t = named.get("tensor")
        seq = st["seq"][gname] = st["seq"].get(gname, 0) + 1
        e = {"record_id": st["record"], "pg_id": key,
             "process_group": [gname, "default_pg" if gname == "0" else "undefined"], "collective_seq_id": seq,
             "p2p_seq_id": 0, "op_id": seq, "profiling_name": "gloo:" + name, "state": "scheduled", "is_p2p": False,
             "time_created_ns": time.time_ns(), "input_sizes": [list(t.shape)] if t is not None else [],
             "input_dtypes": [DTYPES.get(t.dtype, str(t.dtype))] if t is not None else [], "work": None,
             "done": False}
        st["record"] += 1
        st["entries"].append(e)
        del st["entries"][:-2000]
        work = real(*a, **k)
        if work is not None and named.get("async_op"):
            e["work"] = work
        else:
            e["done"] = True
        return work

    setattr(dist, name, f)


for n in ARGS:
    wrap(n)


def completed(e):
    if not e["done"] and e["work"] is not None and e["work"].is_completed():
        e["done"] = True
    return e["done"]


def dump(includeCollectives=True, onlyActive=False):
    status = {}
    for pg, (key, name) in keys().items():
        mine = [e for e in st["entries"] if e["process_group"][0] == name]
        done = 0
        for e in mine:
            if not completed(e):
                break
            done = e["collective_seq_id"]
        status[str(key)] = {"last_enqueued_collective": str(st["seq"].get(name, 0)), "last_started_collective": "-1",
                            "last_completed_collective": str(done)}
    d = {"version": "2.10", "comm_lib_version": "", "nccl_comm_state": {},
         "pg_config": {"": {"desc": "", "name": "", "ranks": "[]"}}, "pg_status": status}
    if includeCollectives:
        d["entries"] = [{k: v for k, v in e.items() if k not in ("work", "done")} for e in st["entries"]]
    return json.dumps(d).encode()


C._dump_fr_trace_json = dump
c10d._world = types.SimpleNamespace(pg_names=c10d._pg_names, pg_group_ranks=c10d._pg_group_ranks)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
