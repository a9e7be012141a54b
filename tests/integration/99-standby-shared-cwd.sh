#!/bin/bash
# Issue 52 item 1, as an attacker: the job runs in a shared working directory (mode 1777) where another local user
# planted torch.py, threading.py, json.py and a module named as a preload entry. A cold "python SCRIPT" (its
# script elsewhere) never imports from the working directory; the standby interpreter, started as "python -c",
# had it first on sys.path while it imported its preload (and threading), and ran her code as root. Now it takes
# the working directory out before it imports anything: none of her files runs, the rank starts warm all the same
# and its torch is the real one.
. "$DDP_SRCDIR/tests/integration/lib.sh"
unset DDPLAUNCH_RESTART_WARM
chmod 711 "$TMP"
mkdir -m 1777 "$TMP/pub"
mkdir -m 700 "$TMP/own" "$TMP/marks"
chmod 733 "$TMP/marks" # her code, run as root, could write there; she cannot list it
plant() { cat >"$TMP/pub/$1.py"; }
as=self
if [ "$(id -u)" = 0 ] && command -v runuser >/dev/null; then
    M=ddptest-mallory
    if id -u "$M" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$M"; then
        plant() { runuser -u "$M" -- sh -c 'cat >"$0"' "$TMP/pub/$1.py"; }
        as=$M
    fi
fi
for m in torch threading json ddp_planted; do
    plant "$m" <<EOF
open("$TMP/marks/$m", "w").write("imported by pid %d\n" % __import__("os").getpid())
raise SystemExit("planted $m ran")
EOF
done
echo "planted by: $as ($(stat -c %U "$TMP/pub/torch.py"))"
cat >"$TMP/own/job.py" <<'EOF'
import os, sys
a = os.environ["TORCHELASTIC_RESTART_COUNT"]
t = None
try:
    import torch
    t = torch.__file__
except ImportError:
    pass
print("attempt", a, "cwd", os.getcwd(), "torch", t, "json", __import__("json").__file__, flush=True)
if a == "0":
    while not os.path.exists(os.environ["GO"]):
        __import__("time").sleep(0.05)
    sys.exit(3)
EOF
preload="json, ddp_planted, threading"
have_torch && preload="torch, $preload"
(cd "$TMP/pub" && GO=$TMP/own/go "$DDP" -v --nproc-per-node 1 --max-restarts 1 --set restart.backoff=0 \
    --set "restart.preload=$preload" "$TMP/own/job.py" >"$TMP/out" 2>"$TMP/err") &
pid=$!
for _ in $(seq 1200); do
    grep -qE 'standby interpreters? ready|cannot preload|warm restart off' "$TMP/err" && break
    sleep 0.05
done
touch "$TMP/own/go"
wait "$pid" || { cat "$TMP/err"; fail "exit status $?"; }
if ls "$TMP/marks"/* 2>/dev/null; then
    cat "$TMP/marks"/*
    fail "a file another user planted in the working directory ran"
fi
expect_grep 'standby interpreter ready \([0-9]+ MiB in all; not installed, not preloaded: ddp_planted\)$' "$TMP/err"
expect_grep 'attempt 1: rank 0 started warm' "$TMP/err"
expect_grep "^attempt 1 cwd $TMP/pub torch " "$TMP/out"
grep "^attempt 1 .*$TMP/pub/" "$TMP/out" && fail "the warm rank's modules came from the working directory"

# Item 16: what a preload's exception says is the program's text: printed with its control characters replaced
mkdir -p "$TMP/badmod"
printf 'raise RuntimeError("\\x1b[31mred\\x07 and \\x1b]0;title\\x07")\n' >"$TMP/badmod/ddp_bad_preload.py"
(cd "$TMP/own" && GO=$TMP/own/go2 PYTHONPATH=$TMP/badmod "$DDP" --nproc-per-node 1 --max-restarts 1 \
    --set restart.backoff=0 --set "restart.preload=ddp_bad_preload" job.py >"$TMP/bad.out" 2>"$TMP/bad.err") &
pid=$!
for _ in $(seq 1200); do
    grep -q 'cannot preload' "$TMP/bad.err" && break
    sleep 0.05
done
touch "$TMP/own/go2"
wait "$pid" || { cat "$TMP/bad.err"; fail "bad preload: exit status $?"; }
expect_grep "warm restart: the standby interpreter of local rank 0 cannot preload: RuntimeError: .*red" "$TMP/bad.err"
if grep -q "$(printf '\033')\|$(printf '\007')" "$TMP/bad.err"; then
    cat -v "$TMP/bad.err"
    fail "a preload's exception reached the terminal raw"
fi
echo "a preload's exception: escaped"

# Item 15: a standby is known by the pid its shim started, not by its "ready" line: a preload that names another
# process (here a sleep of the test's) before the standby speaks gets its standby refused, and that process is
# neither moved into the attempt's cgroup nor ended with it
sleep 300 &
victim=$!
printf 'import os\nos.write(4, ("ready %%s 1000 -\\n" %% os.environ["VICTIM"]).encode())\n' >"$TMP/badmod/ddp_liar.py"
(cd "$TMP/own" && GO=$TMP/own/go3 VICTIM=$victim PYTHONPATH=$TMP/badmod "$DDP" --nproc-per-node 1 --max-restarts 1 \
    --set restart.backoff=0 --set "restart.preload=ddp_liar" job.py >"$TMP/liar.out" 2>"$TMP/liar.err") &
pid=$!
for _ in $(seq 1200); do
    grep -qE 'said it is pid|standby interpreters? ready' "$TMP/liar.err" && break
    sleep 0.05
done
touch "$TMP/own/go3"
wait "$pid" || { cat "$TMP/liar.err"; fail "liar: exit status $?"; }
expect_grep "warm restart: the standby of local rank 0 said it is pid $victim, but its shim started pid [0-9]+: not used" \
    "$TMP/liar.err"
grep 'started warm' "$TMP/liar.err" && fail "liar: the lying standby was used"
kill -0 "$victim" 2>/dev/null || fail "the process a standby named was ended with the job"
kill "$victim"
echo "a standby that names another pid: not used, that process untouched"
echo "PASS"
