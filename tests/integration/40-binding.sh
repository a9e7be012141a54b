#!/usr/bin/env bash
# Workers started with NUMA binding really run where the plan says: each worker reports its own
# Cpus_allowed_list / Mems_allowed_list (/proc/self/status) and memory policy (/proc/self/numa_maps), and
# they must equal the per-rank cpus/mems of `ddplaunch plan --json` for the same command line. Uses
# exclusive mode (each rank gets its own cores), an outer `taskset` (the launcher may use only CPU 1),
# interleave/none memory modes, and an XML topology whose CPUs mostly do not exist here (warn, not crash).
. "$DDP_SRCDIR/tests/integration/lib.sh"

ncpu=$(nproc)
[ "$ncpu" -ge 2 ] || skip "needs at least 2 usable CPUs (have $ncpu)"
[ -r /proc/self/numa_maps ] || skip "no /proc/self/numa_maps (kernel without NUMA)"
command -v taskset >/dev/null || skip "taskset not installed"

# The worker: one line per rank, each from a process that is the worker (awk) itself.
WORKER=(sh -c 'awk -v r="$RANK" -v n="${DDPLAUNCH_NUMA_NODE:-}" '"'"'/^Cpus_allowed_list/{c=$2} /^Mems_allowed_list/{m=$2}
    END{getline l < "/proc/self/numa_maps"; split(l, f, " "); printf "seen rank=%s cpus=%s mems=%s policy=%s node=%s\n", r, c, m, f[2], n}'"'"' /proc/self/status')

# plan_ranks ARGS...: "rank=R cpus=C mems=M" per worker from plan --json (null -> -)
plan_ranks() {
    "${LAUNCH[@]}" plan --json "$@" "${WORKER[@]}" | $PY -c '
import json, sys
d = json.load(sys.stdin)
for w in d["workers"]:
    print("rank=%d cpus=%s mems=%s node=%s" % (w["rank"], w["cpus"] or "-", w["mems"] or "-", w["numa_node"]))'
}

# seen ARGS...: run the job, return its "seen" lines sorted by rank (prefix stripped)
seen() {
    "${LAUNCH[@]}" "$@" "${WORKER[@]}" >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/out" "$TMP/err"; fail "ddplaunch $* failed"; }
    sed -n 's/^.*seen //p' "$TMP/out" | sort
}

# check NAME EXPECTED_POLICY_PREFIX ARGS...: compare what workers saw with the plan
check() {
    local name=$1 policy=$2; shift 2
    plan_ranks "$@" >"$TMP/plan" || fail "$name: plan failed"
    seen "$@" >"$TMP/seen"
    [ -s "$TMP/plan" ] || fail "$name: empty plan"
    [ "$(wc -l <"$TMP/seen")" = "$(wc -l <"$TMP/plan")" ] || { cat "$TMP/out" "$TMP/err"; fail "$name: not every rank reported"; }
    while read -r rank cpus mems node; do
        local want_cpus=${cpus#cpus=} want_mems=${mems#mems=} line got_cpus got_policy
        line=$(grep "^$rank " "$TMP/seen") || fail "$name: no report from $rank"
        got_cpus=$(sed 's/.* cpus=\([^ ]*\).*/\1/' <<<"$line")
        got_policy=$(sed 's/.* policy=\([^ ]*\).*/\1/' <<<"$line")
        if [ "$want_cpus" = "-" ]; then
            want_cpus=$ALL_CPUS
        fi
        expect_eq "$name: $rank Cpus_allowed_list" "$got_cpus" "$want_cpus"
        case $policy in
        bind | interleave) expect_eq "$name: $rank memory policy" "$got_policy" "$policy:$want_mems" ;;
        *) expect_eq "$name: $rank memory policy" "$got_policy" "$policy" ;;
        esac
        grep -q " node=${node#node=}\$" <<<"$line" || fail "$name: $rank DDPLAUNCH_NUMA_NODE: '$line' vs plan $node"
    done <"$TMP/plan"
    echo "ok $name: $(tr '\n' ';' <"$TMP/seen")"
}

