#!/usr/bin/env bash
# Side by side with Debian's torchrun (issue 3): one worker script under `python3 -m torch.distributed.run`
# (through bench/torchrun.py, the Std.from_str fix for Python 3.11) and under ddplaunch, same flags. Each rank
# writes the variables the launcher added to its environment; the names and values must be the same, apart
# from the run id and paths, and the documented differences listed below.
. "$DDP_SRCDIR/tests/integration/lib.sh"
have_torch || skip "python3-torch is not installed"

cat >"$TMP/dump.py" <<'EOS'
import json, os, sys
base = json.load(open(sys.argv[2]))
added = {k: v for k, v in os.environ.items() if base.get(k) != v}
json.dump(added, open(os.path.join(sys.argv[1], "env.%s.json" % os.environ["RANK"]), "w"), sort_keys=True)
EOS
# The environment both launchers start from.
env -u OMP_NUM_THREADS -u TORCHELASTIC_RUN_ID $PY -c 'import json, os; print(json.dumps(dict(os.environ)))' \
    >"$TMP/base.json"
# Both halves name the same port (MASTER_PORT is compared): held for the whole test (lib.sh hold_port).
hold_port port
mkdir -p "$TMP/tr" "$TMP/dd"
env -u OMP_NUM_THREADS $PY "$DDP_SRCDIR/bench/torchrun.py" --nproc_per_node 2 --master_port "$port" \
    --monitor_interval 0.1 --max_restarts 2 "$TMP/dump.py" "$TMP/tr" "$TMP/base.json" >"$TMP/tr.out" 2>&1 ||
    { cat "$TMP/tr.out"; fail "torchrun failed"; }
env -u OMP_NUM_THREADS "$DDP" --nproc-per-node 2 --master-port "$port" --max-restarts 2 \
    "$TMP/dump.py" "$TMP/dd" "$TMP/base.json" >"$TMP/dd.out" 2>&1 || { cat "$TMP/dd.out"; fail "ddplaunch failed"; }

$PY - "$TMP" <<'EOS' || fail "the environments differ (see above)"
import json, sys, os
tmp = sys.argv[1]
# Values that legitimately differ: ids and paths.
VARIES = {"TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE"}
# Known, deliberate differences (DESIGN.md section 6):
#  - ddplaunch's own extras: DDPLAUNCH_*, CUDA_DEVICE_ORDER;
#  - TORCHELASTIC_USE_AGENT_STORE: torchrun 1.13 hosts the TCPStore in its agent (True); ddplaunch does not
#    serve one, so rank 0 creates it (False);
#  - TORCH_NCCL_ASYNC_ERROR_HANDLING is torch 2.x's name of 1.13's NCCL_ASYNC_ERROR_HANDLING;
#  - TORCHELASTIC_SIGNALS_TO_HANDLE is set by torchrun 2.x (not 1.13);
#  - TORCHELASTIC_ENABLE_FILE_TIMER / TIMER_FILE only when the file timer is on;
#  - hang forensics (ddplaunch(1), DIFFERENCES FROM TORCHRUN): the fault handler and torch's flight recorder.
#    and the live hang watch's on-demand flight-recorder dump (LIVE HANG WATCH);
#  - NCCL_RAS_ADDR: each job's own NCCL RAS port, reserved host-wide, so two jobs on one host do not share
#    NCCL's default localhost:28028 (ddplaunch(1), ENVIRONMENT and DIFFERENCES FROM TORCHRUN; issue 38);
FORENSICS = {"PYTHONFAULTHANDLER", "TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DUMP_ON_TIMEOUT",
             "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"}
OURS_ONLY = lambda k: k.startswith("DDPLAUNCH_") or k in {"CUDA_DEVICE_ORDER", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                                                             "TORCHELASTIC_SIGNALS_TO_HANDLE", "NCCL_RAS_ADDR"} | FORENSICS
TR_ONLY = {"NCCL_ASYNC_ERROR_HANDLING"}
DIFFER = {"TORCHELASTIC_USE_AGENT_STORE"}
bad = 0
for r in (0, 1):
    tr = json.load(open(os.path.join(tmp, "tr", "env.%d.json" % r)))
    dd = json.load(open(os.path.join(tmp, "dd", "env.%d.json" % r)))
    for k in sorted(set(tr) | set(dd)):
        if k not in dd and k not in TR_ONLY:
            print("rank %d: torchrun sets %s=%s, ddplaunch does not" % (r, k, tr[k])); bad += 1
        elif k not in tr and not OURS_ONLY(k):
            print("rank %d: ddplaunch sets %s=%s, torchrun does not" % (r, k, dd[k])); bad += 1
        elif k in tr and k in dd and tr[k] != dd[k] and k not in VARIES and k not in DIFFER:
            print("rank %d: %s: torchrun %r, ddplaunch %r" % (r, k, tr[k], dd[k])); bad += 1
    shared = sorted(k for k in set(tr) & set(dd))
    print("rank %d: %d variables compared: %s" % (r, len(shared), " ".join(shared)))
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
              "TORCHELASTIC_MAX_RESTARTS", "OMP_NUM_THREADS", "GROUP_RANK", "ROLE_NAME"):
        if k not in shared:
            print("rank %d: %s missing from the comparison" % (r, k)); bad += 1
sys.exit(1 if bad else 0)
EOS
echo ok
