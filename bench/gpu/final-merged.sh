#!/usr/bin/env bash
# bench/gpu/final-merged.sh (repository root, on the 1-GPU H200 kind, .devrt carried): the merged tree's figures
# for issues 38, 40 and 41 in one device call, one after the other so that no part loads the others' CPUs.
#   .devrt/ref/ddplaunch: `make static` of 3ea4b4b (the reference of issue 40); .devrt/new/ddplaunch: of main;
#   .devrt/tutorial: pytorch/examples' multigpu_torchrun.py and datautils.py (not kept in this repository).
# 1. bench/gpu/compare.sh without the tutorial (issue 40's start-up and scale figures against 3ea4b4b; the kill -9
#    to "Loading snapshot" figure comes from part 2's cold and torchrun runs);
# 2. bench/gpu/warm-restart.sh: the tutorial, kill -9 to "Loading snapshot", warm vs cold vs torchrun, 3 rounds;
# 3. bench/gpu/fr-final.sh: issue 38's group cases two at a time, the dtype crash with its dumps, NCCL RAS.
# Everything under $OUT: final.tgz (parts 1-2), fr-final.tar.gz and fr-final.txt (part 3), summary.txt.
set -u
OUT=${OUT:-/tmp/out}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
mkdir -p "$OUT/cmp" "$OUT/warm"
t0=$(date +%s)
(OUT=$OUT/cmp ROUNDS=15 AGENTS=1024 AGENT_RUNS=2 timeout 140 bash bench/gpu/compare.sh .devrt/ref/ddplaunch \
    .devrt/new/ddplaunch) >"$OUT/cmp/console.txt" 2>&1
rc=$?
echo "part 1: $(($(date +%s) - t0)) s, exit $rc" >>"$OUT/summary.txt"
D=$(mktemp -d) && cp .devrt/tutorial/*.py .devrt/new/ddplaunch "$D"/
(OUT=$OUT/warm IMPORT=0 HANG=0 PHASES=0 RUNS=3 TUT_DEADLINE_S=130 TUT_TIMEOUT=145 timeout 148 \
    bash bench/gpu/warm-restart.sh "$D") >"$OUT/warm/console.txt" 2>&1
echo "part 2: $(($(date +%s) - t0)) s" >>"$OUT/summary.txt"
OUT=$OUT DDPLAUNCH=.devrt/new/ddplaunch timeout 205 bash bench/gpu/fr-final.sh >"$OUT/fr-console.txt" 2>&1
echo "part 3: $(($(date +%s) - t0)) s" >>"$OUT/summary.txt"
tar czf "$OUT/final.tgz" -C "$OUT" cmp warm fr-console.txt
{
    echo "== compare"; sed -n '/^figure/,$p' "$OUT/cmp/compare-gpu.txt" 2>/dev/null | head -40
    echo "== warm"; tail -n 25 "$OUT/warm/console.txt"
    echo "== fr"; tail -n 30 "$OUT/fr-console.txt"
} >>"$OUT/summary.txt"
rm -rf "$OUT/cmp" "$OUT/warm" "$OUT/fr-console.txt"
cat "$OUT/summary.txt"
