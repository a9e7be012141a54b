#!/bin/sh
# hold_gpu.sh DIR: a worker that writes its GPU's bus id to DIR/gpu.RANK and MASTER_PORT to DIR/port.RANK, then
# stays until DIR/stop appears (or 60 s pass). For the lease tests (52, 53).
echo "$MASTER_PORT" >"$1/port.$RANK"
echo "$DDPLAUNCH_GPU_BUSID" >"$1/gpu.$RANK"
i=0
while [ ! -e "$1/stop" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
