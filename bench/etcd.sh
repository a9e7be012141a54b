#!/usr/bin/env bash
# Agents starting one job through etcd (etcd-v3) against the c10d-style rendezvous, side by side: N agents on
# this host (loopback), one worker each, the same command line for all; a one-member etcd (Debian's etcd-server)
# started here. For each N and mode it prints:
#   start   time from starting the agents until every worker has started
#   finish  time from starting the agents until every agent has exited 0 (workers sleep 1 s)
# and the ratio etcd / c10d. Where etcd's cost goes: each agent makes 4 requests to join (lease, one
# compare-and-swap per node rank it tries, an election key, a read), so the K-th agent tries K ranks; every
# agent reads the job's keys (N of them) at each watch event; one agent decides.
# usage: bash bench/etcd.sh path/to/ddplaunch [N...]      (default N: 16 64)
set -u
DDP=${1:?usage: bench/etcd.sh path/to/ddplaunch [N...]}
shift
Ns=("$@")
[ ${#Ns[@]} = 0 ] && Ns=(16 64)
command -v etcd >/dev/null || { echo "bench/etcd.sh: etcd-server is not installed" >&2; exit 1; }
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
etcd --data-dir "$TMP/etcd" --listen-client-urls "http://127.0.0.1:$cport" \
    --advertise-client-urls "http://127.0.0.1:$cport" --listen-peer-urls "http://127.0.0.1:$pport" \
    --initial-advertise-peer-urls "http://127.0.0.1:$pport" --initial-cluster "default=http://127.0.0.1:$pport" \
    >"$TMP/etcd.log" 2>&1 &
epid=$!
trap 'kill $epid 2>/dev/null; rm -rf "$TMP" "$RUN"' EXIT
for _ in $(seq 100); do ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$cport" endpoint health >/dev/null 2>&1 && break; sleep 0.1; done
now() { echo "${EPOCHREALTIME/./}"; } # microseconds
port=29700
run() { # mode n: sets start, finish (seconds)
    local mode=$1 n=$2 i t0 rdzv
    port=$((port + 1))
    if [ "$mode" = etcd ]; then rdzv=(--rdzv-backend etcd-v3 --rdzv-endpoint "127.0.0.1:$cport" --rdzv-id "b$port")
    else rdzv=(--rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "b$port"); fi
    : >"$TMP/started"
    pids=()
    t0=$(now)
    for i in $(seq 1 "$n"); do
        setsid "$DDP" --nnodes "$n" --nproc-per-node 1 "${rdzv[@]}" --max-restarts 0 --no-python \
            /bin/sh -c "echo x >>'$TMP/started'; exec sleep 1" >/dev/null 2>"$TMP/a$i.err" &
        pids+=($!)
    done
    for _ in $(seq 30000); do [ "$(wc -l <"$TMP/started")" -ge "$n" ] && break; sleep 0.01; done
    start=$(echo "scale=2; ($(now) - $t0) / 1000000" | bc)
    local bad=0
    for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
    finish=$(echo "scale=2; ($(now) - $t0) / 1000000" | bc)
    [ $bad = 0 ] || { echo "bench/etcd.sh: $mode, $n agents: $bad failed" >&2; cat "$TMP/a1.err" >&2; }
}
printf '%6s %10s %10s %10s %10s %8s %8s\n' agents c10d_start etcd_start c10d_fin etcd_fin x_start x_fin
for n in "${Ns[@]}"; do
    run c10d "$n"; cs=$start cf=$finish
    run etcd "$n"; es=$start ef=$finish
    printf '%6s %10s %10s %10s %10s %8s %8s\n' "$n" "$cs" "$es" "$cf" "$ef" \
        "$(echo "scale=2; $es / $cs" | bc)" "$(echo "scale=2; $ef / $cf" | bc)"
done
