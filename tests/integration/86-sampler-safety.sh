#!/usr/bin/env bash
# Issue 34 items 1-5 and 7: the live stack sampler never changes what a rank does. A rank that closes its fds and
# opens its own file finds only its own bytes there; a rank that unblocks every signal, or execs a program that
# does, is never sent the sample signal (and lives); a rank that re-exec'd itself (the mask kept, the sampler
# thread gone) gets no signal queued; a worker script whose training Python starts after a helper Python is
# sampled; a stacks file naming the exec shim does not make the shim kill the rank; and PYTHONPATH (with an empty
# entry, empty, unset) is what the program and its Python subprocesses see without ddplaunch, byte for byte.
. "$DDP_SRCDIR/tests/integration/lib.sh"
SET="--set timeout.sample_interval=200ms"

# item 1: fds closed and reused by the program
cat >"$TMP/fds.py" <<'EOF'
import os, sys, time
time.sleep(1)  # sampled a few times with its descriptor as opened
os.closerange(3, 4096)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
for i in range(15):
    os.write(fd, b"data %d\n" % i)
    time.sleep(0.1)
os.close(fd)
print("fds done")
EOF
"$DDP" --nproc-per-node 1 $SET "$TMP/fds.py" "$TMP/data" >"$TMP/fds.out" 2>&1 || { cat "$TMP/fds.out"; fail "fds.py failed"; }
expect_grep "fds done" "$TMP/fds.out"
expect_eq "item 1: the program's own file holds only its bytes" "$(grep -vc '^data [0-9]*$' "$TMP/data")" 0
expect_eq "item 1: all its lines" "$(grep -c '^data' "$TMP/data")" 15

# item 2: a rank that resets its signal mask, and one that execs a program that does
cat >"$TMP/unblock.py" <<'EOF'
import os, signal, sys, time
time.sleep(1)
if sys.argv[1] == "exec":
    os.execv(sys.executable, [sys.executable, "-S", "-c",
             "import signal, time; signal.pthread_sigmask(signal.SIG_SETMASK, []); time.sleep(2); print('exec done')"])
signal.pthread_sigmask(signal.SIG_SETMASK, [])
time.sleep(2)
print("unblock done")
EOF
for how in mask exec; do
    "$DDP" --nproc-per-node 1 $SET "$TMP/unblock.py" $how >"$TMP/$how.out" 2>"$TMP/$how.err"
    rc=$?
    [ $rc = 0 ] || { cat "$TMP/$how.out" "$TMP/$how.err"; fail "item 2 ($how): exit $rc, want 0 (never killed by the sample signal)"; }
    expect_grep "(unblock|exec) done" "$TMP/$how.out"
    expect_grep "^ddplaunch: warning: attempt 0: rank 0: live stack sampling stopped for this rank: " "$TMP/$how.err"
    expect_eq "item 2 ($how): said once" "$(grep -c 'live stack sampling stopped' "$TMP/$how.err")" 1
done

# item 3: re-exec'd (the mask kept blocked, the sampler thread gone): no signal queued against it
cat >"$TMP/reexec.py" <<'EOF'
import os, sys, time
time.sleep(1)
os.execv(sys.executable, [sys.executable, "-S", "-c", """
import signal, time
time.sleep(3)
n = 0
for s in signal.sigpending():
    while signal.sigtimedwait([s], 0) is not None:
        n += 1
print('queued', n)
"""])
EOF
"$DDP" --nproc-per-node 1 $SET "$TMP/reexec.py" >"$TMP/reexec.out" 2>"$TMP/reexec.err" ||
    { cat "$TMP/reexec.out" "$TMP/reexec.err"; fail "reexec.py failed"; }
q=$(sed -n 's/.*queued \([0-9]*\)$/\1/p' "$TMP/reexec.out")
[ -n "$q" ] && [ "$q" -le 1 ] || { cat "$TMP/reexec.out"; fail "item 3: $q signals queued against the re-exec'd rank, want at most 1"; }
expect_grep "live stack sampling stopped for this rank: the sampler thread of pid [0-9]+ is gone" "$TMP/reexec.err"

# item 4: a helper Python, then the training Python in the same rank: the training one is sampled
cat >"$TMP/helper.py" <<'EOF'
import time
time.sleep(1)
EOF
cat >"$TMP/train.py" <<'EOF'
import time
def training_loop_marker():
    time.sleep(2)
training_loop_marker()
EOF
cat >"$TMP/two.sh" <<EOF
#!/bin/sh
$PY "$TMP/helper.py" && $PY "$TMP/train.py" && echo two done
EOF
chmod +x "$TMP/two.sh"
"$DDP" --no-python --nproc-per-node 1 $SET --log-dir "$TMP/two" "$TMP/two.sh" >"$TMP/two.out" 2>&1 ||
    { cat "$TMP/two.out"; fail "two.sh failed"; }
expect_grep "two done" "$TMP/two.out"
grep -q "in training_loop_marker" "$TMP"/two/*/attempt_0/stacks.0 ||
    { cat "$TMP"/two/*/attempt_0/stacks.0; fail "item 4: the training Python (registered second) was never sampled"; }

