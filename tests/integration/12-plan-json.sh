#!/usr/bin/env bash
# `ddplaunch plan` (issue 2): examples/job.ini --json parses (python json and jq) and shows RANK, LOCAL_RANK,
# WORLD_SIZE, MASTER_ADDR and MASTER_PORT for every local rank; torchrun-style flags give the right ranks on
# a later node; every value says where it came from (default < site < spec < env < cli); the text form
# lists the same; plan starts nothing.
. "$DDP_SRCDIR/tests/integration/lib.sh"
cd "$DDP_SRCDIR" || fail "no source dir"
# The JSON env lists what ddplaunch sets or changes: variables the test compares must not be inherited.
unset RANK LOCAL_RANK WORLD_SIZE MASTER_ADDR MASTER_PORT DDPLAUNCH_CONFIG PYTHONUNBUFFERED
for v in $(env | sed -n 's/^\(PET_[A-Z_]*\)=.*/\1/p; s/^\(DDPLAUNCH_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
HAVE_JQ=0
command -v jq >/dev/null && HAVE_JQ=1

"$DDP" plan examples/job.ini --json >"$TMP/plan.json" 2>"$TMP/err"
expect_eq "plan status" "$?" 0
$PY -m json.tool "$TMP/plan.json" >/dev/null || { cat "$TMP/plan.json"; fail "plan --json is not JSON (python)"; }
if [ $HAVE_JQ = 1 ]; then jq -e . "$TMP/plan.json" >/dev/null || fail "plan --json is not JSON (jq)"; fi

# check_ranks FILE NPROC NODE_RANK NNODES MASTER_ADDR [MASTER_PORT]
check_ranks() {
    $PY - "$@" <<'PYEOF' || fail "rank variables wrong in $1"
import json, sys
path, nproc, node, nnodes, addr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
port = sys.argv[6] if len(sys.argv) > 6 else None
p = json.load(open(path))
ws = p["workers"]
assert len(ws) == nproc, "%d workers, want %d" % (len(ws), nproc)
assert p["world_size"] == nproc * nnodes
for lr, w in enumerate(ws):
    e = w["env"]
    want = {"RANK": str(node * nproc + lr), "LOCAL_RANK": str(lr), "WORLD_SIZE": str(nproc * nnodes),
            "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": str(node), "GROUP_WORLD_SIZE": str(nnodes),
            "MASTER_ADDR": addr, "TORCHELASTIC_USE_AGENT_STORE": "False"}
    for k, v in want.items():
        assert e.get(k) == v, "local rank %d: %s=%r, want %r" % (lr, k, e.get(k), v)
    assert e["MASTER_PORT"].isdigit() and 0 < int(e["MASTER_PORT"]) < 65536, e["MASTER_PORT"]
    assert e["MASTER_PORT"] == str(p["master_port"])
    if port:
        assert e["MASTER_PORT"] == port, e["MASTER_PORT"]
    assert w["local_rank"] == lr and w["rank"] == node * nproc + lr
print("ranks ok: %s" % path)
PYEOF
}
check_ranks "$TMP/plan.json" 4 0 1 127.0.0.1
$PY - "$TMP/plan.json" <<'PYEOF' || fail "examples/job.ini plan content"
import json, sys
p = json.load(open(sys.argv[1]))
w = p["workers"][0]
# issue 54: a spec's script and its workers' directory are the spec's own directory
assert w["argv"][1:] == ["-u", w["cwd"] + "/train_ddp.py", "--steps", "10"], w["argv"]
assert w["cwd"].startswith("/") and w["cwd"].endswith("/examples"), w["cwd"]
assert w["env"]["PYTHONUNBUFFERED"] == "1"
assert w["env"]["OMP_NUM_THREADS"] == "1" or "OMP_NUM_THREADS" not in w["env"]
s = p["spec"]
assert s["job.nproc_per_node"] == {"value": "4", "origin": "spec"}, s["job.nproc_per_node"]
assert s["restart.max_restarts"] == {"value": "1", "origin": "spec"}
assert s["job.role"] == {"value": "default", "origin": "default"}
assert s["env.PYTHONUNBUFFERED"]["origin"] == "spec"
PYEOF
if [ $HAVE_JQ = 1 ]; then
    expect_eq "jq RANKs" "$(jq -r '[.workers[].env.RANK] | join(",")' "$TMP/plan.json")" "0,1,2,3"
fi

# torchrun style on node 1 of 2, explicit port, env and flags layered over a site config and a spec.
"$DDP" plan --json --nnodes 2 --node_rank=1 --nproc-per-node 3 --master-addr 10.1.2.3 --master-port 29777 \
    --no-python /bin/true >"$TMP/p2.json" 2>"$TMP/err" || { cat "$TMP/err"; fail "torchrun-style plan failed"; }
check_ranks "$TMP/p2.json" 3 1 2 10.1.2.3 29777

printf '[restart]\nmax_restarts = 7\nbackoff = 2s\nshutdown_timeout = 9s\n[numa]\nbind = socket\n' >"$TMP/site.ini"
printf '[job]\nprogram = /bin/true\nnproc_per_node = 4\n[restart]\nbackoff = 3s\nmax_restarts = 8\n[numa]\nbind = none\n' \
    >"$TMP/job.ini"
DDPLAUNCH_CONFIG=$TMP/site.ini DDPLAUNCH_RESTART_MAX_RESTARTS=9 PET_NPROC_PER_NODE=3 \
    "$DDP" plan --json --nproc-per-node 2 "$TMP/job.ini" >"$TMP/p3.json" 2>"$TMP/err" ||
    { cat "$TMP/err"; fail "layered plan failed"; }
check_ranks "$TMP/p3.json" 2 0 1 127.0.0.1
$PY - "$TMP/p3.json" <<'PYEOF' || fail "origins"
import json, sys
s = json.load(open(sys.argv[1]))["spec"]
want = {
    "job.nproc_per_node": ("2", "cli"),          # flag over PET_NPROC_PER_NODE over spec
    "restart.max_restarts": ("9", "env"),        # DDPLAUNCH_ over spec over site
    "restart.backoff": ("3s", "spec"),           # spec over site
    "restart.shutdown_timeout": ("9s", "site"),  # site over default
    "numa.bind": ("none", "spec"),
    "timeout.heartbeat": ("file", "default"),
}
for k, (v, o) in want.items():
    assert s[k] == {"value": v, "origin": o}, "%s = %r, want %r" % (k, s[k], (v, o))
print("origins ok")
PYEOF

# The text form: same facts, one line per key with its origin, and per rank the environment.
DDPLAUNCH_CONFIG=$TMP/site.ini "$DDP" plan "$TMP/job.ini" >"$TMP/plan.txt" 2>"$TMP/err" || fail "text plan failed"
expect_grep "^    shutdown_timeout +=  *9s +\(site $TMP/site.ini:4\)" "$TMP/plan.txt"
expect_grep "^    backoff +=  *3s +\(spec $TMP/job.ini:5\)" "$TMP/plan.txt"
expect_grep '^local rank 3:' "$TMP/plan.txt"
expect_grep '^    RANK=3$' "$TMP/plan.txt"
expect_grep '^    WORLD_SIZE=4$' "$TMP/plan.txt"
expect_grep '^    MASTER_ADDR=127.0.0.1$' "$TMP/plan.txt"
expect_grep '^    MASTER_PORT=[0-9]+$' "$TMP/plan.txt"

# plan starts nothing.
printf '[job]\ncommand = /usr/bin/touch %s/marker\nnproc_per_node = 2\n' "$TMP" >"$TMP/touch.ini"
"$DDP" plan "$TMP/touch.ini" >/dev/null 2>&1 || fail "plan of touch.ini failed"
[ -e "$TMP/marker" ] && fail "plan started a worker"

# JSON stays valid with awkward values.
printf '[job]\nprogram = /bin/true\nname = q"uo\\\\te\n[env]\nWEIRD = tab\there "quoted" back\\\\slash ünï\n' >"$TMP/odd.ini"
"$DDP" plan --json "$TMP/odd.ini" >"$TMP/p4.json" 2>"$TMP/err" || { cat "$TMP/err"; fail "plan odd.ini failed"; }
$PY -c 'import json,sys; e=json.load(open(sys.argv[1]))["workers"][0]["env"]["WEIRD"]; assert e == "tab\there \"quoted\" back\\\\slash ünï", repr(e)' \
    "$TMP/p4.json" || { cat "$TMP/p4.json"; fail "awkward values not escaped right"; }

# issue 43 trap 2: plan lists every variable a worker gets from ddplaunch, with "<run dir>" where the run directory
# goes (heartbeat and stacks files, the sampler's PYTHONPATH entry, DDPLAUNCH_PYTHONPATH...): the names a real
# worker (/usr/bin/env, --no-python) has beyond the launcher's environment are all in plan --json's env.
env >"$TMP/launcher.env"
"$DDP" --no-python --nproc-per-node 1 --set timeout.stall=1h /usr/bin/env >"$TMP/worker.env" 2>"$TMP/err" ||
    { cat "$TMP/err"; fail "env worker failed"; }
"$DDP" plan --json --no-python --nproc-per-node 1 --set timeout.stall=1h /usr/bin/env >"$TMP/envplan.json" 2>"$TMP/err" ||
    { cat "$TMP/err"; fail "plan of the env worker failed"; }
$PY - "$TMP/launcher.env" "$TMP/worker.env" "$TMP/envplan.json" <<'PYEOF' || fail "plan does not list every variable ddplaunch adds"
import json, sys
names = lambda f: {l.split("=", 1)[0] for l in open(f) if "=" in l and l[0].isalpha()}
added = names(sys.argv[2]) - names(sys.argv[1])
planned = set(json.load(open(sys.argv[3]))["workers"][0]["env"])
for must in ("PYTHONPATH", "DDPLAUNCH_PYTHONPATH", "DDPLAUNCH_STACKS_FILE", "DDPLAUNCH_STACKS_SIGNAL",
             "DDPLAUNCH_HEARTBEAT_FILE"):
    assert must in added, "precondition: the worker did not get %s" % must
missing = sorted(added - planned)
assert not missing, "a worker gets %s, which plan does not list" % missing
print("ok: plan lists all %d variables ddplaunch adds" % len(added))
PYEOF

# issue 43 item 6: plan shows the values the job uses for defaults whose 0 means something else, and per rank only
# what differs from local rank 0.
"$DDP" plan --nnodes 2 --node-rank 1 --master-addr 10.0.0.1 --nproc-per-node 4 --no-python /bin/true \
    >"$TMP/p6.txt" 2>"$TMP/err" || { cat "$TMP/err"; fail "plan for item 6 failed"; }
expect_grep '^    join_timeout += 900s +\(default 0 = 600s with c10d, 900s static\)$' "$TMP/p6.txt"
expect_grep '^    min_nproc_per_node += 4 +\(default 0 = nproc_per_node unless on_timeout = downsize\)$' "$TMP/p6.txt"
expect_eq "WORLD_SIZE lines (rank 0 only)" "$(grep -c '^    WORLD_SIZE=8$' "$TMP/p6.txt")" 1
expect_grep '^  environment: as local rank 0.s, except:$' "$TMP/p6.txt"
sed -n '/^local rank 3:/,$p' "$TMP/p6.txt" >"$TMP/p6.r3"
expect_grep '^    RANK=7$' "$TMP/p6.r3"
expect_grep '^    LOCAL_RANK=3$' "$TMP/p6.r3"
grep -q 'MASTER_ADDR' "$TMP/p6.r3" && fail "rank 3 repeats what rank 0 has"
[ "$(wc -l <"$TMP/p6.r3")" -lt 15 ] || { cat "$TMP/p6.r3"; fail "rank 3's part of plan is $(wc -l <"$TMP/p6.r3") lines"; }
echo "plan ok"
