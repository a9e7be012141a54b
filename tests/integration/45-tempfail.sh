#!/usr/bin/env bash
# Waiting says so, and refusals a scheduler should retry exit 75 (EX_TEMPFAIL) (issue 18): node 0 waiting for a
# node that never joins prints who is missing, elapsed and the deadline every 5 s, then exits 75 (not 1), and its
# run records say so. (GPUs leased by other jobs: 52-gpu-leases.)
. "$DDP_SRCDIR/tests/integration/lib.sh"
hold_port port 2 # node 0 listens on master_port + 1 (its control channel): both held (lib.sh hold_port)
t0=$(date +%s%N)
"$DDP" --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port "$port" --rdzv-conf join_timeout=7 \
    --log-dir "$TMP/logs" --no-python --nproc-per-node 1 /bin/true >"$TMP/out" 2>&1
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
cat "$TMP/out"
expect_eq "status when a node did not join" "$rc" 75
[ "$ms" -ge 6500 ] && [ "$ms" -lt 20000 ] || fail "gave up after $ms ms (join_timeout 7 s)"
expect_grep '^ddplaunch: node 0: waiting for 1 more node to join \(1 of 2 up; missing 1; 5s of 7s\)$' "$TMP/out"
expect_grep 'only 1 of 2 nodes joined within 7s \(join_timeout\); exit status 75' "$TMP/out"
[ -e "$TMP/logs" ] && R=$(echo "$TMP"/logs/*/) && [ -f "$R/summary.json" ] &&
    expect_eq "summary exit status" "$(jq -r .exit_status "$R/summary.json")" 75
echo ok