# item 5: a stacks file naming the exec shim (in the old and the new header form) is never signalled
cat >"$TMP/shim.sh" <<'EOF'
#!/bin/sh
[ -n "$DDPLAUNCH_STACKS_FILE" ] || { echo "no stacks file"; exit 3; }
start=$(sed 's/.*) //' /proc/$PPID/stat | cut -d' ' -f20)
printf 'ddplaunch-stacks pid=%d signal=37\n' $PPID >"$DDPLAUNCH_STACKS_FILE"
sleep 1
printf 'ddplaunch-stacks pid=%010d signal=%03d start=%020d tid=%010d err=000\n' $PPID 39 $start $PPID \
    >"$DDPLAUNCH_STACKS_FILE"
sleep 1
echo shim done
EOF
chmod +x "$TMP/shim.sh"
"$DDP" --no-python --nproc-per-node 1 $SET "$TMP/shim.sh" >"$TMP/shim.out" 2>"$TMP/shim.err"
rc=$?
[ $rc = 0 ] || { cat "$TMP/shim.out" "$TMP/shim.err"; fail "item 5: exit $rc, want 0 (the shim was signalled)"; }
expect_grep "shim done" "$TMP/shim.out"
expect_grep "live stack sampling stopped for this rank: its stacks file names pid [0-9]+, the exec shim" "$TMP/shim.err"

# item 7: PYTHONPATH as the program would see it without ddplaunch, and its Python subprocess too
cat >"$TMP/pp.py" <<'EOF'
import os, subprocess, sys
def show(who):
    return "%s %r %r" % (who, os.environ.get("PYTHONPATH"), [p for p in sys.path if "site-packages" not in p
                                                             and "dist-packages" not in p and "python3" not in p])
print(show("rank"))
print(subprocess.run([sys.executable, "-c", "import os, sys\n" + "\n".join(open(__file__).read().split("\n")[1:4])
                      + "\nprint(show('child'))"], stdout=subprocess.PIPE, text=True).stdout, end="")
EOF
mkdir -p "$TMP/cwd" "$TMP/opt"
for pp in ":$TMP/opt" "$TMP/opt::" "" unset; do
    if [ "$pp" = unset ]; then run() { (cd "$TMP/cwd" && env -u PYTHONPATH "$@"); }; else run() { (cd "$TMP/cwd" && PYTHONPATH=$pp "$@"); }; fi
    run $PY "$TMP/pp.py" >"$TMP/pp.want" 2>&1 || { cat "$TMP/pp.want"; fail "pp.py failed"; }
    run "$DDP" --nproc-per-node 1 "$TMP/pp.py" >"$TMP/pp.raw" 2>&1 || { cat "$TMP/pp.raw"; fail "pp.py failed under ddplaunch"; }
    grep -E "^(\[[^]]*\] ?)?(rank|child) " "$TMP/pp.raw" | sed -E 's/^\[[^]]*\] ?//' >"$TMP/pp.got"
    [ "$(wc -l <"$TMP/pp.want")" = 2 ] || { cat "$TMP/pp.want"; fail "precondition: two lines"; }
    diff "$TMP/pp.want" "$TMP/pp.got" >/dev/null || { diff "$TMP/pp.want" "$TMP/pp.got"; cat "$TMP/pp.raw"; fail "item 7: PYTHONPATH='$pp': not what the program sees without ddplaunch"; }
done

# issue 43 trap 2: a wrapper script (--no-python) that prepends its own library to PYTHONPATH keeps it: the sampler
# takes out only ddplaunch's entry when PYTHONPATH changed on the way, and the Python child imports from the library.
mkdir -p "$TMP/mylib"
echo 'X = "from mylib"' >"$TMP/mylib/mymod.py"
cat >"$TMP/wrap.sh" <<EOF
#!/bin/sh
export PYTHONPATH=$TMP/mylib\${PYTHONPATH:+:\$PYTHONPATH}
exec $PY $TMP/pp.py
EOF
chmod +x "$TMP/wrap.sh"
sed -i 's/^print(subprocess.run/import mymod; print("import", mymod.X)\nprint(subprocess.run/' "$TMP/pp.py"
for pp in unset "$TMP/opt" ":$TMP/opt"; do
    if [ "$pp" = unset ]; then run() { (cd "$TMP/cwd" && env -u PYTHONPATH "$@"); }; else run() { (cd "$TMP/cwd" && PYTHONPATH=$pp "$@"); }; fi
    run "$TMP/wrap.sh" >"$TMP/wr.want" 2>&1 || { cat "$TMP/wr.want"; fail "wrap.sh failed"; }
    run "$DDP" --no-python --nproc-per-node 1 "$TMP/wrap.sh" >"$TMP/wr.raw" 2>&1 || { cat "$TMP/wr.raw"; fail "trap 2: PYTHONPATH='$pp': wrap.sh failed under ddplaunch"; }
    grep -E "^(\[[^]]*\] ?)?(rank|child|import) " "$TMP/wr.raw" | sed -E 's/^\[[^]]*\] ?//' >"$TMP/wr.got"
    [ "$(wc -l <"$TMP/wr.want")" = 3 ] || { cat "$TMP/wr.want"; fail "precondition: three lines"; }
    diff "$TMP/wr.want" "$TMP/wr.got" >/dev/null || { diff "$TMP/wr.want" "$TMP/wr.got"; cat "$TMP/wr.raw"; fail "trap 2: PYTHONPATH='$pp': a wrapper's PYTHONPATH is not what it is without ddplaunch"; }
done
echo ok
