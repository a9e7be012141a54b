#!/usr/bin/env bash
# The console on a terminal (issue 23 item 15): the launcher's own lines are coloured when stderr is a terminal
# (script(1) gives it one), never with NO_COLOR set or on a file; a job that succeeded after restarts ends with
# one line naming the attempts and the time, and a job without restarts prints nothing.
# Item 5: a worker started from a terminal sees a terminal (isatty, the terminal's size, as under torchrun), the
# size follows the launcher's terminal (SIGWINCH), and log files, output capture and hang detection still work.
. "$DDP_SRCDIR/tests/integration/lib.sh"
command -v script >/dev/null || fail "script(1) (bsdutils) is needed to give the launcher a terminal"

# Rank 1 fails in attempt 0 and succeeds in attempt 1.
cat >"$TMP/flaky.sh" <<'EOS'
#!/bin/sh
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$LOCAL_RANK" = 1 ] && { echo "boom" >&2; exit 3; }
echo "ok $RANK"
EOS
chmod +x "$TMP/flaky.sh"
# on_tty FILE ARGS...: run ddplaunch ARGS on a terminal (stdin from /dev/null), its terminal output to FILE
on_tty() {
    _out=$1
    shift
    printf '%s\0' "$DDP" "$@" >"$TMP/argv"
    script -qec "xargs -0 -a '$TMP/argv' sh -c 'exec \"\$@\"' sh" /dev/null </dev/null >"$_out"
}
ESC=$(printf '\033')

# A failure on a terminal: "error:" in red, the summary's title in red.
on_tty "$TMP/tty" --no-python --nproc-per-node 2 "$TMP/flaky.sh"
grep -q "ddplaunch: ${ESC}\[1;31merror: ${ESC}\[0mattempt 0: rank 1" "$TMP/tty" || { cat -v "$TMP/tty"; fail "no red error:"; }
grep -q "${ESC}\[1;31m.*flaky.sh FAILED (exit status 3)${ESC}\[0m" "$TMP/tty" || { cat -v "$TMP/tty"; fail "no red FAILED title"; }
grep -q '^\[rank1\]: boom' "$TMP/tty" || { cat -v "$TMP/tty"; fail "worker line changed on a terminal"; }
# NO_COLOR set: none; NO_COLOR empty: colours
NO_COLOR=1 on_tty "$TMP/tty" --no-python --nproc-per-node 2 "$TMP/flaky.sh"
grep -q "FAILED (exit status 3)" "$TMP/tty" || { cat -v "$TMP/tty"; fail "NO_COLOR: no summary"; }
grep -q "$ESC" "$TMP/tty" && { cat -v "$TMP/tty"; fail "NO_COLOR=1: colours on the terminal"; }
NO_COLOR= on_tty "$TMP/tty" --no-python --nproc-per-node 2 "$TMP/flaky.sh"
grep -q "$ESC" "$TMP/tty" || { cat -v "$TMP/tty"; fail "NO_COLOR empty: no colours"; }
# stderr on a file: none
"$DDP" --no-python --nproc-per-node 2 "$TMP/flaky.sh" >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 3
expect_grep "FAILED \(exit status 3\)" "$TMP/err"
grep -q "$ESC" "$TMP/err" && { cat -v "$TMP/err"; fail "colours on a file"; }

# Success after a restart: one line, also on a file; green on a terminal.
"$DDP" --no-python --nproc-per-node 2 --max-restarts 2 --set restart.backoff=0 "$TMP/flaky.sh" >"$TMP/out" 2>"$TMP/err"
expect_eq "status after a restart" "$?" 0
expect_grep '^ddplaunch: .*flaky\.sh succeeded after 2 attempts \(1 restart\) in [0-9]+\.[0-9] s$' "$TMP/err"
on_tty "$TMP/tty" --no-python --nproc-per-node 2 --max-restarts 2 --set restart.backoff=0 "$TMP/flaky.sh"
grep -q "${ESC}\[32m.*flaky.sh succeeded${ESC}\[0m after 2 attempts" "$TMP/tty" || { cat -v "$TMP/tty"; fail "no green success line"; }
# Success without restarts: silent.
"$DDP" --no-python --nproc-per-node 2 /bin/true >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
[ -s "$TMP/err" ] && { cat "$TMP/err"; fail "a success without restarts printed on stderr"; }
echo "item 15: colours on a terminal only, NO_COLOR honoured, success after restart in one line"

# ---- item 5
cat >"$TMP/tty.py" <<'EOS'
import os, sys, time
def size(fd):
    try:
        s = os.get_terminal_size(fd)
        return "%dx%d" % (s.columns, s.lines)
    except OSError:
        return "none"
