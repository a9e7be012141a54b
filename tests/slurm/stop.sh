#!/usr/bin/env bash
# Stop the test cluster that tests/slurm/start.sh DIR started: SIGTERM, then SIGKILL after 5 s, to every
# process in the cluster's private mount namespace (daemons, slurmstepd, job steps and their workers), and
# nothing else. Leaves DIR (logs) in place. Usage: tests/slurm/stop.sh DIR
set -u
dir=${1:?usage: stop.sh DIR}
ns=$(cat "$dir/run/mntns" 2>/dev/null) || { echo "tests/slurm/stop.sh: no cluster in $dir"; exit 0; }
[ -n "$ns" ] && [ "$ns" != "$(readlink /proc/1/ns/mnt)" ] && [ "$ns" != "$(readlink /proc/self/ns/mnt)" ] ||
    { echo "tests/slurm/stop.sh: refusing: $dir/run/mntns names a shared namespace"; exit 1; }
ours() {
    local p
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$ns" ] && echo "${p#/proc/}"
    done
}
pids=$(ours)
[ -n "$pids" ] && kill -TERM $pids 2>/dev/null
for _ in $(seq 1 50); do
    pids=$(ours)
    [ -z "$pids" ] && break
    sleep 0.1
done
pids=$(ours)
[ -n "$pids" ] && kill -KILL $pids 2>/dev/null
rm -f "$dir/run/mntns"
exit 0
