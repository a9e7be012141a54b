#!/usr/bin/env bash
# make bench: ddplaunch's benchmarks next to Debian's torchrun, medians (see bench/bench.py). ~3-4 minutes.
# usage: bash bench/run.sh build/ddplaunch [--quick]
set -eu
DDP=${1:?usage: bench/run.sh path/to/ddplaunch [--quick]}
shift
HELPERS=$(dirname "$DDP")/helpers
[ -x "$HELPERS/termstamp" ] && [ -x "$HELPERS/hang" ] && [ -x "$HELPERS/printlines" ] ||
    { echo "bench: build the helpers first (make bench does)"; exit 1; }
exec /usr/bin/python3 "$(dirname "$0")/bench.py" "$DDP" "$HELPERS" "$@"