os.write(1, ("tty out=%d err=%d size=%s,%s\n" % (os.isatty(1), os.isatty(2), size(1), size(2))).encode())
if len(sys.argv) > 1 and sys.argv[1] == "winch":  # wait for the terminal to reach 77x20, then say what it is
    open(os.path.join(os.environ["TTYDIR"], "ready.%s" % os.environ["RANK"]), "w").close()
    t0 = time.time()
    # stty resizes in two steps (cols, then rows): 77x45 on the way is not the end
    while size(1) != "77x20" and time.time() - t0 < 60:
        time.sleep(0.05)
    os.write(1, ("resized out=%s err=%s\n" % (size(1), size(2))).encode())
EOS
TORCHRUN=(env -u OMP_NUM_THREADS "$PY" "$DDP_SRCDIR/bench/torchrun.py" --monitor_interval 0.1)
# sized_tty FILE CMD...: CMD on a 123x45 terminal, its terminal output (without '\r') to FILE
sized_tty() {
    _out=$1
    shift
    printf '%s\0' "$@" >"$TMP/argv"
    script -qec "stty cols 123 rows 45; xargs -0 -a '$TMP/argv' sh -c 'exec \"\$@\"' sh" /dev/null </dev/null |
        tr -d '\r' >"$_out"
}
# --master_port 0: torchrun's store binds a port the kernel picks at that moment (tty.py needs no MASTER_PORT). A
# port chosen here and closed before torchrun binds it can be taken in between by any other program ("Address
# already in use" in make test on a busy host: issue 34 item 15).
sized_tty "$TMP/tr.tty" "${TORCHRUN[@]}" --master_port 0 --nproc_per_node 1 "$TMP/tty.py"
sized_tty "$TMP/dd.tty" "$DDP" --nproc-per-node 1 "$TMP/tty.py"
expect_grep '^tty out=1 err=1 size=123x45,123x45$' "$TMP/tr.tty"
expect_eq "worker on a terminal (torchrun's line)" "$(grep '^tty ' "$TMP/dd.tty")" "$(grep '^tty ' "$TMP/tr.tty")"
# two workers (prefixed lines), with --log-dir: the log files get the bytes as written (no "\r\n")
sized_tty "$TMP/dd2.tty" "$DDP" --nproc-per-node 2 --log-dir "$TMP/ttylogs" "$TMP/tty.py"
expect_eq "two workers on a terminal" "$(grep -c '^\[rank[01]\]: tty out=1 err=1 size=123x45,123x45$' "$TMP/dd2.tty")" 2
f=$(find "$TMP/ttylogs" -path '*attempt_0/1/stdout.log')
[ -n "$f" ] || fail "no stdout.log under --log-dir"
expect_eq "stdout.log" "$(cat "$f")" "tty out=1 err=1 size=123x45,123x45"
expect_eq "carriage returns in stdout.log" "$(tr -cd '\r' <"$f" | wc -c)" 0
# not on a terminal: pipes, as before (and as torchrun's workers get the launcher's pipe)
"$DDP" --nproc-per-node 1 "$TMP/tty.py" >"$TMP/out" 2>"$TMP/err"
expect_eq "worker on a file" "$(cat "$TMP/out")" "tty out=0 err=0 size=none,none"
# SIGWINCH: the terminal shrinks to 77 columns while the workers run; they see it
mkdir -p "$TMP/winch"
printf '%s\0' "$DDP" --nproc-per-node 2 "$TMP/tty.py" winch >"$TMP/argv"
TTYDIR=$TMP/winch script -qec "stty cols 123 rows 45; xargs -0 -a '$TMP/argv' sh -c 'exec \"\$@\"' sh & \
    for i in \$(seq 200); do [ -e '$TMP/winch/ready.0' ] && [ -e '$TMP/winch/ready.1' ] && break; sleep 0.05; done; \
    stty cols 77 rows 20; wait" /dev/null </dev/null | tr -d '\r' >"$TMP/winch.tty"
expect_eq "resized workers" "$(grep -c '^\[rank[01]\]: resized out=77x20 err=77x20$' "$TMP/winch.tty")" 2
# hang detection on a terminal: silence -> stacks captured from the workers' terminals -> verdict, exit 124
mkdir -p "$TMP/w"
cat >"$TMP/w/distributed_c10d.py" <<'EOS'
import time
def all_reduce(x):
    time.sleep(3600)
EOS
cat >"$TMP/w/stuck.py" <<'EOS'
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import distributed_c10d
def load_batch():
    time.sleep(3600)
os.write(1, b"step 0\n")
if os.environ["RANK"] == "1":
    load_batch()
distributed_c10d.all_reduce(1)
EOS
on_tty "$TMP/hang.tty" --nproc-per-node 3 --set timeout.heartbeat=output --set timeout.init=60s \
    --set timeout.stall=2s "$TMP/w/stuck.py"
tr -d '\r' <"$TMP/hang.tty" >"$TMP/hang.txt"
grep -q 'Hang verdict (high confidence): rank 1 .* at stuck.py:5 in load_batch' "$TMP/hang.txt" ||
    { cat "$TMP/hang.txt"; fail "no hang verdict from the stacks on the workers' terminals"; }
echo "item 5: workers see a 123x45 terminal as under torchrun, follow it to 77x20, logs unchanged, hang verdict"
echo ok
