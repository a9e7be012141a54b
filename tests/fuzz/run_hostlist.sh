#!/usr/bin/env bash
# Fuzz launcher/hostlist with libFuzzer (clang, ASan+UBSan). Usage: tests/fuzz/run_hostlist.sh [SECONDS]
# Builds build/fuzz/fuzz_hostlist and runs it for SECONDS (default 60) on a copy of the seed corpus.
set -eu
cd "$(dirname "$0")/../.."
secs=${1:-60}
mkdir -p build/fuzz
clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -Ilauncher tests/fuzz/fuzz_hostlist.c launcher/hostlist.c launcher/util.c -lm -o build/fuzz/fuzz_hostlist
work=$(mktemp -d /tmp/ddpfuzz-hostlist.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp tests/fuzz/corpus/hostlist/* "$work/"
build/fuzz/fuzz_hostlist -max_total_time="$secs" -max_len=512 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "$work"
