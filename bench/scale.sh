#!/usr/bin/env bash
# Scale of a job on several nodes: N agents on this host (loopback) form one job through the c10d-style
# rendezvous (the same command line for every agent; the first serves, the others join and get node ranks),
# one worker each. For each N it prints:
#   start    time from starting the agents until every worker has started
#   bare     the same for the same processes without the launcher, in the same run: N x `setsid /bin/sh -c
#            'echo x >>started; exec sleep S'` from this script (what spawning costs on this host at all)
#   x_bare   start / bare
#   joined   time from starting the agents until node 0 logged every node up (the rendezvous; start - joined is
#            node 0's START reaching the agents and each agent starting its worker)
#   finish   time from starting the agents until every agent has exited 0 (workers sleep 1 s)
#   stop     time from SIGKILL of one joined agent until every other agent has exited (workers sleep 600 s)
#   bare_stop  SIGTERM to N bare sessions (sh exec'd sleep) until every one has exited
#   cpu/rss  the serving agent's CPU time (user+sys) and peak memory in the finish run
# Each agent runs in a session of its own (setsid), as an agent on a node of its own would: with the kernel's
# autogroup scheduling, agents sharing this script's session would share one group's CPU time between a thousand
# of them (the serving agent included), while every worker's shim has a session, and so a group, of its own.
# The runtime directory is on tmpfs (/dev/shm) when there is one, as /run/user/UID is on a systemd host.
# usage: bash bench/scale.sh path/to/ddplaunch [N...]      (default N: 4 16 64 128 256 512)
# DDP_ARGS: more arguments for every agent, split as the shell splits words: on a host with GPUs, '--set
# gpus.select=none' (each agent would otherwise wait for a GPU of its own)
set -u
DDP=${1:?usage: bench/scale.sh path/to/ddplaunch [N...]}
shift
Ns=("$@")
[ ${#Ns[@]} = 0 ] && Ns=(4 16 64 128 256 512)
TMP=$(mktemp -d /tmp/ddpscale.XXXXXX)
RUN=$TMP/run
[ -d /dev/shm ] && [ -w /dev/shm ] && RUN=$(mktemp -d /dev/shm/ddpscale.XXXXXX)
trap 'rm -rf "$TMP" "$RUN"' EXIT
export HOME=$TMP/home DDPLAUNCH_LOCK_DIR=$TMP/locks XDG_RUNTIME_DIR=$RUN
mkdir -p "$HOME" "$DDPLAUNCH_LOCK_DIR" "$XDG_RUNTIME_DIR"
chmod 700 "$XDG_RUNTIME_DIR"
now() { echo "${EPOCHREALTIME/./}"; } # microseconds
port=29600

# one run: N agents, workers sleep S; sets t_start/t_finish (us since launch), srv_pid, pids[]
launch() {
    local n=$1 s=$2 i
    port=$((port + 1))
    : >"$TMP/started"
    pids=()
    t0=$(now)
    for i in $(seq 1 "$n"); do
        # shellcheck disable=SC2086 # DDP_ARGS is words
        setsid "$DDP" ${DDP_ARGS:-} --nnodes "$n" --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:$port \
            --rdzv-id scale --max-restarts 0 --no-python /bin/sh -c "echo x >>'$TMP/started'; exec sleep $s" \
            >"$TMP/a$i.out" 2>"$TMP/a$i.err" &
        pids+=($!)
    done
}
wait_started() { # until every worker has started (or 300 s); t_joined: until node 0 logged every node up
    local n=$1 i srv=""
    t_joined=0
    for i in $(seq 1 30000); do
        if [ "$t_joined" = 0 ] && [ -n "${2:-}" ]; then
            [ -n "$srv" ] || srv=$(grep -l "waiting up to" "$TMP"/a*.err 2>/dev/null | head -n 1)
            [ -n "$srv" ] && grep -q "($n of $n nodes up)" "$srv" && t_joined=$(($(now) - t0))
        fi
        [ "$(wc -l <"$TMP/started")" -ge "$n" ] && break
        sleep 0.01
    done
    t_start=$(($(now) - t0))
    [ "$t_joined" = 0 ] && t_joined=$t_start # logged between the last two looks
}
# the same process tree without the launcher: sets t_bare (us until every "worker" started) and t_bare_stop
bare() {
    local n=$1 i
    : >"$TMP/started"
    pids=()
    t0=$(now)
    for i in $(seq 1 "$n"); do
        setsid /bin/sh -c "echo x >>'$TMP/started'; exec sleep 600" >/dev/null 2>&1 &
        pids+=($!)
    done
    wait_started "$n"
    t_bare=$t_start
    t0=$(now)
    kill -TERM "${pids[@]}"
    for i in "${pids[@]}"; do wait "$i"; done 2>/dev/null
    t_bare_stop=$(($(now) - t0))
}
secs() { awk -v u="$1" 'BEGIN { printf "%.2f", u / 1e6 }'; }
server_pid() { grep -l "waiting up to" "$TMP"/a*.err 2>/dev/null | head -n 1 | sed 's/.*a\([0-9]*\)\.err/\1/'; }

printf '%6s %8s %8s %7s %9s %8s %10s %10s %10s %8s\n' N start_s bare_s x_bare finish_s stop_s bare_stop_s \
    srv_cpu_s srv_rss_MB joined_s
for n in "${Ns[@]}"; do
    bare "$n"
    # finish run, with the serving agent's CPU and peak RSS sampled from /proc until it exits
    launch "$n" 1
    wait_started "$n" joined
    idx=$(server_pid)
    spid=${pids[$((idx - 1))]}
    cpu=0 rss=0
    while kill -0 "$spid" 2>/dev/null; do
        read -r -a st <"/proc/$spid/stat" 2>/dev/null && cpu=$((st[13] + st[14]))
        r=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$spid/status" 2>/dev/null)
        [ -n "$r" ] && rss=$r
        sleep 0.05
    done
    bad=0
    for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
    t_finish=$(($(now) - t0))
    [ $bad = 0 ] || { echo "N=$n: $bad agents failed; first error:"; cat "$TMP"/a*.err | grep -m3 error; }
    t_start_run=$t_start t_joined_run=$t_joined
    start_s=$(secs "$t_start")
    finish_s=$(secs "$t_finish")
    cpu_s=$(awk -v t="$cpu" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }')
    rss_mb=$(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }')

    # stop run: SIGKILL one joined agent once every worker runs; every other agent must exit
    launch "$n" 600
    wait_started "$n"
    idx=$(server_pid)
    victim=$((idx == 1 ? 2 : 1))
    exec 3>&2 2>/dev/null # not bash's "Killed" line for the victim
    kill -KILL "${pids[$((victim - 1))]}"
    tk=$(now)
    for i in "${!pids[@]}"; do [ $((i + 1)) = "$victim" ] || wait "${pids[$i]}"; done
    t_stop=$(($(now) - tk))
    wait "${pids[$((victim - 1))]}" # its worker is ended by the worker's shim
    exec 2>&3 3>&-
    stop_s=$(secs "$t_stop")
    x=$(awk -v a="$t_start_run" -v b="$t_bare" 'BEGIN { printf "%.1f", a / b }')
    printf '%6s %8s %8s %7s %9s %8s %10s %10s %10s %8s\n' "$n" "$start_s" "$(secs "$t_bare")" "$x" "$finish_s" "$stop_s" \
        "$(secs "$t_bare_stop")" "$cpu_s" "$rss_mb" "$(secs "$t_joined_run")"
done
