#!/usr/bin/env bash
# Runs every tests/integration/*.sh. Each test exits 0 (pass), 77 (skip, with a reason on stdout) or
# anything else (fail). DDP_BUILD and DDP_SRCDIR come from the Makefile.
set -u
: "${DDP_BUILD:?}" "${DDP_SRCDIR:?}"
export DDP_BUILD DDP_SRCDIR
pass=0 fail=0 skip=0 failed=()
only=${DDP_TESTS:-}
# A test's number is its name in conversation ("43 failed"): two tests never share one.
dups=$(cd "$DDP_SRCDIR/tests/integration" && ls [0-9]*.sh | cut -d- -f1 | sort | uniq -d)
if [ -n "$dups" ]; then
    echo "FAIL numbering: tests/integration numbers used twice: $dups"
    exit 1
fi
for t in "$DDP_SRCDIR"/tests/integration/[0-9]*.sh; do
    name=$(basename "$t" .sh)
    if [ -n "$only" ] && [[ $name != *$only* ]]; then continue; fi
    log=$(mktemp)
    # Every test takes its private state (lock and runtime directories) from lib.sh.
    if ! grep -q '^\. "\$DDP_SRCDIR/tests/integration/lib.sh"' "$t"; then
        fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name: does not source tests/integration/lib.sh"
        continue
    fi
    start=${EPOCHREALTIME/[.,]/}
    # DDP_PORT_SQUAT=1 (root): each test in a private network namespace next to a busy neighbour that takes every
    # port it can of a small ephemeral range (squat_env.sh, issue 34 item 15): a test that picks a port, closes it
    # and binds it later fails there.
    if [ "${DDP_PORT_SQUAT:-}" = 1 ]; then
        timeout 600 unshare -n "$DDP_SRCDIR/tests/integration/squat_env.sh" bash "$t" >"$log" 2>&1
    else
        timeout 600 bash "$t" >"$log" 2>&1
    fi
    rc=$?
    end=${EPOCHREALTIME/[.,]/}
    secs=$(((end - start) / 1000000)).$((((end - start) / 100000) % 10))
    case $rc in
    0) pass=$((pass + 1)); echo "PASS $name (${secs}s)" ;;
    77) skip=$((skip + 1)); echo "SKIP $name: $(tail -n 1 "$log")" ;;
    *) fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name (rc=$rc, ${secs}s)"; sed 's/^/    | /' "$log" | tail -n 60 ;;
    esac
    rm -f "$log"
done
echo "integration: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
