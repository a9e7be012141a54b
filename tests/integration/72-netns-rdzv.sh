#!/usr/bin/env bash
# Issue 17, several nodes as users start them without Slurm: three network namespaces joined by a bridge
# (10.232.0.0/24 in a private "hub" namespace), each node in its own UTS namespace with its own host name
# (node-c, node-a, node-b: the serving node sorts last by name). One gloo worker script prints what it saw.
#  1. c10d, the same command on every node, no node rank (pytorch/examples' sbatch_run.sh, accelerate): the agent
#     on the endpoint's host serves; ranks 0-2 in host-name order after node 0, world 3, all_reduce sums right;
#     node 0 picked MASTER_PORT and sent it; the secret (DDPLAUNCH_JOB_SECRET) is not in any worker's environment.
#  2. Kubeflow's elastic PyTorchJob: only PET_* variables (PET_NNODES=1:3, PET_RDZV_*), nodes with 2, 1 and 3
#     workers: world 6, each node its own count, consecutive rank blocks.
#  3. nnodes 2:3 with a late node: nodes 0 and 1 start (join_timeout 2 s from --rdzv-conf), node 2 arrives after
#     attempt 0 started and waits; a worker is killed, and attempt 1 runs on 3 nodes (the job grew).
#  4. A hostile peer: 70 idle connections to the rendezvous port from another host before the real nodes join:
#     the job forms anyway, and node 0 writes a handful of warnings, not thousands.
#  5. Two jobs of one user on the same nodes share the token-file secret (same run id "none"): a node of job Y,
#     pointed at job X's endpoint, is refused (job identity in the handshake), and job X runs with its own node.
#  6. Several nodes, static rendezvous, no node rank: node 0 as torchrun; a second node 0 on its host: one line,
#     exit 2, nothing started.
#  7. Scheduler adapters, each node started with its scheduler's real variables and the same command line:
#     SkyPilot (SKYPILOT_NODE_RANK, SKYPILOT_NUM_NODES, SKYPILOT_NODE_IPS: node 0's address from the list),
#     OpenMPI `mpirun -N 1` (OMPI_COMM_WORLD_*), Flux `flux run -N3` (FLUX_TASK_RANK, FLUX_JOB_*), a Kubernetes
#     indexed Job (JOB_COMPLETION_INDEX), and Kubeflow v1's `--nnodes=$WORLD_SIZE --node_rank=$RANK` with the pod's
#     RANK/WORLD_SIZE still set: ranks by the scheduler's node order, fresh RANK/WORLD_SIZE in the workers, plan
#     names the source.
#  9. The secret in a spec file others can read: a warning naming the file; plan and plan --json print it as
#     (redacted).
#  8. IPv6 and one host: two agents in one namespace with --rdzv-endpoint [::1]:PORT: the first serves on ::1,
#     the second joins it (no "port reserved by another job"), ranks 0 and 1, MASTER_ADDR=::1.
# Root only (ip netns, unshare); skipped otherwise.
. "$DDP_SRCDIR/tests/integration/lib.sh"
. "$DDP_SRCDIR/tests/integration/lib_netns.sh"
command -v unshare >/dev/null || skip "unshare (util-linux) not installed"
have_torch || skip "no torch in $PY"
HOSTS=(node-c node-a node-b node-x)
netns_setup ddpir 10.232.0 ddpir0 4
export HOME=$TMP/home  # one token file for every "host", as a shared home directory would give
mkdir -p "$HOME"

