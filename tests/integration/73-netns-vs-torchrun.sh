#!/usr/bin/env bash
# Issue 17's "the c10d and elastic lines form the same job as torchrun": three network namespaces on a bridge
# (10.233.0.0/24 in a private "hub" namespace), each node in its own UTS and mount namespace with its own host
# name (node-c, node-a, node-b) and an /etc/hosts naming all three, as DNS would on a cluster (torchrun needs it:
# it finds out whether it hosts the store, and tells workers MASTER_ADDR, by host name). The SAME command line runs
# on every node, first under Debian's torchrun 1.13 (bench/torchrun.py), then under ddplaunch:
#  1. --nnodes 3 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint 10.233.0.1:PORT --rdzv_id ID
#  2. --nnodes 1:3 --nproc_per_node 1 ... --rdzv_conf join_timeout=60 (all three start together: both launchers
#     form the job with all three, torchrun within its last-call window, ddplaunch once MAX nodes joined).
# A gloo worker trains a small DDP model (seeded; each rank its own data) and prints its RANK, LOCAL_RANK,
# GROUP_RANK, the world/local/group/role sizes, its host and a checksum of the trained weights and of an
# all_reduce. Per form, both launchers must give the same (rank -> sizes, local rank, group rank, checksums) and
# consistent per-host blocks (each host one consecutive block, GROUP_RANK = block index). Which host gets which
# block is allowed to differ (torchrun sorts nodes by host name; ddplaunch puts the endpoint's host first, then
# the others by name): it is printed as information. Root only (ip netns, unshare); skipped otherwise.
. "$DDP_SRCDIR/tests/integration/lib.sh"
. "$DDP_SRCDIR/tests/integration/lib_netns.sh"
command -v unshare >/dev/null || skip "unshare (util-linux) not installed"
have_torch || skip "no torch in $PY"
HOSTS=(node-c node-a node-b)
netns_setup ddptr 10.233.0 ddptr0 3
printf '127.0.0.1 localhost\n' >"$TMP/hosts"
for i in $(seq 0 $((NODES - 1))); do
    printf '10.233.0.%d %s\n' $((i + 1)) "${HOSTS[$i]}" >>"$TMP/hosts"
done
export HOME=$TMP/home  # one token file for every "host", as a shared home directory would give
mkdir -p "$HOME"

cat >"$TMP/worker.py" <<'PYEOF'
import os, socket
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank, w = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(torch.nn.Linear(8, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(1000 + rank)
for _ in range(3):
    x, y = torch.randn(16, 8, generator=g), torch.randn(16, 4, generator=g)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
weights = sum(p.detach().double().sum().item() for p in model.parameters())
t = torch.tensor([float((rank + 1) ** 2)])
dist.all_reduce(t)
keys = ["RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE",
        "ROLE_WORLD_SIZE", "MASTER_ADDR"]
os.write(1, ("RANKINFO " + " ".join(f"{k}={os.environ.get(k, '-')}" for k in keys) +
             f" dist_rank={rank} dist_world={w} HOST={socket.gethostname()} weights={weights:.9g}"
             f" allreduce={t.item():g}\n").encode())
PYEOF

# on_node I CMD...: CMD in node I's network namespace, with its host name and /etc/hosts, in the background,
# stopped after 300 s at the latest (torchrun on a busy machine takes minutes)
on_node() {
    local i=$1
    shift
    timeout -k 5 300 ip netns exec "$(ns "$i")" unshare --uts --mount \
        sh -c 'hostname "$0" && mount --bind "$1" /etc/hosts && shift && exec "$@"' "${HOSTS[$i]}" "$TMP/hosts" \
        env GLOO_SOCKET_IFNAME=ddptr0 PYTHONUNBUFFERED=1 "$@" >"$TMP/n$i.out" 2>"$TMP/n$i.err" &
    pids[$i]=$!
}
# launch NAME PORT ARGS...: the same line on the three nodes (node 2 first, node 0 last), under torchrun
# (NAME tr-*) or ddplaunch (dd-*); each node's worker lines in $TMP/NAME.rankinfo
launch() {
    local name=$1 port=$2 i rc t0
    shift 2
    local -a cmd
    case $name in
    tr-*) cmd=("$PY" "$DDP_SRCDIR/bench/torchrun.py" --monitor_interval 0.1) ;;
    *) cmd=("$DDP") ;;
    esac
    rm -f "$TMP"/n*.out "$TMP"/n*.err
    t0=$(date +%s%N)
    for i in 2 1 0; do
        on_node $i env -u OMP_NUM_THREADS "${cmd[@]}" "$@" --rdzv_backend c10d --rdzv_endpoint "10.233.0.1:$port" \
            --rdzv_id "job-$name" "$TMP/worker.py"
        sleep 0.2
    done
    for i in 0 1 2; do
        wait "${pids[$i]}"
        rc=$?
        [ $rc = 0 ] || { tail -n 30 "$TMP"/n*.out "$TMP"/n*.err; fail "$name: node $i exited with $rc"; }
    done
    cat "$TMP"/n*.out | grep -o 'RANKINFO.*' >"$TMP/$name.rankinfo"
    echo "$name: $(wc -l <"$TMP/$name.rankinfo") workers on 3 nodes in $((($(date +%s%N) - t0) / 1000000)) ms"
}

