#!/usr/bin/env bash
# Containment (issue 15): started with standard descriptors closed (cron, some schedulers: <&-, >&-, 2>&-),
# the launcher ends with the job's status (no libuv assertion, no 134), workers never get one of the
# launcher's own descriptors (the epoll fd) as stdin, and what can still be shown is shown.
. "$DDP_SRCDIR/tests/integration/lib.sh"

# Each worker records what its stdin is and prints a line to each stream; rank 0 then waits for rank 1's record
# and exits with $1 (rank 1 with 0).
W=(--no-python --nproc-per-node 2 --console lines /bin/sh -c 'readlink /proc/self/fd/0 >"$0/stdin.$RANK"; echo "out $RANK"; echo "err $RANK" >&2
[ "$RANK" = 1 ] && exit 0; while [ ! -s "$0/stdin.1" ]; do sleep 0.02; done; exit "$1"' "$TMP")
for closed in '<&-' '>&-' '2>&-' '<&- >&- 2>&-'; do
    for st in 0 3; do
        rm -f "$TMP"/stdin.*
        case $closed in
        '<&-') "$DDP" "${W[@]}" "$st" <&- >"$TMP/out" 2>"$TMP/err" ;;
        '>&-') "$DDP" "${W[@]}" "$st" >&- 2>"$TMP/err" ;;
        '2>&-') "$DDP" "${W[@]}" "$st" 2>&- >"$TMP/out" ;;
        *) "$DDP" "${W[@]}" "$st" <&- >&- 2>&- ;;
        esac
        rc=$?
        expect_eq "status with $closed, job status $st" "$rc" "$st"
        for r in 0 1; do
            [ -s "$TMP/stdin.$r" ] || fail "$closed: rank $r did not run"
            in=$(cat "$TMP/stdin.$r")
            case $in in /dev/null | /dev/pts/* | pipe:* | /dev/tty*) ;; *) fail "$closed: rank $r got '$in' as stdin" ;; esac
            [ "$closed" = '<&-' ] && expect_eq "$closed: rank $r stdin" "$in" /dev/null
        done
        case $closed in
        '>&-') expect_grep '^\[rank[01]\]: err [01]$' "$TMP/err" ;;
        '2>&-' | '<&-') expect_grep '^\[rank[01]\]: out [01]$' "$TMP/out" ;;
        esac
    done
done
echo ok
