#!/usr/bin/env bash
# Containment (issue 15): text that other processes control reaches the terminal escaped and in bounded
# amounts: a job name with terminal escapes in another job's lease is shown with '?' for each control
# character; a worker flooding the timer FIFO with bad requests gets a few warnings a minute, not thousands.
# Issue 39: a GPU holder's command name (another user's, cut by the kernel mid-character) with escapes reaches
# no terminal and empties no record; `report` cuts a long UTF-8 job name on a character boundary, so the SVG
# stays well-formed XML.
. "$DDP_SRCDIR/tests/integration/lib.sh"
TOPO=$TOPO_DIR/2s-8gpu-aws-g4dn-metal-t4.xml
[ -r "$TOPO" ] || skip "fixture $TOPO not found"
WORKER=$DDP_SRCDIR/tests/integration/hold_gpu.sh

# 1. Job a, named with an OSC title and a clear-screen sequence, holds all 8 GPUs; job b is refused and names it.
mkdir -p "$TMP/a" "$TMP/b"
"$DDP" --topology "$TOPO" --nproc-per-node 8 --numa-binding none --set "job.name=$(printf 'x\033]0;owned\a\033[2Jy')" \
    --no-python "$WORKER" "$TMP/a" >"$TMP/a/out" 2>&1 &
echo $! >"$TMP/a/pid"
for _ in $(seq 200); do [ -s "$TMP/a/gpu.7" ] && break; sleep 0.05; done
[ -s "$TMP/a/gpu.7" ] || { cat "$TMP/a/out"; fail "job a did not start"; }
"$DDP" --topology "$TOPO" --nproc-per-node 2 --numa-binding none --no-python "$WORKER" "$TMP/b" >"$TMP/b/out" 2>&1
rc=$?
touch "$TMP/a/stop"
wait "$(cat "$TMP/a/pid")"
cat -v "$TMP/b/out"
[ "$rc" != 0 ] || fail "job b ran on leased GPUs"
grep -q $'\033' "$TMP/b/out" && fail "an escape sequence from job a's name reached job b's terminal"
grep -q $'\a' "$TMP/b/out" && fail "a BEL from job a's name reached job b's terminal"
expect_grep "job 'x\?\]0;owned\?\?\[2Jy'" "$TMP/b/out"

# 2. A worker writes 3000 over-long requests and 3000 malformed ones to the timer FIFO.
"$DDP" --nproc-per-node 1 --set timeout.timer_file=yes --no-python /bin/sh -c '
long=$(head -c 9000 /dev/zero | tr "\0" x)
i=0; while [ $i -lt 3000 ]; do echo "$long"; echo "{bad $i"; i=$((i+1)); done >"$TORCHELASTIC_TIMER_FILE"' \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status of the flooding job" "$?" 0
n=$(grep -c 'timer request' "$TMP/err")
echo "$n timer warnings"
[ "$n" -ge 1 ] && [ "$n" -le 10 ] || { head -20 "$TMP/err"; fail "$n warnings about bad timer requests (want 1..10)"; }