# compare FORM NPROC: torchrun's and ddplaunch's runs of FORM formed the same job
compare() {
    $PY - "$TMP/tr-$1.rankinfo" "$TMP/dd-$1.rankinfo" "$2" "${HOSTS[@]}" <<'PYEOF' || fail "$1: the jobs differ (see above)"
import sys
nproc, hosts = int(sys.argv[3]), sys.argv[4:]
world = nproc * len(hosts)
bad = []
jobs = {}
for name, path in (("torchrun", sys.argv[1]), ("ddplaunch", sys.argv[2])):
    ranks = {}
    for line in open(path):
        d = dict(kv.split("=", 1) for kv in line.split()[1:])
        ranks[int(d["RANK"])] = d
    if sorted(ranks) != list(range(world)):
        bad.append(f"{name}: ranks {sorted(ranks)}, want 0-{world - 1}")
        continue
    blocks = {}
    for r, d in ranks.items():
        if int(d["dist_rank"]) != r or int(d["dist_world"]) != world:
            bad.append(f"{name}: rank {r}: process group says rank {d['dist_rank']} of {d['dist_world']}")
        for k, v in (("WORLD_SIZE", world), ("GROUP_WORLD_SIZE", len(hosts)), ("LOCAL_WORLD_SIZE", nproc),
                     ("ROLE_WORLD_SIZE", world), ("ROLE_RANK", r)):
            if d[k] != str(v):
                bad.append(f"{name}: rank {r}: {k}={d[k]}, want {v}")
        blocks.setdefault(d["HOST"], []).append(r)
    if sorted(blocks) != sorted(hosts):
        bad.append(f"{name}: workers on hosts {sorted(blocks)}, want {sorted(hosts)}")
    order = []
    for host, rs in blocks.items():
        rs.sort()
        g = {ranks[r]["GROUP_RANK"] for r in rs}
        if len(rs) != nproc or rs != list(range(rs[0], rs[0] + nproc)) or g != {str(rs[0] // nproc)}:
            bad.append(f"{name}: {host}: ranks {rs} group ranks {sorted(g)}: not one block of {nproc}")
        for r in rs:
            if ranks[r]["LOCAL_RANK"] != str(r - rs[0]):
                bad.append(f"{name}: rank {r} on {host}: LOCAL_RANK={ranks[r]['LOCAL_RANK']}, want {r - rs[0]}")
        order.append((rs[0], host))
    if len({(d["weights"], d["allreduce"]) for d in ranks.values()}) != 1:
        bad.append(f"{name}: the ranks end with different checksums (DDP out of step)")
    jobs[name] = ranks
    addrs = sorted({d["MASTER_ADDR"] for d in ranks.values()})
    print(f"  {name}: group ranks by host: {' '.join(f'{h}={r // nproc}' for r, h in sorted(order))};"
          f" MASTER_ADDR {','.join(addrs)}")
if len(jobs) == 2:
    same = ("WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_RANK",
            "ROLE_WORLD_SIZE", "weights", "allreduce")
    for r in range(world):
        a, b = jobs["torchrun"][r], jobs["ddplaunch"][r]
        for k in same:
            if a[k] != b[k]:
                bad.append(f"rank {r}: {k}: torchrun {a[k]}, ddplaunch {b[k]}")
    sums = sorted({(d["weights"], d["allreduce"]) for d in jobs["torchrun"].values()})
    print(f"  both: world {world}, ranks 0-{world - 1}, per rank the same {', '.join(same)};"
          f" checksums (weights, all_reduce) {sums}")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PYEOF
}

# 1. c10d, 3 nodes x 2 workers, the same line on every node.
launch tr-c10d 29431 --nnodes 3 --nproc_per_node 2
launch dd-c10d 29432 --nnodes 3 --nproc_per_node 2
compare c10d 2
echo "c10d --nnodes 3 --nproc_per_node 2: the same job under torchrun and ddplaunch"

# 2. Elastic 1:3, all three nodes start together.
launch tr-elastic 29433 --nnodes 1:3 --nproc_per_node 1 --rdzv_conf join_timeout=60
launch dd-elastic 29434 --nnodes 1:3 --nproc_per_node 1 --rdzv_conf join_timeout=60
compare elastic 1
echo "elastic --nnodes 1:3: the same job of 3 nodes under torchrun and ddplaunch"
exit 0
