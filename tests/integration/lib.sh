# Shared helpers for integration tests. Source it: . "$DDP_SRCDIR/tests/integration/lib.sh"
set -u
DDP=${DDP_BUILD:?}/ddplaunch
HELPERS=$DDP_BUILD/helpers
FIXTURES=$DDP_SRCDIR/tests/fixtures
TOPO_DIR=$FIXTURES/topo
# Debian's python3 (with python3-torch), not a pyenv shim that may shadow it on PATH.
PY=/usr/bin/python3
export PYTHON_EXEC=$PY
TMP=$(mktemp -d /tmp/ddpit.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
# Private state for every test: the "host-wide" lock directory (port reservations, GPU leases) and the
# per-user runtime directory live in this test's $TMP, so a test never collides with real jobs on the machine
# or with another test, and leaves nothing behind. A test may point them elsewhere after sourcing this file.
export DDPLAUNCH_LOCK_DIR=$TMP/locks
export XDG_RUNTIME_DIR=$TMP/run
mkdir -m 0700 "$XDG_RUNTIME_DIR"
# Jobs of tests running at the same time on this host (other checkouts' suites) no longer see each other's port
# reservations, so `master_port = auto` would have them all try 29500 first and race for it between the bind
# test and the worker's bind: each test takes its auto ports from its own randomly placed 400-port range (below
# the kernel's ephemeral range). The command line, and a test that unsets or sets this, still win.
if [ -z "${DDPLAUNCH_JOB_MASTER_PORT+set}" ]; then
    _lo=$((29600 + RANDOM % 28 * 100))
    export DDPLAUNCH_JOB_MASTER_PORT=auto:$_lo-$((_lo + 399))
fi

# DDP_WARM=1: every job of the test restarts warm ([restart] warm = yes, ddplaunch(1) WARM RESTART): CI runs the
# restart, signal, output and torchrun-compatibility tests a second time so (make integration-warm).
if [ "${DDP_WARM:-0}" = 1 ]; then
    export DDPLAUNCH_RESTART_WARM=yes
fi

fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "$*"; exit 77; }
# expect_eq WHAT GOT WANT
expect_eq() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }
# expect_grep PATTERN FILE
expect_grep() { grep -qE -- "$1" "$2" || { echo "--- $2:"; cat "$2"; fail "no line matching '$1' in $2"; }; }
# klock_held WHAT / klock_count PREFIX: ddplaunch's kernel locks (abstract unix sockets, klock.h) of this
# test's lock namespace ($DDPLAUNCH_LOCK_DIR), e.g. "port-29500", "gpu-0000:18:00.0"
klock_held() { grep -qF " @ddplaunch$DDPLAUNCH_LOCK_DIR/$1" /proc/net/unix; }
klock_count() { grep -F " @ddplaunch$DDPLAUNCH_LOCK_DIR/$1" /proc/net/unix | awk '{print $NF}' | sort -u | grep -c .; }
# wait_gpus NAME: until both ranks of the job started in $TMP/NAME (its launcher pid in $TMP/NAME/pid, its
# output in $TMP/NAME/out) wrote their GPU (hold_gpu.sh); fails when the job ends first
wait_gpus() {
    for _ in $(seq 200); do
        [ -s "$TMP/$1/gpu.0" ] && [ -s "$TMP/$1/gpu.1" ] && return 0
        if ! kill -0 "$(cat "$TMP/$1/pid")" 2>/dev/null; then cat "$TMP/$1/out"; fail "job $1 ended early"; fi
        sleep 0.05
    done
    cat "$TMP/$1/out"
    fail "job $1 did not start its workers"
}
have_torch() { $PY -c 'import torch' >/dev/null 2>&1; }
# hold_port VAR [N [LO-HI]]: sets VAR to a port P such that P..P+N-1 (N = 1) are free and held for this test
# until its shell exits (port_hold.py: bound, never listening, so neither another program's bind to port 0 nor
# an outgoing connection can take them, while torch's TCPStore, ddplaunch and python listeners with
# SO_REUSEADDR still bind and listen there). For a port a command line must name (torchrun and ddplaunch halves
# with the same port, node 0 and node 1 of one job, ddplaunch's control port master_port + 1): never pick a port,
# close it and hope it stays free (issue 34 item 15). Where nothing needs to know the port, let the launcher
# choose: ddplaunch's master_port = auto, torchrun --master_port 0. Call it from the test's own shell, not from
# $(...) or a pipeline (VAR is set there). The holder is not a job of the test's shell (a plain `wait` does not wait for it): it
# ends when the test's shell ($$) does.
hold_port() {
    local _f
    _f=$(mktemp "$TMP/held.XXXXXX") && rm -f "$_f"
    ($PY "$DDP_SRCDIR/tests/integration/port_hold.py" "$_f" "$$" "${2:-1}" ${3:+"$3"} </dev/null >/dev/null 2>"$_f.err" &)
    for _ in $(seq 750); do [ -s "$_f" ] || [ -s "$_f.err" ] && break; sleep 0.02; done
    [ -s "$_f" ] || { cat "$_f.err"; fail "port_hold.py held no port"; }
    printf -v "$1" %s "$(cat "$_f")"
}