ALL_CPUS=$(awk '/^Cpus_allowed_list/{print $2}' /proc/self/status)
LAUNCH=("$DDP")
COMMON=(--no-python --nproc-per-node 2)

# 1. exclusive: the node's cores split between the 2 ranks, so each rank sees a different, smaller set
check exclusive bind "${COMMON[@]}" --numa-binding exclusive
r0=$(sed -n 's/^rank=0 cpus=\([^ ]*\).*/\1/p' "$TMP/seen"); r1=$(sed -n 's/^rank=1 cpus=\([^ ]*\).*/\1/p' "$TMP/seen")
[ "$r0" != "$r1" ] || fail "exclusive: both ranks got CPUs $r0"
[ "$r0" != "$ALL_CPUS" ] || fail "exclusive: rank 0 was not restricted ($r0)"

# 2. an outer taskset: the launcher may use only the last CPU; plan and workers follow it
last=$(awk -F'[-,]' '{print $NF}' <<<"$ALL_CPUS")
ALL_CPUS_SAVED=$ALL_CPUS
ALL_CPUS=$last
LAUNCH=(taskset -c "$last" "$DDP")
check taskset-node bind "${COMMON[@]}" --numa-binding node
grep -q "^rank=0 cpus=$last " "$TMP/seen" || fail "taskset: rank 0 not on CPU $last"
LAUNCH=("$DDP")
ALL_CPUS=$ALL_CPUS_SAVED

# 3. memory modes: interleave, and none (CPUs still bound, memory policy default)
check interleave interleave "${COMMON[@]}" --numa-binding exclusive --set numa.memory=interleave
check memory-none default "${COMMON[@]}" --numa-binding node --set numa.memory=none
grep -q 'mems=-' "$TMP/plan" || fail "memory none: plan still lists mems"

# 4. no binding: workers keep the launcher's CPUs and the default policy
check none default "${COMMON[@]}" --numa-binding none
grep -q "cpus=$ALL_CPUS " "$TMP/seen" || fail "none: workers did not keep CPUs $ALL_CPUS"

# 5. an XML topology of another machine (4 NUMA nodes of 4 CPUs; CPU workers spread over them): the plan
#    shows its CPU lists; running binds to the part that exists here, or warns and runs unbound
XML=$FIXTURES/topo/2s-4numa-8gpu.xml
plan_ranks --topology "$XML" --no-python --nproc-per-node 4 --set gpus.select=none --numa-binding exclusive >"$TMP/plan" ||
    fail "xml: plan failed"
expect_eq "xml plan" "$(tr '\n' ';' <"$TMP/plan")" \
    "rank=0 cpus=0-3 mems=0 node=0;rank=1 cpus=4-7 mems=1 node=1;rank=2 cpus=8-11 mems=2 node=2;rank=3 cpus=12-15 mems=3 node=3;"
"$DDP" --topology "$XML" --no-python --nproc-per-node 4 --set gpus.select=none --numa-binding exclusive "${WORKER[@]}" \
    >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/out" "$TMP/err"; fail "xml: the job failed instead of warning"; }
grep -q "seen rank=0 cpus=$ALL_CPUS " "$TMP/out" || { cat "$TMP/out"; fail "xml: rank 0 not on the CPUs of 0-3 that exist here"; }
grep -q "seen rank=3 " "$TMP/out" || fail "xml: rank 3 did not run"
grep -qi "cpus 12-15: none of them is allowed here" "$TMP/out" "$TMP/err" ||
    { cat "$TMP/out" "$TMP/err"; fail "xml: no warning naming the CPU set that cannot be used"; }
echo "ok xml: $(grep -c seen "$TMP/out") ranks ran; warning: $(grep -hi 'none of them' "$TMP/out" "$TMP/err" | head -1)"
