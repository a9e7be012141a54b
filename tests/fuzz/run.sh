#!/usr/bin/env bash
# `make fuzz`: build and run every libFuzzer harness tests/fuzz/fuzz_<name>.c.
# Usage: tests/fuzz/run.sh [SECONDS] [NAME...]     (SECONDS per harness, default 60; NAMEs: spec cli ...)
#
# Convention for harnesses (fuzz_spec.c, fuzz_cli.c, fuzz_hostlist.c, and any new one):
#   - tests/fuzz/fuzz_<name>.c defines LLVMFuzzerTestOneInput and includes launcher headers by name;
#   - tests/fuzz/fuzz_<name>.srcs lists, one per line, the launcher/*.c files it links ('#' comments ok).
#     Harnesses link the launcher sources directly (not build/libddp.a, which gcc builds without
#     instrumentation). Without a .srcs file, launcher/<name>.c and launcher/util.c are used;
#   - tests/fuzz/corpus/<name>/ holds small seed inputs (committed); the run works on a copy of it.
# Each harness is built with clang -fsanitize=fuzzer,address,undefined into build/fuzz/fuzz_<name> and run
# for SECONDS; a crash, leak or sanitizer report leaves build/fuzz/<name>-crash-* (or leak-*, timeout-*)
# and makes this script exit 1. The last lines of each run (exec count, coverage) are printed.
set -u
cd "$(dirname "$0")/../.."
secs=${1:-60}
shift || true
CLANG=${CLANG:-$(command -v clang-14 || command -v clang)}
[ -n "$CLANG" ] || { echo "fuzz: clang not found (apt-get install clang libclang-rt-14-dev)"; exit 1; }
PKGS="inih jansson libuv libsodium"
DEPFLAGS=$(pkg-config --cflags --libs $PKGS)
mkdir -p build/fuzz

names=("$@")
if [ ${#names[@]} = 0 ]; then
    for f in tests/fuzz/fuzz_*.c; do n=$(basename "$f" .c); names+=("${n#fuzz_}"); done
fi

status=0
for name in "${names[@]}"; do
    src=tests/fuzz/fuzz_$name.c
    [ -f "$src" ] || { echo "fuzz: no harness $src"; status=1; continue; }
    if [ -f "tests/fuzz/fuzz_$name.srcs" ]; then
        srcs=$(sed -e 's/#.*//' "tests/fuzz/fuzz_$name.srcs" | xargs)
    else
        srcs="launcher/base/util.c"
        for m in launcher/*/"$name.c"; do [ -f "$m" ] && srcs="$m $srcs"; done
    fi
    bin=build/fuzz/fuzz_$name
    echo "== fuzz $name: $src $srcs"
    # shellcheck disable=SC2086
    if ! "$CLANG" -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -fsanitize=fuzzer,address,undefined \
        -fno-sanitize-recover=all -fno-omit-frame-pointer -Ilauncher -DDDP_VERSION='"fuzz"' \
        -DDDP_SYSCONFDIR='"/nonexistent"' -DDDP_DATADIR='"/nonexistent"' \
        -o "$bin" "$src" $srcs $DEPFLAGS -lm; then
        echo "fuzz $name: BUILD FAILED"; status=1; continue
    fi
    work=$(mktemp -d "/tmp/ddpfuzz-$name.XXXXXX")
    if [ -d "tests/fuzz/corpus/$name" ]; then cp -r "tests/fuzz/corpus/$name/." "$work/"; fi
    log=build/fuzz/$name.log
    "$bin" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="build/fuzz/$name-" "$work" >"$log" 2>&1
    rc=$?
    rm -rf "$work"
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1)
    if [ $rc = 0 ]; then
        echo "fuzz $name: OK, ${execs:-?} execs in ${secs}s ($cov)"
    else
        echo "fuzz $name: FAILED (rc=$rc) after ${execs:-?} execs; log $log; artifacts:"
        ls build/fuzz/"$name"-* 2>/dev/null | sed 's/^/  /'
        grep -E 'ERROR|SUMMARY|runtime error|fuzz_[a-z]+:' "$log" | head -n 20 | sed 's/^/  | /'
        status=1
    fi
done
exit $status
