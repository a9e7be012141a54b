#!/bin/sh
# await_line.sh FILE PATTERN [SECONDS]: exit 0 once FILE has a line matching PATTERN (grep -E), 1 after SECONDS
# (default 30). For a worker that must act only after the launcher has said something, for instance that the
# GPU busy check beside the spawn answered (ddplaunch -v), instead of guessing how long that takes.
n=$(( ${3:-30} * 20 ))
while [ "$n" -gt 0 ]; do
    grep -qE -- "$2" "$1" 2>/dev/null && exit 0
    sleep 0.05
    n=$((n - 1))
done
exit 1
