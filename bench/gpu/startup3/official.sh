#!/usr/bin/env bash
# issue 40's figures: 3ea4b4b vs this tree (d2f5b6b), bench/gpu/compare.sh parts 1-2, then plan's path
set -u
OUT=${OUT:-/tmp} bash bench/gpu/compare.sh .devrt/ref/ddplaunch .devrt/cand/ddplaunch 2>&1
echo "== plan -v: which way the holder check went"
.devrt/cand/ddplaunch plan -v --nproc-per-node 1 --no-python /bin/true 2>&1 | grep -iE "holder|nvml|/proc" | head -5
echo "== uname: $(uname -r)"
