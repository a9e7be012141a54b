#!/usr/bin/env bash
# squat_env.sh CMD...: runs CMD (a test) in the network namespace it is started in (unshare -n, root: a private
# loopback, ports and abstract sockets), with the ephemeral range 40000-40199 and port_squat.py taking the odd
# ports of it (issue 34 item 15). Used by run-integration.sh when DDP_PORT_SQUAT=1, and by test 89.
set -eu
ip link set lo up
echo "40000 40199" >/proc/sys/net/ipv4/ip_local_port_range
ready=$(mktemp /tmp/ddpsquat.XXXXXX)
rm -f "$ready"
# not a job of this shell, which becomes the test's (exec below): the squatter ends when it ends
(/usr/bin/python3 "$(dirname "$0")/port_squat.py" 40000 40199 "$ready" $$ </dev/null >/dev/null 2>&1 &)
for _ in $(seq 200); do [ -s "$ready" ] && break; sleep 0.02; done
[ -s "$ready" ] || { echo "squat_env.sh: port_squat.py did not start"; exit 1; }
rm -f "$ready"
export DDP_PORT_SQUATTED=1
exec "$@"
