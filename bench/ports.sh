#!/usr/bin/env bash
# Port allocation under contention: N (24) launchers started at the same instant, each a 2-worker job whose
# rank 0 binds MASTER_PORT as torch's TCPStore does and whose rank 1 must reach its own job's rank 0
# (tests/integration/tcpstore_bind.py). Reports, per launcher: failed jobs, distinct ports, time from the common
# start to rank 0 listening (median / max), wall time. Launchers: ddplaunch (master_port = auto), Debian's
# torchrun 1.13 with its default port (29500), and torchrun with a random port per job (a common workaround).
# Plus the reservation alone: N processes calling ddp_port_reserve() at once (microseconds).
# Usage: bench/ports.sh [BUILD_DIR]   env: JOBS (24), ROUNDS (3, ddplaunch), TORCHRUN_ROUNDS (1), NO_TORCHRUN=1
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRC/build}
BUILD=$(cd "$BUILD" && pwd)
DDP=$BUILD/ddplaunch
PY=/usr/bin/python3
JOBS=${JOBS:-24}
ROUNDS=${ROUNDS:-3}
TORCHRUN_ROUNDS=${TORCHRUN_ROUNDS:-1}
WORKER=$SRC/tests/integration/tcpstore_bind.py
TMP=$(mktemp -d /tmp/ddpbench-ports.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
unset DDPLAUNCH_LOCK_DIR # the host's lock dir: other ddplaunch jobs running meanwhile take part as well
[ -x "$DDP" ] || { echo "bench/ports.sh: $DDP not built (make)"; exit 1; }

# Debian's torchrun 1.13 exits at start on Python 3.11 (Std.from_str; /work/shared/notes/torchrun.md): the
# same torchrun with that one function replaced.
cat >"$TMP/torchrun113.py" <<'EOF'
import re, sys
from torch.distributed.elastic.multiprocessing.api import Std
def _from_str(vm):
    if re.fullmatch(r"[0-3]", vm):
        return Std(int(vm))
    return {int(i): Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
Std.from_str = staticmethod(_from_str)
from torch.distributed.run import main
sys.exit(main())
EOF

# round NAME DIR CMD...: start JOBS copies of CMD at one instant; CMD gets OUTFILE HOLD appended. Job i's
# environment has JOB_TOKEN=job$i (crosstalk check) and PORT_I=i.
round() {
    local name=$1 dir=$2
    shift 2
    mkdir -p "$dir"
    exec 9>"$dir/gate"
    flock -x 9
    local pids=()
    for i in $(seq 1 "$JOBS"); do
        (
            exec 9>&-
            cmd=("$@")
            cmd=("${cmd[@]//@I@/$i}")
            cmd=("${cmd[@]//@RANDPORT@/$((29500 + $(od -An -N2 -tu2 /dev/urandom) % 500))}")
            JOB_TOKEN="job$i" flock -s "$dir/gate" "${cmd[@]}" "$dir/port.$i" 1.0 >"$dir/out.$i" 2>&1
            echo $? >"$dir/rc.$i"
        ) &
        pids+=($!)
    done
    sleep 0.5
    date +%s.%N >"$dir/t0"
    flock -u 9
    exec 9>&-
    wait "${pids[@]}"
    date +%s.%N >"$dir/t1"
}

# summarize NAME DIRS...: one table line over all rounds
summarize() {
    local name=$1
    shift
    local jobs=0 failed=0 lat="" walls="" distinct=0
    for d in "$@"; do
        local t0 t1
        t0=$(cat "$d/t0")
        t1=$(cat "$d/t1")
        walls="$walls $(echo "$t1 - $t0" | bc)"
        for i in $(seq 1 "$JOBS"); do
            jobs=$((jobs + 1))
            [ "$(cat "$d/rc.$i")" = 0 ] || failed=$((failed + 1))
            [ -s "$d/port.$i" ] && lat="$lat $(awk -v t0="$t0" '{printf "%.3f", $3 - t0}' "$d/port.$i")"
        done
        distinct=$((distinct + $(cat "$d"/port.* 2>/dev/null | awk '{print $2}' | sort -u | grep -c .)))
    done
    local stats
    stats=$(echo "$lat" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {if (NR) printf "%.2f / %.2f", a[int((NR+1)/2)], a[NR]; else printf "- / -"}')
    local wall
    wall=$(echo "$walls" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]}')
    printf "%-34s %5d %7d %9s %21s %9s\n" "$name" "$jobs" "$failed" "$distinct" "$stats" "$wall"
    for d in "$@"; do # why the first failures failed
        for i in $(seq 1 "$JOBS"); do
            [ "$(cat "$d/rc.$i")" = 0 ] && continue
            grep -hE "EADDRINUSE|CROSSTALK|could not reach|nothing listens|Address already in use|ddplaunch:" \
                "$d/out.$i" | head -2 | sed "s/^/    $(basename "$d") job $i: /"
        done
    done | head -6
}

echo "ports bench: $JOBS concurrent 2-worker jobs per round, $(nproc) CPUs, $(uname -r)"
printf "%-34s %5s %7s %9s %21s %9s\n" "launcher" "jobs" "failed" "distinct" "to listen med/max (s)" "wall (s)"

dirs=()
for r in $(seq 1 "$ROUNDS"); do
    round ddplaunch "$TMP/ddp$r" "$DDP" -q --nproc-per-node 2 --numa-binding none "$WORKER"
    dirs+=("$TMP/ddp$r")
done
summarize "ddplaunch (master_port = auto)" "${dirs[@]}"

if [ "${NO_TORCHRUN:-0}" != 1 ] && $PY -c 'import torch' 2>/dev/null; then
    dirs=()
    for r in $(seq 1 "$TORCHRUN_ROUNDS"); do
        round torchrun "$TMP/tr$r" $PY "$TMP/torchrun113.py" --nproc_per_node 2 --monitor_interval 0.1 "$WORKER"
        dirs+=("$TMP/tr$r")
    done
    summarize "torchrun 1.13 (default port 29500)" "${dirs[@]}"
    dirs=()
    for r in $(seq 1 "$TORCHRUN_ROUNDS"); do
        round torchrun-rand "$TMP/trr$r" $PY "$TMP/torchrun113.py" --nproc_per_node 2 --monitor_interval 0.1 \
            --master_port @RANDPORT@ "$WORKER"
        dirs+=("$TMP/trr$r")
    done
    summarize "torchrun 1.13 (random port/job)" "${dirs[@]}"
    echo "  (random ports: two of $JOBS jobs share one of 500 with probability" \
        "$(awk -v n="$JOBS" 'BEGIN { p = 1; for (k = 0; k < n; k++) p *= 1 - k / 500; printf "%.0f%%", 100 * (1 - p) }'))"
else
    echo "torchrun: skipped (NO_TORCHRUN=1 or no python3-torch)"
fi

# The reservation alone: JOBS processes call ddp_port_reserve() at the same instant and hold the port.
if [ -f "$BUILD/libddp.a" ]; then
    cat >"$TMP/resv.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "port.h"
#include "rundir.h"
int main(int argc, char **argv)
{
    int n = atoi(argv[1]);
    int gate = open(argv[2], O_RDWR | O_CREAT, 0600), pfd[2];
    if (gate < 0 || pipe(pfd) < 0)
        return 1;
    flock(gate, LOCK_EX);
    for (int i = 0; i < n; i++) {
        if (fork() == 0) {
            int g = open(argv[2], O_RDWR);
            flock(g, LOCK_SH); /* everyone starts when the parent lets go */
            struct ddp_port_req req = {.lock_dir = argv[3], .addr = "127.0.0.1", .spec = {.is_auto = true}};
            struct ddp_port_resv *r;
            int port = -1;
            struct ddp_err err;
            long long t0 = ddp_now_ns();
            int rc = ddp_port_reserve(&req, &r, &port, &err);
            long long us = (ddp_now_ns() - t0) / 1000;
            char line[64];
            int len = snprintf(line, sizeof line, "%d %d %lld\n", rc, port, us);
            if (write(pfd[1], line, (size_t)len) != len)
                _exit(1);
            sleep(2); /* hold it while the others allocate */
            _exit(0);
        }
    }
    close(pfd[1]);
    usleep(300000);
    flock(gate, LOCK_UN);
    char buf[65536];
    ssize_t got, total = 0;
    while ((got = read(pfd[0], buf + total, sizeof buf - 1 - (size_t)total)) > 0)
        total += got;
    buf[total] = 0;
    fputs(buf, stdout);
    while (wait(NULL) > 0)
        ;
    return 0;
}
EOF
    if cc -std=c11 -D_GNU_SOURCE -O2 -I"$SRC/launcher" -o "$TMP/resv" "$TMP/resv.c" "$BUILD/libddp.a" 2>"$TMP/cc.err"; then
        "$TMP/resv" "$JOBS" "$TMP/resv.gate" "$TMP/resv-locks" >"$TMP/resv.out"
        failed=$(awk '$1 != 0' "$TMP/resv.out" | grep -c .)
        distinct=$(awk '$1 == 0 {print $2}' "$TMP/resv.out" | sort -u | grep -c .)
        us=$(awk '$1 == 0 {print $3}' "$TMP/resv.out" | sort -n | awk '{a[NR]=$1} END {printf "median %d us, max %d us", a[int((NR+1)/2)], a[NR]}')
        echo "ddp_port_reserve alone, $JOBS processes at once: $failed failed, $distinct distinct ports, $us"
    else
        echo "reservation micro-bench: could not compile ($(head -1 "$TMP/cc.err"))"
    fi
fi
