#!/bin/bash
# ddplaunch doctor on this machine: one line per check with its status, exit status 0/1/2, a port held by a
# python listener fails naming the holder, --json parses and agrees with the exit status, injected faults
# (cross-socket GPU selection on the g4dn fixture, bad NCCL variables, a missing interface, a tiny open-files
# limit, an unresolvable master address).
. "$DDP_SRCDIR/tests/integration/lib.sh"

if "$DDP" doctor >"$TMP/probe" 2>&1 </dev/null; then :; fi
grep -q "not implemented" "$TMP/probe" && skip "doctor is not wired into main.c yet"

[ -x "$PY" ] || PY=$(command -v python3) # machines without Debian's python3 (the GPU machine)
export DDPLAUNCH_LOCK_DIR=$TMP/locks XDG_RUNTIME_DIR=$TMP
unset NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME NCCL_DEBUG CUDA_VISIBLE_DEVICES DDPLAUNCH_TOPOLOGY
CHECKS="gpus numa gpu-busy leases driver devices nccl-lib nccl-env master-port master-addr nccl-ifname gloo-ifname cpus nofile state-dir"

# 1. plain run: every check, one well-formed line each, exit status from the worst line
rc=0
"$DDP" doctor >"$TMP/out" 2>"$TMP/err" || rc=$?
cat "$TMP/out"
for c in $CHECKS; do expect_grep "^(ok|skip|warn|fail) +$c +[^ ]" "$TMP/out"; done
bad=$(grep -cvE '^(ok|skip|warn|fail) +[a-z-]+ +.+' "$TMP/out" || true)
expect_eq "malformed lines" "$bad" 0
want=0
grep -q '^warn' "$TMP/out" && want=1
grep -q '^fail' "$TMP/out" && want=2
expect_eq "exit status of a plain run" "$rc" "$want"
[ -s "$TMP/err" ] && { cat "$TMP/err"; fail "doctor wrote to stderr"; }

# 2. an explicit port held by a python listener: fail, naming pid and command
hold_port port 1 20000-28999 # below the ephemeral range, where doctor says "is free" (not a warning)
$PY -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen()
print("ready", flush=True); time.sleep(60)' "$port" >"$TMP/listener" &
lpid=$!
for _ in $(seq 100); do grep -q ready "$TMP/listener" && break; sleep 0.05; done
grep -q ready "$TMP/listener" || fail "python listener did not start"
rc=0
"$DDP" doctor --master-port "$port" >"$TMP/port" 2>&1 || rc=$?
kill "$lpid"; wait "$lpid" 2>/dev/null
cat "$TMP/port" | grep master-port
expect_eq "exit status with a busy master port" "$rc" 2
expect_grep "^fail +master-port +$port is in use by pid $lpid \(python3.*; use master_port = auto$" "$TMP/port"
# and free again once it is gone
"$DDP" doctor --master-port "$port" >"$TMP/port2" 2>&1 || true
expect_grep "^ok +master-port +$port is free" "$TMP/port2"

# 3. --json: one document that parses, with every check and the same exit status
rc=0
NCCL_SOCKET_IFNAME=nosuchif0 "$DDP" doctor --json >"$TMP/json" 2>&1 || rc=$?
expect_eq "exit status with a missing interface (json)" "$rc" 2
$PY - "$TMP/json" "$rc" $CHECKS <<'EOF' || fail "--json output is wrong: $(cat "$TMP/json")"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["exit_status"] == int(sys.argv[2]), doc["exit_status"]
assert doc["status"] == "fail"
names = [c["check"] for c in doc["checks"]]
for c in sys.argv[3:]:
    assert c in names, c
for c in doc["checks"]:
    assert c["status"] in ("ok", "skip", "warn", "fail") and c["found"], c
ifc = [c for c in doc["checks"] if c["check"] == "nccl-ifname"][0]
assert ifc["status"] == "fail" and "nosuchif0" in ifc["found"] and ifc["todo"], ifc
EOF

