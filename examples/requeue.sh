#!/usr/bin/env bash
# A shell job script that retries what ddplaunch says may work later, and nothing else.
#
#   examples/requeue.sh --nproc-per-node 4 examples/train_ddp.py --steps 20
#
# The exit status alone cannot tell ddplaunch's verdict from a worker's own code (a training script may exit 1, 2
# or 75 itself). summary.json can: with --log-dir, every launch writes one, a refused launch included, and its
# "exit" says {"code": N, "source": "worker"|"launcher", "rank": R} (ddplaunch(1), EXIT STATUS).
#   source worker, code 0      the job succeeded: done.
#   source worker, code N      rank R failed on its own (a bug, bad data): retrying will not help; exit N.
#   source launcher, code 75   refused for now (GPUs leased by another job, nodes missing): retry after a while.
#   source launcher, 128+N     stopped by signal N from outside (a preemption, a kill): retry; not after SIGINT
#                              (130: someone pressed Ctrl-C and wants out).
#   source launcher, other     bad input (2), a timeout (124), the launcher failed (1): not retried.
# Environment: DDPLAUNCH (the binary), LOG_DIR (logs), MAX_TRIES (5), RETRY_DELAY (seconds before a retry after
# 75; 30). Each try gets its own log_dir LOG_DIR/try-N, so its run directory is the only one there.
set -u
DDPLAUNCH=${DDPLAUNCH:-ddplaunch}
LOG_DIR=${LOG_DIR:-logs}
MAX_TRIES=${MAX_TRIES:-5}
RETRY_DELAY=${RETRY_DELAY:-30}

# verdict DIR: "SOURCE CODE RANK" of the summary.json of the one run directory in DIR, or nothing
verdict() {
    local sum
    for sum in "$1"/*/summary.json; do
        [ -e "$sum" ] || return 0
        python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))["exit"]
print(e["source"], e["code"], "-" if e["rank"] is None else e["rank"])' "$sum"
        return 0
    done
}

try=0
while :; do
    try=$((try + 1))
    "$DDPLAUNCH" --log-dir "$LOG_DIR/try-$try" "$@"
    status=$?
    read -r source code rank <<<"$(verdict "$LOG_DIR/try-$try")"
    case ${source:-none}:${code:-$status} in
    none:*)
        echo "requeue.sh: no summary.json in $LOG_DIR/try-$try (exit $status): not retried" >&2
        exit "$status" ;;
    worker:0)
        echo "requeue.sh: the job succeeded (try $try)" >&2
        exit 0 ;;
    worker:*)
        echo "requeue.sh: the job's rank $rank failed with its own exit code $code: not retried" >&2
        exit "$code" ;;
    launcher:75)
        echo "requeue.sh: ddplaunch says retry later (75): running it again in ${RETRY_DELAY}s" >&2
        sleep "$RETRY_DELAY" ;;
    launcher:130)
        echo "requeue.sh: stopped by SIGINT (130): not retried" >&2
        exit 130 ;;
    launcher:1[2-9][0-9])
        [ "$code" -gt 128 ] || { echo "requeue.sh: ddplaunch says $code: not retried" >&2; exit "$code"; }
        echo "requeue.sh: ddplaunch stopped the job ($code): running it again" >&2 ;;
    launcher:*)
        echo "requeue.sh: ddplaunch says $code (bad input, a timeout or its own failure): not retried" >&2
        exit "$code" ;;
    esac
    [ "$try" -lt "$MAX_TRIES" ] || { echo "requeue.sh: $MAX_TRIES tries: giving up" >&2; exit "$code"; }
done
