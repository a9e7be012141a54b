#!/usr/bin/env bash
# Evidence only from the job (issue 52 item 10): NCCL RAS's answer counts only when the socket listening on the
# job's RAS port is open in one of the job's ranks. Another local user can bind that port first (it shows in the
# lock names) and answer STATUS with a forged document that names an innocent rank as behind. Here the job's
# ranks hang with no RAS of their own (RAS_LISTEN=none: their NCCL lost the bind to the squatter), while
# mallory's `ras_worker.py --foreign` listens on the port and names rank 1 by its real pid. ddplaunch asks, says
# in one line that the answer is ignored and who listens there, and neither the console, the ras event, the
# suspicion nor the root cause believes it. (Without root, the squatter is the test's own process outside the
# job: the rule is the same.) 93-nccl-ras.sh is the job's own RAS, which is believed.
. "$DDP_SRCDIR/tests/integration/lib.sh"
GPUS="--topology $TOPO_DIR/vm-2gpu-h200-nonuma.xml --numa-binding none"
as_other() { "$@"; }
who=$(id -un)
if [ "$(id -u)" = 0 ] && command -v runuser >/dev/null; then
    M=ddptest-mallory
    if id -u "$M" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$M"; then
        as_other() { runuser -u "$M" -- "$@"; }
        who=$M
    fi
fi
chmod 711 "$TMP"
mkdir -m 1777 "$TMP/pids"
hold_port RASP
cp "$DDP_SRCDIR/tests/integration/ras_worker.py" "$TMP/squatter.py" && chmod 644 "$TMP/squatter.py"
(cd / && RAS_DIR="$TMP/pids" RAS_BEHIND=1 as_other $PY "$TMP/squatter.py" --foreign \
    "$RASP" 2 </dev/null >"$TMP/foreign.out" 2>&1 &)
for _ in $(seq 200); do [ -s "$TMP/pids/listening" ] && break; sleep 0.05; done
[ -s "$TMP/pids/listening" ] || { cat "$TMP/foreign.out"; fail "the foreign listener did not start"; }
SQUATTER=$(cat "$TMP/pids/listening")
trap 'kill $SQUATTER 2>/dev/null; rm -rf "$TMP"' EXIT

NCCL_RAS_ADDR=localhost:$RASP RAS_LISTEN=none RAS_DIR="$TMP/pids" PATH=/usr/bin:$PATH timeout 60 "$DDP" \
    --nproc-per-node 2 $GPUS --log-dir "$TMP/log" --set timeout.on_suspect=restart \
    --set timeout.on_suspect_after=6s --set timeout.suspect_setup=5s --set timeout.suspect_floor=4s \
    "$DDP_SRCDIR/tests/integration/ras_worker.py" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc = 124 ] || { cat "$TMP/err"; fail "exit $rc, want 124"; }
# the forged answer arrived (the squatter was asked) and was not believed
expect_grep "attempt 0: NCCL RAS: answer on port $RASP ignored: pid $SQUATTER \(python3[^,]*, user $who\) listens there, not one of the job's ranks$" "$TMP/err"
if grep -E "NCCL RAS: (communicator|no rank)" "$TMP/err"; then fail "the forged RAS answer was believed"; fi
R=$(echo "$TMP/log"/*/)
expect_eq "ras events" "$(jq -r 'select(.event == "ras") | .why' "$R/events.jsonl")" ""
if jq -r 'select(.event == "suspect" or .event == "hang") | tostring' "$R/events.jsonl" | grep -q "NCCL RAS"; then
    fail "a suspicion took the forged RAS answer as evidence"
fi
if jq -r '.root_cause | tostring' "$R/summary.json" | grep -q "NCCL RAS"; then
    fail "the root cause came from the forged RAS answer: $(jq -c .root_cause "$R/summary.json")"
fi
echo ok
