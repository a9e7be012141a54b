#!/usr/bin/env bash
# A/B: 1024 c10d agents, main vs candidate, interleaved
set -u
export DDP_ARGS='--set gpus.select=none'
R=${ROUNDS:-4}
for round in $(seq 1 $R); do
  for b in main cand; do echo -n "$round $b: "; bash bench/scale.sh .devrt/$b/ddplaunch 1024 2>&1 | tail -1; done
done