# 4. faults: cross-socket selection on the 2-socket g4dn fixture names the same-node set
if [ -f "$TOPO_DIR/2s-8gpu-aws-g4dn-metal-t4.xml" ]; then
rc=0
"$DDP" doctor --topology "$TOPO_DIR/2s-8gpu-aws-g4dn-metal-t4.xml" --nproc-per-node 4 \
    --set gpus.select=0,1,4,5 >"$TMP/numa" 2>&1 || rc=$?
expect_grep "^ok +gpus +8 GPUs visible \(4 usable\); would pick 0000:18:00.0,0000:19:00.0,0000:e7:00.0,0000:e8:00.0" "$TMP/numa"
expect_grep "^warn +numa +picked GPUs span NUMA nodes 0,1, across sockets 0,1; 0000:18:00.0,0000:19:00.0,0000:35:00.0,0000:36:00.0 on NUMA node 0 would not" "$TMP/numa"
[ "$rc" -ge 1 ] || fail "cross-socket selection: exit status $rc"
"$DDP" doctor --topology "$TOPO_DIR/2s-8gpu-aws-g4dn-metal-t4.xml" --nproc-per-node 4 >"$TMP/numa2" 2>&1 || true
expect_grep "^ok +numa +picked GPUs share NUMA node 0" "$TMP/numa2"
else
    echo "(no shared fixtures here: cross-socket part not run)"
fi

# bad NCCL variables: a variable that does not exist warns, an impossible value fails
NCCL_SOCKET_TIMEOUT=600 "$DDP" doctor >"$TMP/nccl" 2>&1 || true
expect_grep "^warn +nccl-env +.*NCCL_SOCKET_TIMEOUT" "$TMP/nccl"
rc=0
NCCL_IB_TIMEOUT=600 "$DDP" doctor >"$TMP/nccl2" 2>&1 || rc=$?
expect_grep "^fail +nccl-env +.*NCCL_IB_TIMEOUT=600" "$TMP/nccl2"
expect_eq "exit status with NCCL_IB_TIMEOUT=600" "$rc" 2

# a tiny open-files limit
rc=0
(ulimit -n 64 && exec "$DDP" doctor --nproc-per-node 8) >"$TMP/nofile" 2>&1 || rc=$?
expect_grep "^fail +nofile +open files limit 64 .* below the 128 the launcher needs for 8 workers" "$TMP/nofile"
expect_eq "exit status with ulimit -n 64" "$rc" 2

# an unresolvable master address
"$DDP" doctor --master-addr nosuchhost.invalid >"$TMP/addr" 2>&1 || true
expect_grep "^fail +master-addr +nosuchhost.invalid does not resolve" "$TMP/addr"

# issue 23 item 7: the workers' python must import torch: a python without it fails, naming one that has it
printf 'import torch\n' >"$TMP/t.py"
printf '#!/bin/sh\necho "ModuleNotFoundError: No module named torch" >&2\nexit 1\n' >"$TMP/notorch"
chmod +x "$TMP/notorch"
rc=0
PYTHON_EXEC=$TMP/notorch "$DDP" doctor "$TMP/t.py" >"$TMP/py.out" 2>&1 || rc=$?
expect_eq "doctor, a python without torch: exit status" "$rc" 2
expect_grep "^fail +python +$TMP/notorch \(PYTHON_EXEC\) cannot import torch: ModuleNotFoundError: No module named torch; .*run with PYTHON_EXEC=/[^ ]*python3?, which imports torch [0-9]" "$TMP/py.out"
PYTHON_EXEC=$PY "$DDP" doctor "$TMP/t.py" >"$TMP/py2.out" 2>&1 || true
expect_grep "^ok +python +$PY \(PYTHON_EXEC\) imports torch [0-9]" "$TMP/py2.out"
echo "80-doctor: ok"
