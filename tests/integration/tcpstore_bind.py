#!/usr/bin/python3
"""A 2+-rank worker that uses MASTER_PORT the way torch's TCPStore does, without torch (starts in ~30 ms).

Rank 0 binds MASTER_PORT on the wildcard address (IPv6 dual-stack first, then IPv4, SO_REUSEADDR, as
c10d's socket.cpp does), listens, and sends its run id to every rank that connects. The other ranks connect
to MASTER_ADDR:MASTER_PORT (retrying for up to 30 s, like a TCPStore client) and check that the run id they
receive is their own: a job that reached another job's rank 0 fails instead of silently joining it.
Rank 0 keeps the port for HOLD seconds (argv[2], default 1.0) so that concurrent jobs overlap.
Rank 0 writes "PORT <port> <unix time when listening>" to the file argv[1] when given.
Under torchrun (TORCHELASTIC_USE_AGENT_STORE=True) the agent itself serves the store on MASTER_PORT; then the
workers only check that it listens (a second torchrun on the same port fails in its agent, before any worker). Exit 0 on success, 1 on any failure.
"""
import errno
import os
import socket
import sys
import time


def say(msg):
    os.write(1, (msg + "\n").encode())  # one write per line


def serve(port, world, run_id, hold, out):
    s = None
    for fam in (socket.AF_INET6, socket.AF_INET):
        try:
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if fam == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                s.bind(("::", port))
            else:
                s.bind(("0.0.0.0", port))
            s.listen(64)
            break
        except OSError as e:
            s.close()
            s = None
            if e.errno == errno.EADDRINUSE:
                say("EADDRINUSE: rank 0 could not bind MASTER_PORT %d" % port)
                return 1
    if s is None:
        say("rank 0: no address family could bind %d" % port)
        return 1
    if out:
        with open(out, "w") as f:
            f.write("PORT %d %.6f\n" % (port, time.time()))  # bound and listening at this time
    s.settimeout(30)
    for _ in range(world - 1):
        c, _ = s.accept()
        c.sendall(run_id.encode() + b"\n")
        c.close()
    time.sleep(hold)
    s.close()
    return 0


def join(addr, port, run_id):
    deadline = time.time() + 30
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                say("rank %s: could not reach rank 0 at %s:%d" % (os.environ["RANK"], addr, port))
                return 1
            time.sleep(0.05)
    got = c.makefile().readline().strip()
    c.close()
    if got != run_id:
        say("CROSSTALK: rank %s joined run '%s' instead of its own '%s'" % (os.environ["RANK"], got, run_id))
        return 1
    return 0


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    port = int(os.environ["MASTER_PORT"])
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "") + "/" + os.environ.get("JOB_TOKEN", "")
    out = sys.argv[1] if len(sys.argv) > 1 else ""
    hold = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        # torchrun's agent already listens on MASTER_PORT as the job's TCPStore (its bind is the allocation):
        # check that it is there, and report when the workers saw it.
        try:
            socket.create_connection((addr, port), timeout=5).close()
        except OSError as e:
            say("rank %d: nothing listens on MASTER_PORT %d: %s" % (rank, port, e))
            return 1
        if rank == 0 and out:
            with open(out, "w") as f:
                f.write("PORT %d %.6f\n" % (port, time.time()))
        time.sleep(hold)
        return 0
    if rank == 0:
        return serve(port, world, run_id, hold, out)
    return join(addr, port, run_id)


if __name__ == "__main__":
    sys.exit(main())
