#!/usr/bin/env bash
# Start a throwaway Slurm cluster on this one host, for tests: munged, slurmctld and two slurmd (nodes n1 and
# n2, 2 CPUs and 2 fake GPUs each), everything under DIR (created; config, state, logs, sockets).
# Usage: tests/slurm/start.sh DIR        then: export SLURM_CONF=DIR/slurm.conf; srun -N2 hostname
#        tests/slurm/stop.sh DIR         kills exactly what this started.
# Needs root and Debian's slurmctld slurmd slurm-client munge. The daemons run in a private mount namespace
# whose /etc/hosts also names n1 and n2 (127.0.0.1), so jobs can resolve the node names; nothing on the host
# is changed. Ports: $DDP_SLURM_PORT (slurmctld) and the next two (slurmd n1, n2); without DDP_SLURM_PORT the
# first of 16817, 16917, ... whose three ports nothing listens on.
# Exit status: 0 when `sinfo` shows both nodes idle, 1 otherwise (with the daemons' logs on stderr), 77 when
# root or a package is missing.
set -eu
dir=${1:?usage: start.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "tests/slurm/start.sh: needs root (slurmd runs jobs as other users)"; exit 77; }
for b in munged slurmctld slurmd srun sinfo scontrol unshare; do
    command -v "$b" >/dev/null || { echo "tests/slurm/start.sh: $b not found (apt-get install slurmctld slurmd slurm-client munge)"; exit 77; }
done
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
chmod 0755 "$dir"
mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log" "$dir/run"
chmod 0700 "$dir/munge"
listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
if [ -n "${DDP_SLURM_PORT:-}" ]; then
    port=$DDP_SLURM_PORT
else
    port=
    for base in $(seq 16817 100 19817); do
        listening $base || listening $((base + 1)) || listening $((base + 2)) || { port=$base; break; }
    done
    [ -n "$port" ] || { echo "tests/slurm/start.sh: no free port triple in 16817-19819" >&2; exit 1; }
fi
host=$(hostname -s)

# munge: our own key, socket and daemon; the system's munged (if any) is left alone.
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$dir/munge/munge.key"

# cgroup v1 (or hybrid) works with autodetect; a pure v2 host needs cgroup/v2 without systemd.
if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
    printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\nConstrainDevices=no\n' >"$dir/cgroup.conf"
else
    printf 'CgroupPlugin=autodetect\nConstrainDevices=no\n' >"$dir/cgroup.conf"
fi
: >"$dir/plugstack.conf"
cat >"$dir/gres.conf" <<GRES
# Fake GPUs: gres/gpu only needs device files to exist.
NodeName=n[1-2] Name=gpu File=/dev/null
NodeName=n[1-2] Name=gpu File=/dev/zero
GRES
cat >"$dir/slurm.conf" <<CONF
# Written by tests/slurm/start.sh for a throwaway single-host test cluster.
ClusterName=ddpci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
PlugStackConfig=$dir/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
KillWait=5
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=30
NodeName=n[1-2] NodeHostname=$host NodeAddr=127.0.0.1 Port=$((port + 1))-$((port + 2)) CPUs=2 Gres=gpu:2 State=UNKNOWN
PartitionName=ci Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
CONF
{ grep -v -E '[[:space:]](n1|n2)$' /etc/hosts || true; echo "127.0.0.1 n1"; echo "127.0.0.1 n2"; } >"$dir/hosts"
chmod 0644 "$dir"/*.conf "$dir/hosts"

# Everything below runs in a private mount namespace; stop.sh kills every process in it.
unshare --mount --propagation private bash -eu -c '
    dir=$1
    mount --bind "$dir/hosts" /etc/hosts
    readlink /proc/self/ns/mnt >"$dir/run/mntns"
    munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
        --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"
    export SLURM_CONF=$dir/slurm.conf
    slurmctld -i -f "$SLURM_CONF"
    slurmd -f "$SLURM_CONF" -N n1
    slurmd -f "$SLURM_CONF" -N n2
' start "$dir"

export SLURM_CONF=$dir/slurm.conf
for _ in $(seq 1 60); do
    idle=$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | tr '\n' ' ')
    [ "$idle" = "n1 n2 " ] && { echo "tests/slurm/start.sh: cluster up in $dir (SLURM_CONF=$dir/slurm.conf)" >&2; exit 0; }
    sleep 0.5
done
echo "tests/slurm/start.sh: nodes did not become idle within 30 s; sinfo:" >&2
sinfo -N >&2 || true
tail -n 20 "$dir"/log/*.log >&2 || true
exit 1
