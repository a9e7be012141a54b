#!/usr/bin/env bash
# plan, busy = skip and busy = fail ask /proc first whether another process holds a GPU (topo/holders.c) and
# read NVML's memory and holders only when /proc cannot say "nobody" (issue 40: plan at most 3 ms). The one
# rule that must hold: /proc never says "nobody" where NVML lists a holder. The 2-GPU H200 fixture is paired
# with the fake NVML (a process holding 139.5 GiB on GPU 0) and with a /proc tree of the test's own
# (DDPLAUNCH_TOPOLOGY_PROC): each way /proc can fail to see that holder must end in NVML's answer.
. "$DDP_SRCDIR/tests/integration/lib.sh"
topo=$TOPO_DIR/vm-2gpu-h200-nonuma.xml
fake=$DDP_BUILD/helpers/fake_nvml
[ -r "$topo" ] || skip "fixture $topo not found"
[ -e "$fake/libnvidia-ml.so.1" ] || skip "fake NVML not built"
export DDPLAUNCH_TOPOLOGY_NVML=1 LD_LIBRARY_PATH=$fake FAKE_NVML_CONFIG=$TMP/nvml.conf
holder=4242
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 140G
gpu 0000:00:07.0 140G 0.5G
proc 0 $holder 139.5G
C
P=$TMP/proc
# proc PID [DEV...]: a process in the fake /proc with descriptors on DEV (a path its fd links name)
proc() {
    local pid=$1 i=3
    shift
    mkdir -p "$P/$pid/fd"
    echo "fake$pid" >"$P/$pid/comm"
    ln -sf /dev/null "$P/$pid/fd/0"
    for d in "$@"; do ln -sf "$d" "$P/$pid/fd/$i"; i=$((i + 1)); done
}
init_ns() { mkdir -p "$P/self/ns" && ln -sfn "pid:[4026531836]" "$P/self/ns/pid"; }
plan() { DDPLAUNCH_TOPOLOGY_PROC=$P "$DDP" plan --topology "$topo" --nproc-per-node 1 "$@" --no-python /bin/true; }
nvml_read() { # WHAT: plan shows NVML's memory and the holder
    plan >"$TMP/out" 2>&1 || { cat "$TMP/out"; fail "$1: plan failed"; }
    expect_grep "GPU 0 \(0000:00:06.0\): 140.0 of 140.0 GiB in use; held by pid $holder" "$TMP/out"
    if grep -q "held by no other process" "$TMP/out"; then fail "$1: /proc said nobody"; fi
}

# nobody holds /dev/nvidia* in the host's pid namespace, every fd readable: NVML is not read
init_ns
proc 1 /dev/null
proc 77 /tmp/x /dev/nvme0n1 /dev/nvram
plan >"$TMP/out" 2>&1 || { cat "$TMP/out"; fail "plan failed"; }
expect_grep "GPU 0 \(0000:00:06.0\): held by no other process \(/proc: nothing else has /dev/nvidia\* open; NVML not read\)" "$TMP/out"
if grep -q "GiB in use" "$TMP/out"; then fail "NVML's memory was read although /proc said nobody"; fi
plan --json >"$TMP/json" 2>&1 || fail "plan --json failed"
grep -q '"gpu_holders": \[\]' "$TMP/json" || { cat "$TMP/json"; fail "plan --json: no empty holders"; }
# a memory limit needs NVML's memory in use: read whatever /proc says
plan --set gpus.max_memory_used=50% >"$TMP/out" 2>&1
expect_grep "GiB in use" "$TMP/out"

# the holder has /dev/nvidia0 open (as every process holding GPU memory has): NVML names it
proc "$holder" /dev/nvidiactl /dev/nvidia0 /dev/nvidia-uvm
nvml_read "a holder with /dev/nvidia0 open"
# busy = skip chooses GPU 1, busy = fail refuses: both from NVML's answer
DDPLAUNCH_TOPOLOGY_PROC=$P "$DDP" --topology "$topo" --nproc-per-node 1 --set gpus.busy=skip \
    --no-python /bin/sh -c 'echo "gpu=$DDPLAUNCH_GPU_BUSID"' >"$TMP/out" 2>&1 || { cat "$TMP/out"; fail "skip"; }
