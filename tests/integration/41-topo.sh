#!/usr/bin/env bash
# `ddplaunch topo` and the placement columns of `ddplaunch plan` through the real binary: the link matrix of
# real XML topologies (--topology and DDPLAUNCH_TOPOLOGY), one valid JSON document, the live machine (no GPUs
# here: says so, and says NVML was not found), inherited CUDA_VISIBLE_DEVICES, and the exit status 2 with a
# clear message when a topology cannot be read or more GPUs are asked for than are usable.
. "$DDP_SRCDIR/tests/integration/lib.sh"

G4DN=$TOPO_DIR/2s-8gpu-aws-g4dn-metal-t4.xml
OWN=$FIXTURES/topo/2s-8gpu-switches-nvlink.xml
[ -r "$G4DN" ] || { echo "fixture missing: $G4DN"; exit 1; }

row() { grep -E "^$1 " "$2" | tr -s ' ' | sed 's/ $//'; }

# text matrix, from --topology and from DDPLAUNCH_TOPOLOGY
"$DDP" topo --topology "$G4DN" >"$TMP/g4dn" || fail "topo --topology exited $?"
expect_eq "g4dn GPU0 row" "$(row GPU0 "$TMP/g4dn")" "GPU0 X PHB NODE NODE SYS SYS SYS SYS 0-23,48-71 0"
expect_eq "g4dn GPU5 row" "$(row GPU5 "$TMP/g4dn")" "GPU5 SYS SYS SYS SYS PHB X NODE NODE 24-47,72-95 1"
expect_grep '^  4 workers:  GPUs 0,1,2,3  \(4 GPUs on NUMA node 0' "$TMP/g4dn"
DDPLAUNCH_TOPOLOGY=$OWN "$DDP" topo >"$TMP/own" || fail "topo with DDPLAUNCH_TOPOLOGY exited $?"
expect_eq "own GPU7 row" "$(row GPU7 "$TMP/own")" "GPU7 SYS SYS SYS SYS NODE NODE NV4 X 8-15,24-31 1"
expect_eq "own GPU3 row" "$(row GPU3 "$TMP/own")" "GPU3 NODE NODE PXB X SYS SYS SYS SYS 0-7,16-23 0"
expect_grep '^  2 workers:  GPUs 6,7  \(2 GPUs on NUMA node 1, NVLink \(NV4\)\)' "$TMP/own"

# inherited CUDA_VISIBLE_DEVICES narrows the picks and is named when a pick cannot be met
CUDA_VISIBLE_DEVICES=4,6 "$DDP" topo --topology "$G4DN" >"$TMP/cvd" || fail "topo with CVD exited $?"
expect_grep "^  2 workers:  GPUs 4,6 " "$TMP/cvd"
expect_grep "4 workers:  cannot: asked for 4 GPUs, but only 2 of the 8 GPUs here are usable; left out: GPUs 0-3,5,7 not in CUDA_VISIBLE_DEVICES='4,6'" "$TMP/cvd"

# JSON: one document, parsed by Python
for f in "$TOPO_DIR"/*.xml; do
    "$DDP" topo --json --topology "$f" >"$TMP/t.json" || fail "topo --json $f exited $?"
    $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["links"]) == len(d["gpus"]), "links"; print(sys.argv[2], len(d["gpus"]), "GPUs", len(d["numa_nodes"]), "nodes")' \
        "$TMP/t.json" "$(basename "$f")" || fail "topo --json $f: not valid JSON"
done
"$DDP" topo --json --topology "$OWN" >"$TMP/own.json" || fail "topo --json own exited $?"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); p=d["picks"][1]; assert p["nproc"] == 2 and p["ok"], p
assert [r["gpu"] for r in p["ranks"]] == [6, 7] and p["ranks"][0]["cuda_visible_devices"] == "6,7", p' "$TMP/own.json" ||
    fail "own JSON: 2-worker pick is not GPUs 6,7"

# the live machine
"$DDP" topo >"$TMP/live" || fail "topo on this machine exited $?"
expect_grep '^Topology: live machine' "$TMP/live"
if grep -q '^No GPUs found' "$TMP/live"; then
    expect_grep '^  2 workers:  2 CPU workers on NUMA node' "$TMP/live"
fi
expect_grep '^NVML: (not found|found)' "$TMP/live"
allowed=$(awk '/^Cpus_allowed_list/{print $2}' /proc/self/status)
expect_grep "CPUs this process may use: $allowed\)" "$TMP/live"
# under an outer taskset the topology shrinks to what the process may use
if [ "$(nproc)" -ge 2 ]; then
    taskset -c 0 "$DDP" topo >"$TMP/live0" || fail "topo under taskset exited $?"
    expect_grep 'CPUs this process may use: 0\)' "$TMP/live0"
fi

# plan shows GPU, NUMA node and CPU columns from the placement
"$DDP" plan --topology "$OWN" --no-python --nproc-per-node 4 --numa-binding exclusive true >"$TMP/plan" || fail "plan exited $?"
expect_grep '^GPUs: 4 GPUs on NUMA node 1' "$TMP/plan"
expect_grep '^0 +0 +0000:88:00.0 +1 +8-9,24-25 +1' "$TMP/plan"
expect_grep '^3 +3 +0000:b2:00.0 +1 +14-15,30-31 +1' "$TMP/plan"

# errors: exit 2 and a message that says what and why
"$DDP" topo --topology "$TMP/missing.xml" >"$TMP/o" 2>"$TMP/e"
expect_eq "missing topology exit" "$?" 2
expect_grep "missing.xml: cannot read this hwloc XML topology" "$TMP/e"
CUDA_VISIBLE_DEVICES=0,1 "$DDP" plan --topology "$G4DN" --no-python --nproc-per-node 3 true >"$TMP/o" 2>"$TMP/e"
expect_eq "too many GPUs exit" "$?" 2
expect_grep "asked for 3 GPUs, but only 2 of the 8 GPUs here are usable; left out: GPUs 2-7 not in CUDA_VISIBLE_DEVICES='0,1'" "$TMP/e"
echo "ok"
