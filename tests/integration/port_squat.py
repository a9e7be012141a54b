#!/usr/bin/env python3
"""A busy neighbour for the port tests (issue 34 item 15): port_squat.py LO HI READY_FILE PID.

Meant for a private network namespace whose ephemeral range (net.ipv4.ip_local_port_range) is LO..HI
(squat_env.sh sets that up). Every 10 ms it binds (0.0.0.0, no SO_REUSEADDR) and listens on each odd port of
LO..HI that it does not hold, keeps each one 0.2-1 s, lets it go for 20 ms and takes it again: the odd ports,
which the kernel hands out first for bind(port 0), are nearly always taken, the few free ones are those just let
go, and a port that someone frees is taken within about 30 ms, as on a host full of short-lived servers. So a test that picks a port with bind(port 0), closes it and binds it
later fails with "Address already in use"; one that holds its port (port_hold.py) or lets the launcher bind port 0
does not. Even ports are left to outgoing connections (connect() takes even ports first). Ends with process PID
(the test's shell; not the squatter's parent, so that a test's plain `wait` does not wait for it).
"""
import os, random, select, socket, sys, time

lo, hi, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
shell = os.pidfd_open(int(sys.argv[4]))  # readable once that process has exited
held = {}  # port -> (socket, release time)
rest = {}  # port -> when it may be taken again
first = True
while True:
    now = time.monotonic()
    for p, (s, until) in list(held.items()):
        if now >= until:
            s.close()
            del held[p]
            rest[p] = now + 0.02
    for p in range(lo | 1, hi + 1, 2):
        if p in held or rest.get(p, 0) > now:
            continue
        s = socket.socket()
        try:
            s.bind(("0.0.0.0", p))
            s.listen(1)
        except OSError:
            s.close()
            continue
        held[p] = (s, now + random.uniform(0.2, 1.0))
    if first:
        open(ready, "w").write("%d\n" % len(held))
        first = False
    if select.select([shell], [], [], 0.01)[0]:
        break
