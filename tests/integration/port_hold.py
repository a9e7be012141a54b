#!/usr/bin/env python3
"""Hold TCP ports for a test until the test's shell ends (issue 34 item 15): port_hold.py FILE PID N [LO-HI].

Binds N consecutive ports P..P+N-1 on 0.0.0.0 and, where the host has IPv6, on [::] (IPV6_V6ONLY), writes P to
FILE once all are held, and keeps them until process PID (the test's shell) exits. Without LO-HI the kernel picks
P (bind to port 0, from the ephemeral range); with it, P is tried at random in LO..HI-N+1.

Why this is race-free, where "bind port 0, print the port, close, hope it stays free" is not:
- each port is bound without SO_REUSEADDR first, so the bind fails if any socket has the port (any state, any
  address of that family): nobody else is using it when it is taken;
- while a socket is bound to a port (even one that never listens), the kernel never hands that port to another
  socket's bind(port 0) or to an outgoing connect(): no other program can take it in between;
- SO_REUSEADDR is then set on the held sockets, which never listen: a program that binds with SO_REUSEADDR
  (torch's TCPStore, ddplaunch's probe, coordinator and control listener, the tests' python listeners) binds and
  listens on the held port as if it were free. Linux allows that bind when both sockets set SO_REUSEADDR and the
  one already bound is not listening; listen() then succeeds as long as nobody else listens there.
"""
import os, random, select, socket, sys

def bind_exclusive(port):
    """Sockets bound to port on every family here, or None when the port is not free (all closed then)."""
    held = []
    fams = [(socket.AF_INET, "0.0.0.0")] + ([(socket.AF_INET6, "::")] if socket.has_ipv6 else [])
    for fam, addr in fams:
        try:
            s = socket.socket(fam, socket.SOCK_STREAM)
        except OSError:
            continue  # no IPv6 on this host
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            s.bind((addr, port))
        except OSError:
            s.close()
            for h in held:
                h.close()
            return None
        held.append(s)
    return held

def bind_exclusive_v6(port):
    """[::]:port (IPV6_V6ONLY) as a list of one socket, [] without IPv6 here, None when someone has it."""
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        return []
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    try:
        s.bind(("::", port))
    except OSError:
        s.close()
        return None
    return [s]

def main():
    path, n = sys.argv[1], int(sys.argv[3])
    lo, hi = (int(x) for x in sys.argv[4].split("-")) if len(sys.argv) > 4 else (0, 0)
    shell = os.pidfd_open(int(sys.argv[2]))  # readable once the test's shell has exited
    for _ in range(1000):
        if lo:
            first = random.randint(lo, hi - n + 1)
            held = bind_exclusive(first)
        else:
            s = socket.socket()
            s.bind(("0.0.0.0", 0))  # the kernel picks a port nobody has, and this socket keeps it
            first = s.getsockname()[1]
            held = None
            if first + n - 1 <= 65535 and socket.has_ipv6:
                six = bind_exclusive_v6(first)
                held = [s] + six if six is not None else None
            elif first + n - 1 <= 65535:
                held = [s]
            if held is None:
                s.close()
        if held is None:
            select.select([], [], [], 0.01)
            continue
        for p in range(first + 1, first + n):
            more = bind_exclusive(p)
            if more is None:
                break
            held += more
        else:
            for h in held:
                h.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with open(path + ".tmp", "w") as f:
                f.write("%d\n" % first)
            os.rename(path + ".tmp", path)
            select.select([shell], [], [])
            return 0
        for h in held:
            h.close()
        select.select([], [], [], 0.01)  # others' ports change: try again a little later (10 s in all)
    print("port_hold.py: no %d free consecutive ports found" % n, file=sys.stderr)
    return 1

sys.exit(main())
