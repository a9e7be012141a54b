"""Runs a script with an imitation of torch 2.x's in-process flight recorder on a torch without one (1.13 here):
torch._C._distributed_c10d._dump_fr_trace_json(includeCollectives, onlyActive) returns the JSON torch 2.11 returns
(format as in tests/fixtures/fr, recorded on the GPU machine), built from this rank's calls to all_reduce,
broadcast and barrier. Usage: python3 fake_recorder.py SCRIPT [args...]"""
import json, runpy, sys, time
import torch
import torch.distributed as dist

C = torch._C._distributed_c10d
st = {"seq": 0, "entries": []}


def wrap(name):
    real = getattr(dist, name)

    def f(*a, **k):
        t = a[0] if a and isinstance(a[0], torch.Tensor) else None
        st["seq"] += 1
        st["entries"].append({"record_id": st["seq"] - 1, "pg_id": 0, "process_group": ["0", "default_pg"],
                              "collective_seq_id": st["seq"], "p2p_seq_id": 0, "op_id": st["seq"],
                              "profiling_name": "gloo:" + name, "state": "scheduled", "is_p2p": False,
                              "time_created_ns": time.time_ns(), "input_sizes": [list(t.shape)] if t is not None else [],
                              "input_dtypes": ["Float"] if t is not None else []})
        return real(*a, **k)

    setattr(dist, name, f)


for n in ("all_reduce", "broadcast", "barrier"):
    wrap(n)


def dump(includeCollectives=True, onlyActive=False):
    d = {"version": "2.10", "comm_lib_version": "", "nccl_comm_state": {},
         "pg_config": {"": {"desc": "", "name": "", "ranks": "[%s]" % ", ".join(map(str, range(dist.get_world_size())))}},
         "pg_status": {"0": {"last_enqueued_collective": str(st["seq"]), "last_started_collective": "-1",
                             "last_completed_collective": str(st["seq"] - 1)}}}
    if includeCollectives:
        d["entries"] = st["entries"][-2000:]
    return json.dumps(d).encode()


C._dump_fr_trace_json = dump
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