expect_grep "gpu=0000:00:07.0" "$TMP/out"
DDPLAUNCH_TOPOLOGY_PROC=$P "$DDP" --topology "$topo" --nproc-per-node 1 --set gpus.busy=fail --no-python /bin/true \
    >"$TMP/out" 2>&1
expect_eq "busy = fail with a holder: exit status" "$?" 75
rm -rf "${P:?}/$holder"

# only /dev/nvidiactl (an NVML user: nvidia-smi, a monitoring agent) is still "maybe": NVML decides
proc 90 /dev/nvidiactl
nvml_read "a process with /dev/nvidiactl open"
rm -rf "${P:?}/90"
# the persistence daemon is not a holder only when it is root's /usr/bin/nvidia-persistenced
proc 91 /dev/nvidiactl /dev/nvidia0
ln -sfn /usr/local/bin/nvidia-persistenced "$P/91/exe"
nvml_read "a process named like the persistence daemon"
rm -rf "${P:?}/91"

# /proc mounted with hidepid: other users' processes are not listed at all (pid 1 is root's and out of sight),
# so a tree where every listed process is readable still cannot say "nobody": NVML decides
mv "$P/1" "$TMP/pid1"
nvml_read "/proc with hidepid (pid 1 not listed)"
mv "$TMP/pid1" "$P/1"

# a process whose descriptors cannot be read (another user's, without root) may hold one: NVML decides
proc 92
rm -rf "${P:?}/92/fd"
mkfifo "$P/92/fd" # not a directory that opens: as EACCES does for another user's, without root
nvml_read "a process whose descriptors are not readable"
rm -rf "${P:?}/92"

# not the host's pid namespace (a container's): processes out of sight may hold a GPU, NVML decides
ln -sfn "pid:[4026532999]" "$P/self/ns/pid"
nvml_read "another pid namespace"
rm -f "$P/self/ns/pid"
nvml_read "no pid namespace link"

# NVML's pids are the host's (issue 52 item 17). In a container with its own pid namespace and /proc, NVML's
# pid 2 is some process of the host; pid 2 here is an unrelated one of the container (a sleep): it must not be
# named as the holder, in plan, in doctor or in an out-of-memory failure's cause, and no hint may say to kill it.
# No /dev/nvidiactl is needed for that (this host has none): the namespace alone says it. Root only (unshare).
if unshare -pf --mount-proc true 2>/dev/null; then
    printf 'gpu 0000:00:06.0 140G 140G\ngpu 0000:00:07.0 140G 0.5G\nproc 0 2 139.5G\n' >"$TMP/nvml.conf"
    in_ns() { unshare -pf --mount-proc sh -c 'sleep 60 & exec "$@"' sh "$@"; } # the sleep is pid 2
    in_ns "$DDP" plan --topology "$topo" --nproc-per-node 1 --no-python /bin/true >"$TMP/out" 2>&1 ||
        { cat "$TMP/out"; fail "container: plan failed"; }
    expect_grep "GPU 0 \(0000:00:06.0\): 140.0 of 140.0 GiB in use; held by pid 2 in the host's pid namespace \(139.5 GiB\)" "$TMP/out"
    grep -q sleep "$TMP/out" && fail "container: plan named the container's pid 2: $(grep sleep "$TMP/out")"
    in_ns "$DDP" doctor --topology "$topo" --nproc-per-node 1 >"$TMP/out" 2>&1
    expect_grep "gpu-busy .*by pid 2 in the host's pid namespace \(139.5 GiB\)" "$TMP/out"
    grep -q sleep "$TMP/out" && fail "container: doctor named the container's pid 2: $(grep sleep "$TMP/out")"
    in_ns "$DDP" --topology "$topo" --nproc-per-node 1 --no-python /bin/sh -c \
        "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2; exit 1" >"$TMP/out" 2>&1
    expect_grep "cause +: GPU memory held at launch by pid 2 in the host's pid namespace" "$TMP/out"
    grep -qE "sleep|kill 2" "$TMP/out" && fail "container: the OOM named pid 2 here: $(grep -E 'sleep|kill 2' "$TMP/out")"
else
    echo "container part skipped: no unshare of a pid namespace with its own /proc here"
fi
echo "ok"
