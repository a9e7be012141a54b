#!/usr/bin/env bash
# Agents starting one job through etcd (etcd-v3) against the c10d-style rendezvous, side by side: N agents on
# this host (loopback), one worker each, the same command line for all; a one-member etcd (Debian's etcd-server)
# started here. For each N and mode it prints:
#   start   time from starting the agents until every worker has started
#   fin     time from starting the agents until every agent has exited (workers sleep 1 s)
#   bad     agents that did not exit 0 (or were killed at the time limit)
# the ratio etcd / c10d, and the CPU seconds the agents (all of them together, with their workers) and etcd spent
# in each run: where the time went. Every agent's stderr is kept in $ETCD_BENCH_KEEP/<mode>-<N>/ when that is set.
# What an etcd agent pays (rdzv_etcd.h): loading libcurl (dlopen, about 30 libraries: 25-50 ms of CPU); a lease
# grant; one transaction that claims node rank 0 or, when that is held, answers with the ranks held (keys only),
# then one that claims a free one at random; a watch of the decision key; a read of the decision key and the
# election's first candidates (its answer does not grow with N) every 10 s. The decision-maker alone
# watches and reads every key of the job (2N), at most every 250 ms, while the nodes join.
# usage: bash bench/etcd.sh path/to/ddplaunch [N...]      (default N: 16 64)
# Both modes run with lost_after = 60 s (etcd: the lease's TTL; c10d: the heartbeats'): on a host that runs N
# agents and etcd on 2 CPUs, with other work, an agent or etcd can be off the CPU for longer than the default
# 15 s, and the bench measures starting and stopping, not losing nodes. ETCD_BENCH_LOST_AFTER sets it (1024
# agents on 2 CPUs: keepalives starve for longer than 60 s).
# ETCD_BENCH_LIMIT: seconds one run (one mode, one N) may take before its agents are killed (default 300).
set -u
DDP=${1:?usage: bench/etcd.sh path/to/ddplaunch [N...]}
DDP=$(realpath "$DDP")
shift
Ns=("$@")
[ ${#Ns[@]} = 0 ] && Ns=(16 64)
LIMIT=${ETCD_BENCH_LIMIT:-300}
LOST=${ETCD_BENCH_LOST_AFTER:-60}
command -v etcd >/dev/null || { echo "bench/etcd.sh: etcd-server is not installed" >&2; exit 1; }
# each agent holds a few descriptors, etcd one or two a agent, the shell none: raise the soft limit to the hard one
ulimit -n "$(ulimit -Hn)" 2>/dev/null
TMP=$(mktemp -d /tmp/ddpetcd.XXXXXX)
RUN=$TMP/run
[ -d /dev/shm ] && [ -w /dev/shm ] && RUN=$(mktemp -d /dev/shm/ddpetcd.XXXXXX)
export HOME=$TMP/home DDPLAUNCH_LOCK_DIR=$TMP/locks XDG_RUNTIME_DIR=$RUN
mkdir -p "$HOME" "$DDPLAUNCH_LOCK_DIR" "$XDG_RUNTIME_DIR"
chmod 700 "$XDG_RUNTIME_DIR"
read -r cport pport < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')
# etcd's data on tmpfs where there is one: its fsyncs (each write's raft entry, and the lease store's commits
# that the lessor waits for) then measure the rendezvous, not a disk that other work on the host keeps busy (on
# the shared VM's disk, fsyncs of over a second stalled lease keepalives until leases expired)
etcd --data-dir "$RUN/etcd" --listen-client-urls "http://127.0.0.1:$cport" \
    --advertise-client-urls "http://127.0.0.1:$cport" --listen-peer-urls "http://127.0.0.1:$pport" \
    --initial-advertise-peer-urls "http://127.0.0.1:$pport" --initial-cluster "default=http://127.0.0.1:$pport" \
    >"$TMP/etcd.log" 2>&1 &
epid=$!
# etcd stands for a cluster on hosts of its own: not niced with the agents, which share this host with it
renice -n 0 -p "$epid" >/dev/null 2>&1
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
    kill "$epid" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$TMP" "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for _ in $(seq 100); do ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$cport" endpoint health >/dev/null 2>&1 && break; sleep 0.1; done
now() { echo "${EPOCHREALTIME/./}"; } # microseconds
secs() { printf '%d.%02d' $(($1 / 1000000)) $(($1 % 1000000 / 10000)); } # microseconds as seconds
ratio() { [ "$2" -gt 0 ] && printf '%d.%02d' $(($1 / $2)) $(($1 * 100 / $2 % 100)) || printf -- '-'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; } # utime + stime of a pid
children_cpu() { # sets ccpu: the shell's waited-for children's CPU, in clock ticks (times' second line)
    times >"$TMP/times" # in this shell, not in $(...): a subshell has no children of its own
    ccpu=$(awk -v hz="$(getconf CLK_TCK)" 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/);
        printf "%d\n", ((u[1] + s[1]) * 60 + u[2] + s[2]) * hz }' "$TMP/times")
}
port=29700
run() { # mode n: sets start, finish (microseconds), bad, acpu, ecpu (clock ticks)
    local mode=$1 n=$2 i t0 rdzv c0 e0 deadline alive logs
    port=$((port + 1))
    # with etcd every node reserves the MASTER_PORT it would serve as group rank 0: here all on one host, so a
    # range wider than the default 500 ports, below the ephemeral ones
    if [ "$mode" = etcd ]; then rdzv=(--rdzv-backend etcd-v3 --rdzv-endpoint "127.0.0.1:$cport" --rdzv-id "b$port"
        --master-port auto:20000-22999)
    else rdzv=(--rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "b$port"); fi
    logs=$TMP/$mode-$n
    mkdir -p "$logs"
    : >"$TMP/started"
    pids=()
    children_cpu
    c0=$ccpu
    e0=$(cpu_ticks "$epid")
    t0=$(now)
    deadline=$((t0 + LIMIT * 1000000))
    for i in $(seq 1 "$n"); do
        setsid "$DDP" --nnodes "$n" --nproc-per-node 1 "${rdzv[@]}" --max-restarts 0 --set job.lost_after="$LOST" --no-python \
            /bin/sh -c "echo x >>'$TMP/started'; exec sleep 1" >/dev/null 2>"$logs/a$i.err" &
        pids+=($!)
    done
    start=-1
    while [ "$(now)" -lt "$deadline" ]; do
        [ "$(wc -l <"$TMP/started")" -ge "$n" ] && { start=$(($(now) - t0)); break; }
        sleep 0.02
    done
    while :; do # every agent gone (or the time limit)
        alive=0
        for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && { alive=1; break; }; done
        [ $alive = 0 ] || [ "$(now)" -ge "$deadline" ] && break
        sleep 0.05
    done
    finish=$(($(now) - t0))
    [ $alive = 1 ] && { finish=-1; for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done; }
    bad=0
    for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
    pids=()
    children_cpu
    acpu=$((ccpu - c0))
    ecpu=$(($(cpu_ticks "$epid") - e0))
    if [ $bad != 0 ]; then
        echo "bench/etcd.sh: $mode, $n agents: $bad did not exit 0; the first one's last lines:" >&2
        for f in "$logs"/a*.err; do grep -q . "$f" && { tail -3 "$f" >&2; break; }; done
    fi
    [ -n "${ETCD_BENCH_KEEP:-}" ] && { mkdir -p "$ETCD_BENCH_KEEP"; cp -r "$logs" "$TMP/etcd.log" "$ETCD_BENCH_KEEP/"; }
    rm -rf "$logs"
}
show() { [ "$1" -lt 0 ] && printf '>%d' "$LIMIT" || secs "$1"; }
hz=$(getconf CLK_TCK)
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg); time limit per run ${LIMIT}s; etcd data in $RUN"
printf '%6s %10s %10s %10s %10s %8s %8s %5s %5s %9s %9s %9s\n' agents c10d_start etcd_start c10d_fin etcd_fin \
    x_start x_fin c_bad e_bad c10d_cpu etcd_cpu etcd_srv
for n in "${Ns[@]}"; do
    run c10d "$n"
    cs=$start cf=$finish cb=$bad cc=$acpu
    run etcd "$n"
    es=$start ef=$finish eb=$bad ec=$acpu
    xs=- xf=-
    [ "$cs" -gt 0 ] && [ "$es" -gt 0 ] && xs=$(ratio "$es" "$cs")
    [ "$cf" -gt 0 ] && [ "$ef" -gt 0 ] && xf=$(ratio "$ef" "$cf")
    printf '%6s %10s %10s %10s %10s %8s %8s %5s %5s %9s %9s %9s\n' "$n" "$(show "$cs")" "$(show "$es")" \
        "$(show "$cf")" "$(show "$ef")" "$xs" "$xf" "$cb" "$eb" "$(secs $((cc * 1000000 / hz)))" \
        "$(secs $((ec * 1000000 / hz)))" "$(secs $((ecpu * 1000000 / hz)))"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# c10d_cpu, etcd_cpu: CPU seconds of all the agents (and their workers) of each run; etcd_srv: etcd's own"
