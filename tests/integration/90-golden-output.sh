#!/usr/bin/env bash
# Behaviour unchanged (issue 33): `ddplaunch topo`, `ddplaunch plan` (text and --json, nproc 1/2/4/8/gpu, GPU
# choice by select, exclude, policy, visible, CUDA_VISIBLE_DEVICES, several nodes, Slurm, c10d) on every
# topology fixture, and `ddplaunch report` (text and SVG) on three recorded runs, byte for byte as the build
# of 3ea4b4b printed them (tests/fixtures/golden/README.md). The cases and their few masks are in
# tests/fixtures/golden/cases.sh, the same script that made out/.
. "$DDP_SRCDIR/tests/integration/lib.sh"
GOLDEN=$FIXTURES/golden
bash "$GOLDEN/cases.sh" "$DDP" "$TMP/now" || fail "cases.sh exited $?"
n=$(grep -h -c '^### ' "$GOLDEN"/out/*.txt | paste -sd+ | bc)
[ "$n" -gt 600 ] || fail "only $n lines of cases in $GOLDEN/out: not the golden set"
if ! diff -r "$GOLDEN/out" "$TMP/now" >"$TMP/diff"; then
    head -80 "$TMP/diff"
    fail "output differs from tests/fixtures/golden/out ($(grep -c '^[<>]' "$TMP/diff") lines)"
fi
echo "$(ls "$GOLDEN/out" | wc -l) files, $((n / 3)) cases: as 3ea4b4b printed them"
