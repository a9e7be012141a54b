#!/bin/bash
# Warm restart (issue 41): a restarted rank that starts in a standby interpreter sees what a fresh one sees
# (os.environ, sys.argv, __file__, sys.path[0], cwd, signal dispositions and masks, isatty, the main thread,
# its descriptors; on a terminal: isatty and its size), prints its first line at least 0.5 s sooner than a cold
# restart of the same job (torch 1.13's import takes about 1 s here), and a standby killed before the restart leaves
# its rank to a fresh start. A preload module that is not installed is skipped and named; no standby is started
# when MemAvailable is below twice their expected memory, and a warning says so. A standby whose preload brings in
# CUDA's driver initialised in a standby (a /dev/nvidia* descriptor; libcuda merely mapped is fine) turns warm
# restart off for the job, said in one line; restarts start cold.
. "$DDP_SRCDIR/tests/integration/lib.sh"
have_torch || skip "SKIP: no torch"
cp "$DDP_SRCDIR/tests/integration/warm_probe.py" "$TMP/probe.py"
mkdir -p "$TMP/work/sub"
run() { # run MODE [ddplaunch options...]: attempt 0's rank 0 dies by SIGKILL, attempt 1 runs
    local mode=$1
    shift
    mkdir -p "$TMP/$mode"
    (cd "$TMP/work/sub" && PROBE_OUT=$TMP/$mode $PY "$DDP_SRCDIR/tests/integration/warm_run.py" "$mode" "$TMP/$mode" \
        "$TMP/$mode.json" -- "$DDP" -v --nproc-per-node 2 --max-restarts 1 --set restart.backoff=0 --rdzv-id warmtest \
        "$@" ../../probe.py one "two words" --three)
    expect_eq "$mode: exit status" "$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["rc"])' "$TMP/$mode.json")" 0
}
run cold --set restart.warm=no
run warm --warm-restart --log-dir "$TMP/logs"
run fallback --warm-restart --set "restart.preload=torch, torch.distributed, ddplaunch_no_such_module"

# the restart was warm for both ranks, and for rank 0 only when rank 1's standby had been killed
expect_grep 'attempt 1: ranks 0,1 started warm' "$TMP/warm/launcher.txt"
expect_grep 'attempt 1: rank 0 started warm \(standby interpreter\), 1 fresh' "$TMP/fallback/launcher.txt"
grep -q 'started warm' "$TMP/cold/launcher.txt" && fail "cold: a rank started warm"
# a preload module that is not installed is skipped and named, and the standby is used all the same: one the user
# listed, and the default's torch._dynamo where torch is older than 2.0
expect_grep 'standby interpreters ready \([0-9]+ MiB in all; not installed, not preloaded: ddplaunch_no_such_module\)$' \
    "$TMP/fallback/launcher.txt"
if $PY -c 'import torch._dynamo' 2>/dev/null; then
    grep 'not installed' "$TMP/warm/launcher.txt" && fail "warm: torch._dynamo is installed, yet said not to be"
else
    expect_grep 'standby interpreters ready \([0-9]+ MiB in all; not installed, not preloaded: torch\._dynamo\)$' \
        "$TMP/warm/launcher.txt"
