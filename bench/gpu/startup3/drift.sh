#!/usr/bin/env bash
# why 1024-agent starts drift slower run after run: TIME_WAIT sockets? leftover cgroups?
set -u
export DDP_ARGS='--set gpus.select=none'
cgb=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
state() { echo "   TW=$(ss -tan state time-wait 2>/dev/null | tail -n +2 | wc -l) cg_left=$(ls "$cgb" 2>/dev/null | grep -c ddplaunch-) range=$(cat /proc/sys/net/ipv4/ip_local_port_range | tr '\t' -) tw_reuse=$(cat /proc/sys/net/ipv4/tcp_tw_reuse)"; }
state
for i in 1 2 3 4; do echo -n "run $i main: "; bash bench/scale.sh .devrt/main/ddplaunch 1024 2>&1 | tail -1; state; done
echo "sleeping 62 s for TIME_WAIT to expire"; sleep 62; state
echo -n "after: main "; bash bench/scale.sh .devrt/main/ddplaunch 1024 2>&1 | tail -1; state
echo "== A/B after the drift check, interleaved (cand = clone3, RAS, gates, cgroup ready before START)"
for round in 1 2 3; do for b in main cand; do echo -n "$round $b: "; bash bench/scale.sh .devrt/$b/ddplaunch 1024 2>&1 | tail -1; done; done
state