# 3. A GPU holder (through the fake NVML) whose command name has an OSC title, a BEL and a character the kernel
#    cut in two at 15 bytes: launch warning, busy = fail, plan, the OOM cause, the records and report.
fake=$DDP_BUILD/helpers/fake_nvml
H200=$TOPO_DIR/vm-2gpu-h200-nonuma.xml
if [ -e "$fake/libnvidia-ml.so.1" ] && [ -r "$H200" ]; then
    bash -c 'printf "x\033]0;pwn\a\342\202" >/proc/$$/comm; sleep 60 & wait' &
    holder=$!
    trap 'kill $holder 2>/dev/null' EXIT
    for _ in $(seq 50); do grep -q pwn "/proc/$holder/comm" && break; sleep 0.05; done
    printf 'gpu 0000:00:06.0 140G 0.5G\ngpu 0000:00:07.0 140G 0.5G\nproc 0 %s 139.5G\n' "$holder" >"$TMP/nvml.conf"
    export DDPLAUNCH_LOCK_DIR=$TMP/locks DDPLAUNCH_TOPOLOGY_NVML=1 FAKE_NVML_CONFIG=$TMP/nvml.conf
    nv() { LD_LIBRARY_PATH=$fake "$DDP" "$@"; }
    clean() { # $1: what, $2: file
        grep -q $'\033' "$2" && fail "$1: an escape from the holder's name reached it"
        grep -q $'\a' "$2" && fail "$1: a BEL from the holder's name reached it"
        $PY -c "import sys; open(sys.argv[1], 'rb').read().decode('utf-8')" "$2" || fail "$1: not valid UTF-8"
    }
    # the worker waits for the busy check beside the spawn (-v says when it answered: a job that ends first is
    # not told), and the debug lines are as clean as the warning
    nv -v --topology "$H200" --nproc-per-node 1 --no-python /bin/sh "$DDP_SRCDIR/tests/integration/await_line.sh" \
        "$TMP/h.err" "busy check beside the spawn answered" >"$TMP/h.out" 2>"$TMP/h.err" ||
        { cat "$TMP/h.err"; fail "the launch with a held GPU"; }
    clean "launch warning" "$TMP/h.err"
    expect_grep "is held by pid $holder \([^,]*, x\?\]0;pwn\?\?\?, 139.5 GiB\)" "$TMP/h.err"
    nv --topology "$H200" --nproc-per-node 1 --set gpus.busy=fail --no-python /bin/true 2>"$TMP/h.err"
    expect_eq "busy = fail: exit status" "$?" 75
    clean "busy = fail" "$TMP/h.err"
    nv plan --topology "$H200" --nproc-per-node 1 --no-python /bin/true >"$TMP/h.plan" 2>&1
    clean "plan" "$TMP/h.plan"
    nv plan --json --topology "$H200" --nproc-per-node 1 --no-python /bin/true >"$TMP/h.json" 2>/dev/null
    $PY -c "import json,sys; w=json.load(open(sys.argv[1], encoding='utf-8'))['workers'][0]; assert w['gpu_holders'][0]['command'].startswith('x?]0;pwn'), w" \
        "$TMP/h.json" || fail "plan --json: the holder's command"
    nv --topology "$H200" --nproc-per-node 1 --log-dir "$TMP/hl" --no-python /bin/sh -c \
        'echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" >&2; exit 1' >"$TMP/h.out" 2>"$TMP/h.err"
    expect_eq "oom: exit status" "$?" 1
    clean "the OOM cause" "$TMP/h.err"
    expect_grep "cause +: GPU memory held by pid $holder" "$TMP/h.err"
    run=$(ls -d "$TMP"/hl/*/ | head -1)
    $PY - "$run" <<'P' || fail "records of the held GPU's run"
import json, sys
run = sys.argv[1]
ev = [json.loads(l) for l in open(run + "/events.jsonl", encoding="utf-8")]
cause = [e for e in ev if e["event"] == "gpu_cause"]
assert cause and "pid" in cause[0]["text"] and "\x1b" not in cause[0]["text"], cause
rc = json.load(open(run + "/summary.json", encoding="utf-8"))["root_cause"]
assert rc["class"] == "cuda-oom" and rc["cause"].startswith("GPU memory held by pid"), rc
P
    "$DDP" report "$run" >"$TMP/h.report"
    clean "report" "$TMP/h.report"
    expect_grep "GPU memory held by pid $holder" "$TMP/h.report"
    kill $holder 2>/dev/null
    unset FAKE_NVML_CONFIG DDPLAUNCH_TOPOLOGY_NVML
fi

# 4. report --svg of a run whose job name is 200 two-byte characters after 6 bytes (cut to the report's buffer) and has an
#    escape: the SVG parses as XML and the terminal gets no escape.
name=$(printf 'jx\033[2J'; for _ in $(seq 200); do printf '\303\251'; done)
"$DDP" --nproc-per-node 1 --log-dir "$TMP/sv" --set "job.name=$name" --no-python /bin/true >/dev/null 2>&1 ||
    fail "the job with a long name did not run"
"$DDP" report --svg "$TMP/run.svg" "$TMP/sv" >"$TMP/sv.report" 2>&1 || { cat "$TMP/sv.report"; fail "report --svg"; }
grep -q $'\033' "$TMP/sv.report" && fail "report: the job name's escape reached the terminal"
$PY -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" "$TMP/run.svg" ||
    fail "the SVG is not well-formed XML"
echo ok
