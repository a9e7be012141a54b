#!/usr/bin/env bash
# NCCL's RAS as evidence where torch has no flight recorder (issue 38): ras_worker.py stands in for an NCCL job on
# this VM (no NCCL here): rank 0 answers on its NCCL_RAS_ADDR port as NCCL 2.28.9's RAS thread does (the protocol
# and JSON recorded on the GPU machine, tests/fixtures/ras), rank 1 one AllReduce behind; both hang without output.
# The live watch finds no recorder, asks RAS over the loop, says what it found (a line and a ras event), and names
# rank 1 by its pid in the next suspicion, which then stops the attempt with rank 1 as the root cause.
# The job runs on the 2-GPU topology of an H200 VM (an XML export): a job without GPUs gets no RAS port (no
# NCCL there); the last part checks that.
. "$DDP_SRCDIR/tests/integration/lib.sh"
GPUS="--topology $TOPO_DIR/vm-2gpu-h200-nonuma.xml --numa-binding none"
CHECK="$PY $DDP_SRCDIR/tests/integration/records_check.py $DDP_SRCDIR/man/ddplaunch.1"
mkdir -p "$TMP/pids"
RAS_DIR="$TMP/pids" RAS_BEHIND=1 PATH=/usr/bin:$PATH timeout 60 "$DDP" --nproc-per-node 2 $GPUS \
    --log-dir "$TMP/log" --set timeout.on_suspect=restart --set timeout.on_suspect_after=6s \
    --set timeout.suspect_setup=5s --set timeout.suspect_floor=4s "$DDP_SRCDIR/tests/integration/ras_worker.py" \
    >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc = 124 ] || { cat "$TMP/err"; fail "exit $rc, want 124"; }
P1=$(cat "$TMP/pids/pid.1")
expect_grep "attempt 0: NCCL RAS: communicator 0xe06ea772e6078d80 \(2 ranks\): rank 1 \(pid $P1\) is behind: AllReduce 41 where rank 0 has 42$" "$TMP/err"
expect_grep "suspected hang: rank 1 \(local 1, host [^,]+, GPU [^)]+\) at ras_worker.py:[0-9]+ in <module>; no progress for [0-9]+s \(limit 4s\): NCCL RAS: communicator" "$TMP/err"
R=$(echo "$TMP/log"/*/)
$CHECK "$R" >/dev/null || fail "records do not match the documented schema"
expect_eq "ras event" "$(jq -r 'select(.event == "ras") | "\(.ranks | join(",")) \(.communicators)"' "$R/events.jsonl")" "1 1"
expect_eq "root cause" "$(jq -r '"\(.root_cause.rank) \(.root_cause.class)"' "$R/summary.json")" "1 hang"

# An NCCL before 2.28.7 knows no SET FORMAT json and answers STATUS in text (no counts, and it keeps the connection
# open): the answer is read as text at the query's deadline (2 s after the first suspicion), and the line says
# what the table says. The stop waits longer than that deadline (on a busy machine 6 s could come first).
rm -f "$TMP/pids"/*
RAS_TEXT=1 RAS_DIR="$TMP/pids" PATH=/usr/bin:$PATH timeout 60 "$DDP" --nproc-per-node 2 $GPUS \
    --set timeout.on_suspect=restart --set timeout.on_suspect_after=9s --set timeout.suspect_setup=5s \
    --set timeout.suspect_floor=4s "$DDP_SRCDIR/tests/integration/ras_worker.py" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc = 124 ] || { cat "$TMP/err"; fail "text: exit $rc, want 124"; }
expect_grep "attempt 0: NCCL RAS: no rank behind, missing or failed in 1 communicator" "$TMP/err"

# No GPU, no NCCL: no port reserved, and NCCL_RAS_ADDR is not in the workers' environment
"$DDP" --nproc-per-node 2 --set gpus.select=none --no-python /bin/sh -c 'echo "ras=${NCCL_RAS_ADDR-unset}"' >"$TMP/out" 2>&1 ||
    fail "CPU job: status $?"
expect_eq "CPU job's NCCL_RAS_ADDR" "$(grep -c '^ras=unset$' "$TMP/out")" 2
echo ok
