#!/usr/bin/env bash
# Tests do not race for ports (issue 34 item 15). A test that took a port from a bind to port 0, closed it and
# let torchrun bind it later failed ("Address already in use") whenever another program took the port in
# between. Now a port a command line must name is held until the test ends (lib.sh hold_port, port_hold.py), and
# where nothing needs to know it the launcher picks (ddplaunch's master_port = auto, torchrun --master_port 0).
#   1. no test under tests/ picks a port that way (or a fixed or random port number outside a private netns);
#   2. next to a busy neighbour (port_squat.py in a private network namespace: it takes every odd port of a small
#      ephemeral range, and a freed one within ~30 ms), the old pattern fails with "Address already in use",
#      while a held port and --master_port 0 run torchrun, and a held pair runs a 2-node ddplaunch job on this host.
# Every changed test runs the same way: DDP_PORT_SQUAT=1 DDP_TESTS=NN make integration.
if [ "${DDP_PORT_SQUATTED:-}" != 1 ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
    exec unshare -n "$DDP_SRCDIR/tests/integration/squat_env.sh" bash "$0" "$@"
fi
. "$DDP_SRCDIR/tests/integration/lib.sh"

# 1. the pattern, anywhere in the tests (this file and the helpers that explain it excepted, a line marked
#    "# port held" whose socket stays bound in the same process while the port is used: no window to lose it in,
#    and a line marked "# port retried" for a server that binds the ports itself (etcd): the test starts it again
#    on new ports when it says "address already in use")
cd "$DDP_SRCDIR"
bad=$(grep -nE 'getsockname\(\)\[1\]|free_port\b|^\s*(local )?[a-zA-Z_]*(port|PORT)=\$\(\(|RANDOM.*(port|PORT)|(port|PORT).*RANDOM' \
    tests/integration/*.sh tests/integration/*.py tests/slurm/*.sh tests/packaging/*.sh tests/unit/*.c 2>/dev/null |
    grep -vE '^tests/integration/(89-port-races\.sh|port_hold\.py|port_squat\.py|lib\.sh):' | grep -vE '# port (held|retried)' || true)
[ -z "$bad" ] || { echo "$bad"; fail "a test picks a port and hopes it stays free (use hold_port, or let the launcher pick)"; }
# torchrun without a port binds 29500, which anything may hold
bad=$(grep -nE 'torchrun\.py"? ' tests/integration/*.sh | grep -vE -- '--master_port|=\(|\\$' || true)
[ -z "$bad" ] || { echo "$bad"; fail "a torchrun line without --master_port (torchrun's default 29500 may be taken)"; }
echo "1: no test picks a port, closes it and binds it later"
cd "$TMP"

[ "${DDP_PORT_SQUATTED:-}" = 1 ] || skip "part 2 needs root and unshare (a private network namespace)"
# 2a. the squatter bites: the old pattern, with a bind 0.3 s later (torch's import takes longer), mostly fails
old_fail=0
for _ in $(seq 6); do
    p=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    sleep 0.3
    $PY -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen()' "$p" 2>>"$TMP/old.err" || old_fail=$((old_fail + 1))
done
[ "$old_fail" -ge 2 ] || fail "the old pattern failed $old_fail of 6 times next to the squatter (test precondition)"
expect_grep "Address already in use" "$TMP/old.err"
# and under torchrun itself, once: up to 6 tries until one fails as test 47's did (on a busy host the squatter
# may miss a few; CI once saw 3 misses in a row while a second suite ran beside it)
printf 'import os\nprint("rank", os.environ["RANK"])\n' >"$TMP/w.py"
TORCHRUN=(env -u OMP_NUM_THREADS "$PY" "$DDP_SRCDIR/bench/torchrun.py" --monitor_interval 0.1 --nproc_per_node 1)
tr_old=ok
for _ in 1 2 3 4 5 6; do
    p=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    if ! "${TORCHRUN[@]}" --master_port "$p" "$TMP/w.py" >"$TMP/tr.out" 2>"$TMP/tr.err"; then
        grep -q "Address already in use\|EADDRINUSE\|errno: 98" "$TMP/tr.err" && { tr_old=failed; break; }
    fi
done
echo "2a: old pattern next to the squatter: $old_fail of 6 binds failed; torchrun on such a port: $tr_old"
[ "$tr_old" = failed ] || { cat "$TMP/tr.err"; fail "torchrun on a picked-and-closed port never failed (test precondition)"; }

# 2b. torchrun on a held port, three times; --master_port 0
for i in 1 2 3; do
    hold_port p
    "${TORCHRUN[@]}" --master_port "$p" "$TMP/w.py" >"$TMP/tr.out" 2>"$TMP/tr.err" ||
        { cat "$TMP/tr.err"; fail "torchrun on held port $p failed"; }
    expect_grep '^rank 0$' "$TMP/tr.out"
done
"${TORCHRUN[@]}" --master_port 0 "$TMP/w.py" >"$TMP/tr.out" 2>"$TMP/tr.err" ||
    { cat "$TMP/tr.err"; fail "torchrun --master_port 0 failed"; }
# 2c. ddplaunch: node 0 and node 1 of one job on this host, on a held pair (master_port and its control port)
hold_port p 2
"$DDP" --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port "$p" --nproc-per-node 1 "$TMP/w.py" \
    >"$TMP/n0.out" 2>"$TMP/n0.err" &
n0=$!
"$DDP" --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port "$p" --nproc-per-node 1 "$TMP/w.py" \
    >"$TMP/n1.out" 2>"$TMP/n1.err" || { cat "$TMP/n1.err"; fail "node 1 on held ports $p-$((p + 1)) failed"; }
wait $n0 || { cat "$TMP/n0.err"; fail "node 0 on held ports $p-$((p + 1)) failed"; }
expect_eq "ranks of the 2-node job" "$(cat "$TMP"/n0.out "$TMP"/n1.out | sort | tr '\n' ' ')" "rank 0 rank 1 "
echo "2b: next to the squatter, torchrun on 3 held ports and on --master_port 0, a 2-node ddplaunch job on a held pair: ok"
echo ok
