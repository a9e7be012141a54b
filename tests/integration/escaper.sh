#!/bin/sh
# escaper.sh DIR MODE: a worker that leaves three processes trying to outlive the job, each writing its pid to
# DIR/esc.RANK.KIND: a new session (setsid), one ignoring SIGTERM in the worker's group that keeps the worker's
# stdout open, and a TERM-ignoring double fork in a new session (reparented when its parent exits). Then writes
# DIR/ready.RANK.ATTEMPT and ends as MODE says (fail and the kill modes once every rank of the attempt is ready,
# so that each started all its escapees before it is stopped): ok (exit 0), fail (rank 1 exits 3; the others
# sleep), hang (sleep), downsize (sleep while WORLD_SIZE > 1, else exit 0), killgroup (`kill -9 0`), killpg
# (python's os.killpg(os.getpgrp(), 9)), killparent (`kill -9 $PPID`: the worker's parent).
d=$1
mode=$2
r=${RANK:-x}
a=${TORCHELASTIC_RESTART_COUNT:-0}
setsid sh -c 'echo $$ >"$0.tmp"; mv "$0.tmp" "$0"; exec sleep 3601' "$d/esc.$r.$a.setsid" </dev/null >/dev/null 2>&1 &
(trap '' TERM; exec sh -c 'echo $$ >"$0.tmp"; mv "$0.tmp" "$0"; exec sleep 3602' "$d/esc.$r.$a.noterm") </dev/null &
setsid sh -c '(trap "" TERM; sh -c "echo \$\$ >\"\$0.tmp\"; mv \"\$0.tmp\" \"\$0\"; exec sleep 3603" "$0" &); exit 0' \
    "$d/esc.$r.$a.dfork" </dev/null >/dev/null 2>&1 &
for k in setsid noterm dfork; do
    while [ ! -s "$d/esc.$r.$a.$k" ]; do sleep 0.02; done
done
echo "rank $r attempt $a ready"
: >"$d/ready.$r.$a"
# up to 30 s: a rank that never gets ready makes the test's escapee count fail, not this wait hang
all_ready() {
    for _ in $(seq 1500); do
        [ "$(ls "$d" | grep -c "^ready\..*\.$a\$")" -ge "${WORLD_SIZE:-1}" ] && return
        sleep 0.02
    done
}
# the modes that end the job wait until every rank started its escapees: the first to go stops the others
case $mode in fail | kill*) all_ready ;; esac
case $mode in
ok) exit 0 ;;
fail)
    [ "$r" = 1 ] || exec sleep 3600
    exit 3
    ;;
hang) exec sleep 3600 ;;
downsize) [ "${WORLD_SIZE:-1}" -gt 1 ] && exec sleep 3600; exit 0 ;;
killgroup) kill -9 0; exit 8 ;;
killpg) exec /usr/bin/python3 -c 'import os; os.killpg(os.getpgrp(), 9)' ;;
killparent) kill -9 "$PPID"; exec sleep 3600 ;;
esac
exit 9
