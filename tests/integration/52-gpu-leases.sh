#!/usr/bin/env bash
# GPU leases on the 8-GPU AWS g4dn.metal fixture (--topology): four concurrent 2-GPU jobs get four disjoint
# pairs; a fifth fails at once naming who holds which GPU (lease_wait = 0), or waits (lease_wait = 20s) and
# gets the pair of a job that was killed with kill -9. `ddplaunch topo` shows the leases.
. "$DDP_SRCDIR/tests/integration/lib.sh"
export DDPLAUNCH_LOCK_DIR=$TMP/locks
TOPO=$TOPO_DIR/2s-8gpu-aws-g4dn-metal-t4.xml
[ -r "$TOPO" ] || skip "fixture $TOPO not found"

# Each worker writes its GPU's bus id, then stays until its stop file appears (or 60 s pass).
# hold_gpu.sh: writes gpu.RANK and port.RANK, stays until DIR/stop
WORKER=$DDP_SRCDIR/tests/integration/hold_gpu.sh

start_job() { # start_job NAME [extra ddplaunch args...]: in the background, its pid in $TMP/NAME/pid
    local name=$1
    shift
    mkdir -p "$TMP/$name"
    "$DDP" --topology "$TOPO" --nproc-per-node 2 --numa-binding none --set "job.name=$name" "$@" \
        --no-python "$WORKER" "$TMP/$name" >"$TMP/$name/out" 2>&1 &
    echo $! >"$TMP/$name/pid"
}
stop_job() { touch "$TMP/$1/stop"; wait "$(cat "$TMP/$1/pid")"; }

# Four jobs at the same time.
for j in a b c d; do start_job "$j"; done
for j in a b c d; do wait_gpus "$j"; done
all=$(cat "$TMP"/[abcd]/gpu.* | sort)
echo "leased: $(echo $all)"
expect_eq "GPUs used by the four jobs" "$(echo "$all" | grep -c .)" 8
expect_eq "distinct GPUs among them" "$(echo "$all" | sort -u | grep -c .)" 8
for j in a b c d; do # a pair stays on one NUMA node (0000:18..36 = node 0, e7..f5 = node 1)
    pair=$(cat "$TMP/$j"/gpu.* | cut -c6-7 | sort | tr '\n' ' ')
    case $pair in 1*" "1*" "|3*" "3*" "|1*" "3*" "|e*" "e*" "|f*" "f*" "|e*" "f*" ") ;;
    *) fail "job $j got GPUs across NUMA nodes: $(cat "$TMP/$j"/gpu.* | tr '\n' ' ')" ;;
    esac
done

# topo shows who holds what
"$DDP" topo --topology "$TOPO" >"$TMP/topo.out" 2>&1
expect_grep "job 'a'" "$TMP/topo.out"
expect_grep "job 'd'" "$TMP/topo.out"

# A fifth job without waiting: fails before starting anything, listing the holders.
mkdir -p "$TMP/e"
t0=$(date +%s%N)
"$DDP" --topology "$TOPO" --nproc-per-node 2 --numa-binding none --set job.name=e \
    --no-python "$WORKER" "$TMP/e" >"$TMP/e/out" 2>&1
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
cat "$TMP/e/out"
expect_eq "refused, retry later (EX_TEMPFAIL)" "$rc" 75
[ ! -e "$TMP/e/gpu.0" ] || fail "the fifth job started a worker"
[ "$ms" -lt 3000 ] || fail "the fifth job took $ms ms to fail with lease_wait = 0"
for j in a b c d; do expect_grep "job '$j' \(pid $(cat "$TMP/$j/pid"), user " "$TMP/e/out"; done

# A fifth job that waits (saying so every 5 s); kill -9 job b's launcher: its workers die with it, its lease ends, e gets b's pair.
start_job e --set gpus.lease_wait=20s
sleep 1
kill -0 "$(cat "$TMP/e/pid")" || { cat "$TMP/e/out"; fail "the waiting job gave up"; }
[ ! -e "$TMP/e/gpu.0" ] || fail "the waiting job started before a GPU was free"
t0=$(date +%s%N)
kill -9 "$(cat "$TMP/b/pid")"
wait_gpus e
ms=$((($(date +%s%N) - t0) / 1000000))
echo "job e started $ms ms after kill -9 of job b"
expect_eq "job e's GPUs" "$(cat "$TMP/e"/gpu.* | sort | tr '\n' ' ')" "$(cat "$TMP/b"/gpu.* | sort | tr '\n' ' ')"
expect_grep "waiting for GPUs leased by other jobs \(0 s of 20 s\): " "$TMP/e/out"

for j in a c d e; do stop_job "$j"; done
# every lease ended with its job
"$DDP" topo --topology "$TOPO" >"$TMP/topo2.out" 2>&1
if grep -q "job '" "$TMP/topo2.out"; then cat "$TMP/topo2.out"; fail "leases left after every job ended"; fi
echo ok