cat >"$TMP/worker.py" <<'PYEOF'
import os, socket, sys, time
import torch
import torch.distributed as dist
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
steps = int(sys.argv[1] if attempt == 0 or len(sys.argv) < 3 else sys.argv[2])
idle = len(sys.argv) > 3 and sys.argv[3] == "idle" and attempt == 0
dist.init_process_group("gloo")
rank, w = dist.get_rank(), dist.get_world_size()
keys = ["RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "MASTER_ADDR",
        "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "DDPLAUNCH_JOB_SECRET"]
for step in range(steps):
    if idle and step > 0:
        time.sleep(0.1)
        continue
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    if step == 0:
        os.write(1, ("RANKINFO " + " ".join(f"{k}={os.environ.get(k, '-')}" for k in keys) +
                     f" HOST={socket.gethostname()} sum={t.item():g} want={w * (w + 1) / 2:g} pid={os.getpid()}\n").encode())
    time.sleep(0.1)
os.write(1, f"rank {rank} finished {steps} steps in attempt {attempt} sum={t.item():g}\n".encode())
PYEOF

# on_node I CMD...: CMD in node I's network namespace and a UTS namespace with its host name, in the background
on_node() {
    local i=$1
    shift
    ip netns exec "$(ns "$i")" unshare --uts sh -c 'hostname "$0"; exec "$@"' "${HOSTS[$i]}" \
        env GLOO_SOCKET_IFNAME=ddpir0 PYTHONUNBUFFERED=1 "$@" >"$TMP/n$i.out" 2>"$TMP/n$i.err" &
    pids[$i]=$!
}
wait_ok() { # wait_ok I...: every node's agent exits 0
    local i rc
    for i in "$@"; do
        wait "${pids[$i]}"
        rc=$?
        [ $rc = 0 ] || { cat "$TMP"/n*.out "$TMP"/n*.err; fail "node $i: ddplaunch exited with $rc"; }
    done
}
rankinfo() { cat "$TMP"/n*.out | grep -o 'RANKINFO.*'; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }

# 1. c10d, the same line on every node. Node 2 starts first: it must wait for the serving agent.
export DDPLAUNCH_JOB_SECRET=the-secret-of-job-one-0123
EP=10.232.0.1:29400
C10D=(--nnodes 3 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint $EP --rdzv-id job1)
for i in 2 1 0; do on_node $i "$DDP" "${C10D[@]}" "$TMP/worker.py" 5; sleep 0.2; done
wait_ok 0 1 2
unset DDPLAUNCH_JOB_SECRET
expect_eq "ranks" "$(rankinfo | field RANK | sort | tr '\n' ' ')" "0 1 2 "
# group ranks: the serving node (node-c) first, then node-a, node-b by name
for kv in "node-c 0" "node-a 1" "node-b 2"; do
    set -- $kv
    line=$(rankinfo | grep "HOST=$1 ")
    expect_eq "$1: RANK" "$(echo "$line" | field RANK)" "$2"
    expect_eq "$1: GROUP_RANK" "$(echo "$line" | field GROUP_RANK)" "$2"
    for kv2 in WORLD_SIZE=3 GROUP_WORLD_SIZE=3 MASTER_ADDR=10.232.0.1 DDPLAUNCH_JOB_SECRET=- "sum=6 want=6"; do
        [[ " $line " == *" $kv2 "* ]] || fail "$1: expected $kv2 in: $line"
    done
done
expect_eq "one MASTER_PORT" "$(rankinfo | field MASTER_PORT | sort -u | wc -l)" 1
[ "$(rankinfo | field MASTER_PORT | head -n 1)" != 29400 ] || fail "MASTER_PORT is the rendezvous port"
expect_grep "group rank 2 = node [12] \(node-b\): 1 worker, ranks 2-2 of 3" "$TMP/n0.err"
echo "c10d: 3 namespaces, one line, ranks by host name, one MASTER_PORT chosen by node 0, no secret in workers"

rm -f "$TMP"/n*.out "$TMP"/n*.err
# 2. Kubeflow's elastic PyTorchJob: PET_* only, 2 + 1 + 3 workers.
np=(2 1 3)
for i in 0 1 2; do
    on_node $i env PET_NNODES=1:3 PET_NPROC_PER_NODE=${np[$i]} PET_RDZV_BACKEND=c10d PET_RDZV_ENDPOINT=10.232.0.1:29401 \
        PET_RDZV_ID=kf-job PET_RDZV_CONF=join_timeout=60 "$DDP" "$TMP/worker.py" 3
done
wait_ok 0 1 2
expect_eq "ranks" "$(rankinfo | field RANK | sort -n | tr '\n' ' ')" "0 1 2 3 4 5 "
for i in 0 1 2; do
    n=$(grep -c RANKINFO "$TMP/n$i.out")
    expect_eq "node $i: workers" "$n" "${np[$i]}"
    expect_eq "node $i: LOCAL_WORLD_SIZE" "$(grep -o 'RANKINFO.*' "$TMP/n$i.out" | field LOCAL_WORLD_SIZE | sort -u)" "${np[$i]}"
    # its ranks are one block
    r=$(grep -o 'RANKINFO.*' "$TMP/n$i.out" | field RANK | sort -n)
    expect_eq "node $i: consecutive ranks" "$(( $(echo "$r" | tail -n 1) - $(echo "$r" | head -n 1) + 1 ))" "${np[$i]}"
done
[ "$(rankinfo | grep -c 'WORLD_SIZE=6 .*sum=21 want=21')" = 6 ] || { rankinfo; fail "world size 6 sums"; }
echo "PET_* only: nodes with 2, 1 and 3 workers form one job of 6"

rm -f "$TMP"/n*.out "$TMP"/n*.err
# 3. nnodes 2:3, node 2 late: attempt 0 on 2 nodes, attempt 1 (after a worker dies) on 3.
E3=(--nnodes 2:3 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 10.232.0.1:29402 --rdzv-conf join_timeout=2
    --max-restarts 1)
on_node 0 "$DDP" "${E3[@]}" "$TMP/worker.py" 600 5 idle
on_node 1 "$DDP" "${E3[@]}" "$TMP/worker.py" 600 5 idle
for _ in $(seq 1 240); do [ "$(cat "$TMP"/n*.out | grep -c RANKINFO)" = 2 ] && break; sleep 0.25; done
expect_eq "attempt 0 workers" "$(cat "$TMP"/n*.out | grep -c RANKINFO)" 2
on_node 2 "$DDP" "${E3[@]}" "$TMP/worker.py" 600 5 idle
for _ in $(seq 1 80); do grep -q "takes part from the next restart" "$TMP/n0.err" && break; sleep 0.25; done
expect_grep "node [12] joined from node-b .*takes part from the next restart" "$TMP/n0.err"
wpid=$(grep -o 'RANKINFO.*' "$TMP/n1.out" | field pid)
kill -KILL "$wpid"
wait_ok 0 1 2
expect_grep "attempt 1: group rank 2 = node" "$TMP/n0.err"
for i in 0 1 2; do expect_grep "finished 5 steps in attempt 1 sum=6" "$TMP/n$i.out"; done
expect_grep "RANKINFO .*WORLD_SIZE=2 .*TORCHELASTIC_RESTART_COUNT=0 " "$TMP/n0.out"
expect_grep "RANKINFO .*WORLD_SIZE=3 .*TORCHELASTIC_RESTART_COUNT=1 " "$TMP/n2.out"
echo "nnodes 2:3: node 2 arrived late, took part from attempt 1 (world 2 -> 3)"

rm -f "$TMP"/n*.out "$TMP"/n*.err
# 4. 70 idle connections from "node-x" (namespace 3) hold the rendezvous port before the real nodes join.
on_node 0 "$DDP" "${C10D[@]}" --nnodes 2 --rdzv-endpoint 10.232.0.1:29403 "$TMP/worker.py" 3
sleep 0.5
ip netns exec "$(ns 3)" $PY - <<'PYEOF' &
import socket, time
socks = []
for _ in range(70):
    try:
        socks.append(socket.create_connection(("10.232.0.1", 29403), timeout=2))
    except OSError:
        pass
time.sleep(20)
PYEOF
hostile=$!
sleep 1
t0=$(date +%s%N)
on_node 1 "$DDP" "${C10D[@]}" --nnodes 2 --rdzv-endpoint 10.232.0.1:29403 "$TMP/worker.py" 3
wait_ok 0 1
took=$((($(date +%s%N) - t0) / 1000000))
kill "$hostile" 2>/dev/null
wait "$hostile" 2>/dev/null
expect_eq "ranks" "$(rankinfo | field RANK | sort | tr '\n' ' ')" "0 1 "
warnings=$(grep -c 'coord:' "$TMP/n0.err")
[ "$warnings" -le 10 ] || fail "node 0 wrote $warnings warnings about the idle connections"
expect_grep "too many connections in their handshake" "$TMP/n0.err"
echo "70 idle connections: the job formed (node 1 done in ${took} ms), $warnings warning lines"

rm -f "$TMP"/n*.out "$TMP"/n*.err
# 5. Job X and job Y share the token file and run id "none", on the same nodes: Y's node is refused by X.
on_node 0 "$DDP" --nnodes 2 --rdzv-backend c10d --rdzv-endpoint 10.232.0.1:29404 "$TMP/worker.py" 3
on_node 2 "$DDP" --nnodes 2 --rdzv-backend c10d --rdzv-endpoint 10.232.0.1:29404 "$TMP/worker.py" 4
wait "${pids[2]}"
rc=$?
[ $rc = 1 ] || { cat "$TMP/n2.err"; fail "job Y's node exited with $rc, want 1"; }
expect_grep "cannot join node 0: .*authentication failed" "$TMP/n2.err"
grep -q RANKINFO "$TMP/n2.out" && fail "job Y's node ran a worker"
on_node 1 "$DDP" --nnodes 2 --rdzv-backend c10d --rdzv-endpoint 10.232.0.1:29404 "$TMP/worker.py" 3
wait_ok 0 1
expect_eq "job X ranks" "$(rankinfo | field RANK | sort | tr '\n' ' ')" "0 1 "
echo "two jobs sharing a secret: job Y's node refused by job X, job X ran with its own node"

rm -f "$TMP"/n*.out "$TMP"/n*.err
# 6. Static rendezvous, several nodes, no node rank: node 0, as torchrun (issue 23 item 2); a second agent on
#    node 0's host that is node 0 too: exit 2 with one line, nothing started; node 1 (--node-rank 1) joins node 0.
P6=29560
on_node 0 "$DDP" --nnodes 2 --master-addr 10.232.0.1 --master-port $P6 --set job.join_timeout=60s "$TMP/worker.py" 1
for _ in $(seq 200); do grep -q 'waiting up to' "$TMP/n0.err" && break; sleep 0.05; done
grep -q 'waiting up to' "$TMP/n0.err" || { cat "$TMP/n0.err"; fail "static without a node rank: not serving as node 0"; }
ip netns exec "$(ns 0)" "$DDP" --nnodes 2 --master-addr 10.232.0.1 --master-port $P6 "$TMP/worker.py" 1 \
    >"$TMP/s.out" 2>"$TMP/s.err"
rc=$?
expect_eq "second node 0: exit status" "$rc" 2
expect_eq "second node 0: stderr lines" "$(wc -l <"$TMP/s.err")" 1
expect_grep "node rank 0 is taken .*: start this node with --node-rank 1$" "$TMP/s.err"
[ -s "$TMP/s.out" ] && fail "the second node 0 ran something"
on_node 1 "$DDP" --nnodes 2 --node-rank 1 --master-addr 10.232.0.1 --master-port $P6 "$TMP/worker.py" 1
wait_ok 0 1
expect_eq "static, node 0 by default: ranks" "$(rankinfo | field RANK | sort | tr '\n' ' ')" "0 1 "
echo "static without a node rank: node 0 (torchrun's default); a second node 0: exit 2, one line"

# 7. Scheduler adapters.
adapter_case() { # adapter_case NAME PORT ENVFN [ddplaunch options]: ENVFN I prints node I's variables
    local name=$1 port=$2 envfn=$3 i
    shift 3
    rm -f "$TMP"/n*.out "$TMP"/n*.err
    for i in 0 1 2; do
        # shellcheck disable=SC2046
        on_node $i env $($envfn $i) "$DDP" --nproc-per-node 1 --master-port $port "$@" "$TMP/worker.py" 3
    done
    wait_ok 0 1 2
    for i in 0 1 2; do
        line=$(grep -o 'RANKINFO.*' "$TMP/n$i.out")
        for kv in "RANK=$i" "GROUP_RANK=$i" "WORLD_SIZE=3" "MASTER_ADDR=10.232.0.1" "sum=6 want=6"; do
            [[ " $line " == *" $kv "* ]] || fail "$name: node $i: expected $kv in: $line"
        done
    done
    ip netns exec "$(ns 1)" env $($envfn 1) "$DDP" plan --nproc-per-node 1 --master-port $port "$@" "$TMP/worker.py" \
        >"$TMP/plan.txt" 2>&1 || { cat "$TMP/plan.txt"; fail "$name: plan failed"; }
    expect_grep "this is node 1; node rank from: $name" "$TMP/plan.txt"
    echo "$name: 3 nodes from its variables, ranks 0-2, plan names it"
}
sky_env() { echo "SKYPILOT_NODE_RANK=$1 SKYPILOT_NUM_NODES=3 SKYPILOT_NUM_GPUS_PER_NODE=0"; }
mpi_env() { echo "OMPI_COMM_WORLD_RANK=$1 OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=1 PMIX_RANK=$1"; }
flux_env() { echo "FLUX_TASK_RANK=$1 FLUX_TASK_LOCAL_ID=0 FLUX_JOB_SIZE=3 FLUX_JOB_NNODES=3 FLUX_JOB_ID=f2x9"; }
k8s_env() { echo "JOB_COMPLETION_INDEX=$1 KUBERNETES_SERVICE_HOST=10.96.0.1"; }
SKYPILOT_NODE_IPS=$'10.232.0.1\n10.232.0.2\n10.232.0.3' adapter_case skypilot 29510 sky_env
adapter_case openmpi 29512 mpi_env --master-addr 10.232.0.1
adapter_case flux 29514 flux_env --master-addr 10.232.0.1
adapter_case kubernetes 29516 k8s_env --nnodes 3 --master-addr 10.232.0.1

# Kubeflow v1 PyTorchJob: the pod has MASTER_ADDR, MASTER_PORT, WORLD_SIZE (pods) and RANK (pod index); the
# container runs `ddplaunch --nnodes=$WORLD_SIZE --node_rank=$RANK ...`. The workers get their own values.
rm -f "$TMP"/n*.out "$TMP"/n*.err
for i in 0 1 2; do
    on_node $i env MASTER_ADDR=10.232.0.1 MASTER_PORT=29518 WORLD_SIZE=3 RANK=$i sh -c \
        'exec "$0" --nnodes=$WORLD_SIZE --node_rank=$RANK --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT --nproc-per-node 2 "$1" 3' \
        "$DDP" "$TMP/worker.py"
done
wait_ok 0 1 2
expect_eq "kubeflow v1: ranks" "$(rankinfo | field RANK | sort -n | tr '\n' ' ')" "0 1 2 3 4 5 "
[ "$(rankinfo | grep -c 'WORLD_SIZE=6 .*sum=21 want=21')" = 6 ] || { rankinfo; fail "kubeflow v1: world size 6"; }
echo "kubeflow v1: --nnodes=\$WORLD_SIZE --node_rank=\$RANK with the pod's RANK/WORLD_SIZE: 6 workers, fresh RANK/WORLD_SIZE"

# 8. IPv6 loopback, two agents on one host.
if ip netns exec "$(ns 0)" ip -6 addr show dev lo 2>/dev/null | grep -q '::1'; then
    for i in 0 1; do
        ip netns exec "$(ns 0)" "$DDP" --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint '[::1]:29520' \
            --no-python /bin/sh -c 'echo "V6 RANK=$RANK WORLD_SIZE=$WORLD_SIZE MASTER_ADDR=$MASTER_ADDR"' \
            >"$TMP/v$i.out" 2>"$TMP/v$i.err" &
        pids[$i]=$!
        sleep 0.3
    done
    for i in 0 1; do
        wait "${pids[$i]}" || { cat "$TMP"/v*.err; fail "IPv6: agent $i failed"; }
    done
    expect_eq "IPv6 ranks" "$(cat "$TMP"/v*.out | grep -o 'V6 RANK=[0-9]' | sort | tr '\n' ' ')" "V6 RANK=0 V6 RANK=1 "
    expect_eq "IPv6 MASTER_ADDR" "$(cat "$TMP"/v*.out | grep -c 'WORLD_SIZE=2 MASTER_ADDR=::1')" 2
    expect_grep "joining the rendezvous at ::1:29520" "$TMP/v1.err"
    echo "IPv6: two agents on one host met on [::1]:29520"
else
    echo "IPv6: no ::1 in the namespace, case skipped"
fi

# 9. A secret in a spec file others can read.
printf '[job]\nprogram = /bin/true\nnnodes = 2\nnode_rank = 1\nmaster_addr = 10.232.0.9\nmaster_port = 29530\njoin_timeout = 1s\nsecret = spec-file-secret-0123456789\n' >"$TMP/job.ini"
chmod 644 "$TMP/job.ini"
ip netns exec "$(ns 1)" "$DDP" "$TMP/job.ini" >"$TMP/w.out" 2>"$TMP/w.err"
expect_eq "exit status without node 0" "$?" 1
expect_grep "job.ini:8: \[job\] secret is in a file other users can read \(mode 644\)" "$TMP/w.err"
"$DDP" plan "$TMP/job.ini" >"$TMP/p.txt" 2>&1
"$DDP" plan --json "$TMP/job.ini" >"$TMP/p.json" 2>&1
grep -q "spec-file-secret" "$TMP/p.txt" "$TMP/p.json" && fail "plan printed the secret"
expect_grep "secret +=.*\(redacted\)" "$TMP/p.txt"
expect_grep '"job.secret": \{"value": "\(redacted\)"' "$TMP/p.json"
echo "secret in a readable spec file: warned; plan shows (redacted)"
exit 0