fi
sum=$(ls "$TMP"/logs/*/summary.json)
$PY -c "import json,sys; w=json.load(open(sys.argv[1]))['warm_starts']; sys.exit(w != [{'attempt': 1, 'ranks': [0, 1]}])" \
    "$sum" || fail "summary.json: warm_starts: $(grep -o '"warm_starts".*' "$sum" | head -c 200)"
$PY "$DDP_SRCDIR/tests/integration/records_check.py" "$DDP_SRCDIR/man/ddplaunch.1" "$(dirname "$sum")" ||
    fail "records do not match the documented schema"

# identical starts: the run's own directories and ports differ between runs (the warm one has a log_dir), nothing
# else may
$PY - "$TMP" <<'PYEOF' || fail "a warm start saw something a fresh start did not (above)"
import json, sys
tmp = sys.argv[1]
def load(mode, r):
    d = json.load(open("%s/%s/r%d_a1.json" % (tmp, mode, r)))
    run = d["environ"]["DDPLAUNCH_ATTEMPT_DIR"].rsplit("/attempt_", 1)[0]
    d["environ"]["MASTER_PORT"] = "PORT"
    if "NCCL_RAS_ADDR" in d["environ"]:  # a port of its own, chosen per run as MASTER_PORT is
        d["environ"]["NCCL_RAS_ADDR"] = "RAS"
    d["environ"].pop("PROBE_OUT")
    private = d["environ"]["DDPLAUNCH_HEARTBEAT_FILE"].rsplit("/", 1)[0]  # the run dir, also with a log_dir
    return json.loads(json.dumps(d).replace(run, "RUNDIR").replace(private, "RUNDIR"))
bad = 0
for mode in ("warm", "fallback"):
    for r in (0, 1):
        a, b = load("cold", r), load(mode, r)
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                bad += 1
                if isinstance(a.get(k), dict):
                    diff = {x: (a[k].get(x), b[k].get(x)) for x in set(a[k]) | set(b[k]) if a[k].get(x) != b[k].get(x)}
                    print("rank %d %s: %s: cold vs %s: %s" % (r, mode, k, mode, diff))
                else:
                    print("rank %d %s: %s: cold %r, %s %r" % (r, mode, k, a.get(k), mode, b.get(k)))
# the probe's view is the real one, not an empty one
d = load("warm", 1)
assert d["argv"] == ["../../probe.py", "one", "two words", "--three"], d["argv"]
assert d["file"].endswith("/probe.py") and d["file"].startswith("/"), d["file"]
assert d["name"] == "__main__" and d["environ"]["RANK"] == "1" and d["environ"]["TORCHELASTIC_RESTART_COUNT"] == "1"
assert d["cwd"].endswith("/work/sub") and d["path0"] == tmp, (d["cwd"], d["path0"])
sys.exit(1 if bad else 0)
PYEOF

# sooner: from the launcher's restart decision to each rank's first line of attempt 1
$PY - "$TMP" <<'PYEOF' || fail "a warm restart's first line did not come 0.5 s sooner than a cold one's"
import json, sys
tmp = sys.argv[1]
cold, warm = (json.load(open("%s/%s.json" % (tmp, m)))["first"] for m in ("cold", "warm"))
print("restart decision to first line (s): cold %s, warm %s" % (cold, warm))
sys.exit(0 if all(warm[r] + 0.5 <= cold[r] for r in ("0", "1")) else 1)
PYEOF
# On a terminal (script(1) gives the launcher one, 123x45): a rank that starts warm sees a terminal as a cold one
# does (isatty of its descriptors, the terminal's size).
command -v script >/dev/null || fail "script(1) (bsdutils) is needed to give the launcher a terminal"
cat >"$TMP/tty.py" <<'PYEOF'
import os, signal, time
def size(fd):
    try:
        s = os.get_terminal_size(fd)
        return "%dx%d" % (s.columns, s.lines)
    except OSError:
        return "none"
a = os.environ["TORCHELASTIC_RESTART_COUNT"]
os.write(1, ("tty attempt=%s isatty=%d,%d,%d size=%s,%s\n"
             % (a, os.isatty(0), os.isatty(1), os.isatty(2), size(1), size(2))).encode())
if a == "0":
    while not os.path.exists(os.environ["TTY_GO"]):
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGKILL)
PYEOF
# on_tty MODE [ddplaunch options...]: attempt 0's rank dies once attempt 0 printed and (warm) the standby is ready
on_tty() {
    local mode=$1 pid
    shift
    printf '%s\0' "$DDP" --nproc-per-node 1 --max-restarts 1 --set restart.backoff=0 "$@" "$TMP/tty.py" >"$TMP/argv"
    TTY_GO=$TMP/$mode.go script -qfec "stty cols 123 rows 45; xargs -0 -a '$TMP/argv' sh -c 'exec \"\$@\"' sh" \
        /dev/null </dev/null >"$TMP/$mode.tty" &
    pid=$!
    for _ in $(seq 1200); do
        grep -q '^tty attempt=0' "$TMP/$mode.tty" &&
            { [ "$mode" = ttycold ] || grep -q 'standby interpreter ready' "$TMP/$mode.tty"; } && break
        sleep 0.05
    done
    touch "$TMP/$mode.go"
    wait "$pid" || { cat -v "$TMP/$mode.tty"; fail "$mode: exit status $?"; }
    tr -d '\r' <"$TMP/$mode.tty" >"$TMP/$mode.txt"
}
on_tty ttycold --set restart.warm=no
on_tty ttywarm --warm-restart --set restart.preload=os
expect_grep 'attempt 1: rank 0 started warm' "$TMP/ttywarm.txt"
expect_grep '^tty attempt=1 isatty=[01],1,1 size=123x45,123x45$' "$TMP/ttycold.txt"
expect_eq "a warm rank on a terminal (the cold rank's line)" "$(grep '^tty attempt=1' "$TMP/ttywarm.txt")" \
    "$(grep '^tty attempt=1' "$TMP/ttycold.txt")"

# CUDA's driver in a standby. Loading libcuda is no sign (torch 2.11's `import torch` maps it and opens nothing,
# measured on the H200 host): a preload module that only loads the stand-in (build/helpers/fake_cuda) leaves the
# standby ready and the rank starts warm. cuInit is: it opens the driver's devices and reads CUDA_VISIBLE_DEVICES
# before the rank's is set. A preload module that calls the stand-in's cuInit (it opens FAKE_NVIDIACTL, a file the
# test makes under /dev as /dev/nvidia...) makes the standby unfit: one line says so and names the module, no
# standby is started again (attempt 1 runs 1.5 s before it fails as well: no second line), and the restarts start
# cold and succeed. The second part needs a writable /dev (root); without it, it is said and left out.
fake_cuda=$DDP_BUILD/helpers/fake_cuda/libcuda.so.1
[ -f "$fake_cuda" ] || fail "$fake_cuda is not built (make integration builds the helpers)"
mkdir -p "$TMP/cuda"
cat >"$TMP/cuda/ddp_cuda_probe.py" <<'PYEOF'
import ctypes, os
lib = ctypes.CDLL(os.environ["FAKE_CUDA"])
if os.environ.get("FAKE_CUINIT") == "1":
    lib.cuInit(0)
PYEOF
cat >"$TMP/cuda/job.py" <<'PYEOF'
import os, sys, time
a, r = os.environ["TORCHELASTIC_RESTART_COUNT"], os.environ["RANK"]
while a == "0" and not os.path.exists(os.environ["CUDA_GO"]):
    time.sleep(0.05)
print("attempt", a, "rank", r, "cuda module imported:", "ddp_cuda_probe" in sys.modules, flush=True)
if a == "1":
    time.sleep(1.5)  # a standby started for attempt 2 (there must be none) would have said its line by then
sys.exit(3 if a != "2" and r == "0" else 0)
PYEOF
cuda_job() { # NAME [VAR=VALUE...]: the job above, attempt 0 held until a standby spoke
    local name=$1
    shift
    rm -f "$TMP/cuda/go"
    # PYTHONPATH: a standby imports nothing from its working directory (issue 52)
    (cd "$TMP/cuda" && env FAKE_CUDA="$fake_cuda" CUDA_GO="$TMP/cuda/go" PYTHONPATH="$TMP/cuda" "$@" "$DDP" -v \
        --nproc-per-node 2 --max-restarts 2 --set restart.backoff=0 --warm-restart \
        --set "restart.preload=os, ddp_cuda_probe, json" \
        job.py >"$TMP/$name.out" 2>"$TMP/$name.err") &
    local pid=$!
    for _ in $(seq 600); do
        grep -qE 'warm restart off|standby interpreters? ready' "$TMP/$name.err" 2>/dev/null && break
        sleep 0.05
    done
    touch "$TMP/cuda/go"
    wait "$pid" || { cat "$TMP/$name.err"; fail "$name: exit status $?"; }
}
cuda_job cudalib
grep 'warm restart off' "$TMP/cudalib.err" && fail "libcuda loaded (no cuInit): warm restart was turned off"
expect_grep 'attempt 1: ranks? .*started warm' "$TMP/cudalib.err"
echo "libcuda loaded without cuInit: the standby is used"
ctl=/dev/nvidia-ddptest-$$
if touch "$ctl" 2>/dev/null; then
    cuda_job cuda FAKE_NVIDIACTL="$ctl" FAKE_CUINIT=1
    rm -f "$ctl"
    expect_grep "^ddplaunch: warning: warm restart off: preloading ddp_cuda_probe initialised CUDA \\($ctl open\\); a standby must not: restarting cold\$" \
        "$TMP/cuda.err"
    expect_eq "CUDA in a standby: the line, once" "$(grep -c 'warm restart off' "$TMP/cuda.err")" 1
    grep -E 'started warm|standby interpreters? ready' "$TMP/cuda.err" && fail "CUDA in a standby: a standby was used"
    expect_grep 'attempt 2: starting 2 workers' "$TMP/cuda.err"
    for r in 0 1; do
        expect_grep "^attempt 2 rank $r cuda module imported: False\$" "$TMP/cuda.out"
    done
    echo "CUDA in a standby (cuInit): said once, restarts cold"
else
    echo "CUDA in a standby (cuInit): left out: /dev is not writable here (needs root)"
fi

# Memory: no standby interpreters when MemAvailable is below twice their expected total, and a warning says so.
# MemAvailable as a container's /proc/meminfo may say it (lxcfs): a file mounted over /proc/meminfo in a mount
# namespace of this job's own (root only; said and left out otherwise).
cat >"$TMP/mem.py" <<'PYEOF'
import os, sys
sys.exit(3 if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and os.environ["RANK"] == "0" else 0)
PYEOF
printf 'MemTotal:        1048576 kB\nMemFree:          307200 kB\nMemAvailable:     307200 kB\n' >"$TMP/meminfo"
if unshare -m sh -c 'mount --bind "$0" /proc/meminfo' "$TMP/meminfo" 2>/dev/null; then
    unshare -m sh -c 'mount --bind "$0" /proc/meminfo && exec "$@"' "$TMP/meminfo" "$DDP" -v \
        --nproc-per-node 2 --max-restarts 1 --set restart.backoff=0 --warm-restart "$TMP/mem.py" >"$TMP/mem.out" 2>"$TMP/mem.err"
    expect_eq "low memory: exit status" "$?" 0
    expect_grep '^ddplaunch: warning: warm restart: no standby interpreters: MemAvailable 300 MiB is below twice the 2 x 256 MiB they would take; restarts start fresh$' "$TMP/mem.err"
    grep -E 'standby of local rank|standby interpreters? ready|started warm' "$TMP/mem.err" && fail "low memory: a standby was started"
    expect_grep 'attempt 1: starting 2 workers' "$TMP/mem.err"
    echo "low memory: no standbys, said"
else
    echo "low memory: not checked (no mount namespace: not root)"
fi

# Two agents (nodes 0 and 1 of a static job on this host), one rank each: rank 1 dies, node 0 restarts both
# nodes, and each agent's own standby takes its rank.
cat >"$TMP/mn.py" <<'PYEOF'
import os, signal, time
import torch.distributed as dist
a, r = os.environ["TORCHELASTIC_RESTART_COUNT"], os.environ["RANK"]
dist.init_process_group("gloo")
if a == "0":
    while not os.path.exists(os.environ["MN_GO"]):
        time.sleep(0.05)
    if r == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)
dist.barrier()
print("attempt", a, "rank", r, "done", flush=True)
PYEOF
hold_port port 2
for n in 0 1; do
    MN_GO=$TMP/mn.go "$DDP" --nnodes 2 --node-rank $n --master-addr 127.0.0.1 --master-port "$port" --nproc-per-node 1 \
        --max-restarts 1 --set restart.backoff=0 --warm-restart "$TMP/mn.py" >"$TMP/mn$n.out" 2>"$TMP/mn$n.err" &
    eval "mn$n=\$!"
done
for _ in $(seq 1200); do
    [ "$(cat "$TMP"/mn0.err "$TMP"/mn1.err | grep -c 'standby interpreter ready')" = 2 ] && break
    sleep 0.05
done
touch "$TMP/mn.go"
wait "$mn0" || { cat "$TMP/mn0.err"; fail "node 0 failed"; }
wait "$mn1" || { cat "$TMP/mn1.err"; fail "node 1 failed"; }
expect_grep 'attempt 1: rank 0 started warm' "$TMP/mn0.err"
expect_grep 'attempt 1: rank 1 started warm' "$TMP/mn1.err"
expect_grep 'attempt 1 rank 1 done' "$TMP/mn1.out"
echo "PASS"
