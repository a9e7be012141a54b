#!/usr/bin/env bash
# Issue 31, several nodes: a rank on another node is named on node 0 from its flight recorder. Two "hosts"
# (network and UTS namespaces, node-a serving and node-b), one gloo rank each, the fake recorder of
# 84-hang-recorder.sh (fake_recorder.py: torch 2.x's in-process JSON on this VM's torch 1.13) around
# bench/gpu/fr_worker.py. Rank 1, on node 1, stays in its data loader at step 5 while rank 0 (node 0) enqueued the
# next all_reduce and polls it. Node 0 alone sees one rank that waits and cannot say for whom; with node 1's
# summary (FR message) its live line names rank 1 on node 1 with its host, [timeout] on_suspect = restart stops
# the attempt, and the post-mortem verdict, summary.json's hang culprit (node 1, pid null) and flight_recorder,
# and the suspect event say the same. Root only (ip netns, unshare); skipped otherwise.
. "$DDP_SRCDIR/tests/integration/lib.sh"
. "$DDP_SRCDIR/tests/integration/lib_netns.sh"
command -v unshare >/dev/null || skip "unshare (util-linux) not installed"
have_torch || skip "no torch in $PY"
HOSTS=(node-a node-b)
netns_setup ddpfr 10.233.0 ddpfr0 2
CHECK="$PY $DDP_SRCDIR/tests/integration/records_check.py $DDP_SRCDIR/man/ddplaunch.1"
W=$DDP_SRCDIR/bench/gpu/fr_worker.py
FAKE=$DDP_SRCDIR/tests/integration/fake_recorder.py
export DDPLAUNCH_JOB_SECRET=the-secret-of-the-recorder-job-0123
WATCH=(--set gpus.select=none --set timeout.suspect_setup=15s --set timeout.suspect_floor=14s)

on_node() { # on_node I [ddplaunch options]: node I's agent in its namespaces, in the background
    local i=$1
    shift
    ip netns exec "$(ns "$i")" unshare --uts sh -c 'hostname "$0"; exec "$@"' "${HOSTS[$i]}" \
        env GLOO_SOCKET_IFNAME=ddpfr0 PYTHONUNBUFFERED=1 FR_KIND=stuck FR_RANK=1 PATH=/usr/bin:$PATH \
        timeout 120 "$DDP" --nnodes 2 --node-rank "$i" --master-addr 10.233.0.1 --master-port 29460 \
        --nproc-per-node 1 "${WATCH[@]}" "$@" "$FAKE" "$W" >"$TMP/n$i.out" 2>"$TMP/n$i.err" &
    pids[$i]=$!
}
on_node 0 --log-dir "$TMP/logs" --set timeout.on_suspect=restart --set timeout.on_suspect_after=1s
on_node 1
wait "${pids[0]}"
rc0=$?
wait "${pids[1]}"
rc1=$?
[ $rc0 = 124 ] || { cat "$TMP"/n*.err; fail "node 0: exit $rc0, want 124 (the hang)"; }
[ $rc1 != 0 ] || { cat "$TMP/n1.err"; fail "node 1: exit 0 after the job's hang"; }
expect_grep "suspected hang: rank 1 on node 1 \(local 0, host node-b, GPU none\); no progress for [0-9]+s \(limit [0-9]+s\): flight recorder: rank 1 never entered gloo:all_reduce #[0-9]+ of group 0 \(ranks 0-1; its last there is #[0-9]+\), where rank 0 waits; no progress in the recorders for [0-9]+ s; rank 1 is on node 1 \(node-b\)" "$TMP/n0.err"
expect_grep "Hang verdict \(high confidence\): rank 1 on node 1 \(local 0, host node-b, GPU none\)" "$TMP/n0.err"
expect_grep "why: flight recorder: rank 1 never entered gloo:all_reduce #[0-9]+ .*rank 1 is on node 1 \(node-b\)" "$TMP/n0.err"
R=$(echo "$TMP/logs"/*/)
$CHECK "$R" >/dev/null || fail "records do not match the documented schema"
expect_eq "hang culprit" "$(jq -c '.hang.culprits | map({rank, node, host, pid})' "$R/summary.json")" \
    '[{"rank":1,"node":1,"host":"node-b","pid":null}]'
expect_eq "verdict" "$(jq -r '.hang.recorder.verdict' "$R/summary.json")" behind
# both ranks' last collective, rank 1's from node 1's summary
enq=$(jq -r '[.flight_recorder.ranks | to_entries[] | "\(.key):\(.value[0].last_enqueued)"] | sort | join(" ")' "$R/summary.json")
[[ $enq =~ ^0:([0-9]+)\ 1:([0-9]+)$ ]] && [ $((BASH_REMATCH[1] - 1)) = "${BASH_REMATCH[2]}" ] ||
    fail "flight_recorder.ranks: want rank 1 one collective behind rank 0, got '$enq'"
S=$(grep -m1 '"event":"suspect"' "$R/events.jsonl")
expect_eq "suspect event" "$(echo "$S" | jq -c '[.recorder.verdict, (.culprits | map({rank, node}))]')" \
    '["behind",[{"rank":1,"node":1}]]'
echo ok
