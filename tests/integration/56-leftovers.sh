#!/usr/bin/env bash
# Leftovers (issue 24, item 10): a SIGKILLed launcher cannot remove its ps file (job-PID.json), its GPU lease
# info files (gpu-BUSID.UID.info) or its attempt's cgroup directory; the next launch removes what no living job
# holds, and nothing of a job still running.
. "$DDP_SRCDIR/tests/integration/lib.sh"
TOPO=$TOPO_DIR/2s-8gpu-aws-g4dn-metal-t4.xml
[ -r "$TOPO" ] || fail "fixture $TOPO not found"
WORKER=$DDP_SRCDIR/tests/integration/hold_gpu.sh
L=$DDPLAUNCH_LOCK_DIR
start_job() { # start_job NAME: a 2-GPU job in the background
    mkdir -p "$TMP/$1"
    "$DDP" --topology "$TOPO" --nproc-per-node 2 --numa-binding none --set "job.name=$1" --no-python "$WORKER" \
        "$TMP/$1" >"$TMP/$1/out" 2>&1 &
    echo $! >"$TMP/$1/pid"
}
cgroup_of() { # the attempt-0 cgroup directory of launcher pid $1 (under the cgroup2 mount, pure v2 or hybrid)
    local mnt rel
    mnt=$(awk '$0 ~ / - cgroup2 / && $4 == "/" {print $5; exit}' /proc/self/mountinfo)
    rel=$(sed -n 's/^0:://p' "/proc/$1/cgroup")
    echo "$mnt${rel%/}/ddplaunch-$1-attempt-0"
}
infos_of() { grep -l "^pid=$1$" "$L"/gpu-*.info 2>/dev/null | grep -c .; }

start_job a
start_job c
wait_gpus a
wait_gpus c
a=$(cat "$TMP/a/pid")
c=$(cat "$TMP/c/pid")
cg_a=$(cgroup_of "$a")
cg_c=$(cgroup_of "$c")
[ -f "$L/job-$a.json" ] || fail "job a published no ps file"
expect_eq "info files of job a" "$(infos_of "$a")" 2
if [ -d "$cg_a" ]; then have_cg=1; else have_cg=0; echo "note: no attempt cgroup here (cgroup v2 not delegated): cgroup part not checked"; fi
[ "$(id -u)" != 0 ] || [ "$have_cg" = 1 ] || echo "note: root without an attempt cgroup (controllers enabled in this cgroup?)"

kill -KILL "$a"
wait "$a" 2>/dev/null
# what it left (the precondition of this test)
[ -f "$L/job-$a.json" ] || fail "SIGKILL of the launcher left no ps file (nothing to sweep)"
expect_eq "info files left by job a" "$(infos_of "$a")" 2
# (checked at once: any launch on this host that starts now, another test's too, may sweep it first)
[ "$have_cg" = 0 ] || [ -d "$cg_a" ] || fail "no cgroup left by job a"
ls -d "$cg_a" 2>/dev/null

# the next launch sweeps job a's leftovers
mkdir "$TMP/b"
"$DDP" --topology "$TOPO" --nproc-per-node 2 --numa-binding none --no-python /bin/true >"$TMP/b/out" 2>&1
rc=$?
cat "$TMP/b/out"
expect_eq "status of the next job" "$rc" 0
[ ! -e "$L/job-$a.json" ] || fail "job a's ps file is still there"
expect_eq "info files of job a after the next launch" "$(infos_of "$a")" 0
[ "$have_cg" = 0 ] || [ ! -d "$cg_a" ] || fail "job a's cgroup $cg_a is still there"
# ... and nothing of job c, which still runs
[ -f "$L/job-$c.json" ] || fail "the running job c lost its ps file"
expect_eq "info files of the running job c" "$(infos_of "$c")" 2
[ "$have_cg" = 0 ] || [ -d "$cg_c" ] || fail "the running job c lost its cgroup"
expect_eq "jobs in ps" "$("$DDP" ps --json | $PY -c 'import json,sys; print([j["job"] for j in json.load(sys.stdin)])')" "['c']"
touch "$TMP/c/stop"
wait "$c" || fail "job c: status $?"
echo ok
