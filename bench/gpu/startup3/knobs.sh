#!/usr/bin/env bash
# knob experiment: which per-agent cost matters at 1024 agents on this host
set -u
B=.devrt/exp/ddplaunch
echo "== host: $(nproc) CPUs; $(uname -r)"; df -T /tmp /dev/shm /run/lock 2>&1 | sed 's/^/  /'
echo "unix sockets: $(wc -l </proc/net/unix)"; which perf; cat /proc/self/cgroup; grep -c . /proc/self/mountinfo
head -c 300 /proc/cpuinfo | grep -i "model name"; grep -m1 -o hypervisor /proc/cpuinfo
export DDP_ARGS='--set gpus.select=none'
for round in 1 2; do
  for v in base DDPX_NOSWEEP=1 DDPX_NOCG=1 DDPX_NOPS=1 DDPX_NORAS=1 "DDPX_NOSWEEP=1 DDPX_NOCG=1 DDPX_NOPS=1 DDPX_NORAS=1"; do
    e=$v; [ "$v" = base ] && e=
    echo -n "$round $v: "; env $e bash bench/scale.sh $B 1024 2>&1 | tail -1
  done
done
# the per-process floor: one exec of each
for b in /bin/true "$B --version"; do perf_t0=$(date +%s%N); for i in $(seq 200); do $b >/dev/null; done; echo "$b: $(( ($(date +%s%N)-perf_t0)/200000 )) us each"; done
