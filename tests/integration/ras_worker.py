"""A stand-in for an NCCL job whose ranks hang where torch has no flight recorder, for the live watch's RAS query
(issue 38). Each rank writes its pid to $RAS_DIR/pid.RANK; rank 0 then answers on the port of its NCCL_RAS_ADDR
as NCCL 2.28.9's RAS thread does (tests/fixtures/ras/status-nccl-2.28.9.txt: "SERVER PROTOCOL 2", "OK" to SET
FORMAT json, then the JSON document), with one communicator of the job's ranks in which rank RAS_BEHIND has one
AllReduce fewer than the others. With RAS_TEXT=1 it answers as an NCCL before 2.28.7: an error to SET FORMAT json and
STATUS in text (the recorded text form: its communicators' table, no counts), and keeps the connection open. Every
rank then waits forever, printing nothing. With RAS_LISTEN=none no rank answers.

`ras_worker.py --foreign PORT WORLD` is no rank: a process outside the job (another user's) that listens on the
job's RAS port first and answers the same way, naming rank RAS_BEHIND (by the ranks' pids) as behind: a forgery
the launcher must not believe (issue 52 item 10)."""
import json, os, socket, sys, threading, time

foreign = len(sys.argv) > 1 and sys.argv[1] == "--foreign"
if foreign:
    rank, world = -1, int(sys.argv[3])
else:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
d = os.environ["RAS_DIR"]
if not foreign:
    with open(os.path.join(d, "pid.%d.tmp" % rank), "w") as f:
        f.write(str(os.getpid()))
    os.rename(os.path.join(d, "pid.%d.tmp" % rank), os.path.join(d, "pid.%d" % rank))


def status():
    ranks = []
    for r in range(world):
        while not os.path.exists(os.path.join(d, "pid.%d" % r)):
            time.sleep(0.05)
        pid = int(open(os.path.join(d, "pid.%d" % r)).read())
        counts = {"Broadcast": 1, "Reduce": 0, "AllGather": 0, "ReduceScatter": 0,
                  "AllReduce": 41 if r == int(os.environ.get("RAS_BEHIND", "1")) else 42}
        ranks.append({"rank": r, "host": "192.0.2.2", "pid": pid, "cuda_dev": r, "nvml_dev": r,
                      "status": {"init_state": 0, "async_error": 0, "finalize_called": False, "destroy_flag": False,
                                 "abort_flag": False}, "collective_counts": counts})
    return {"nccl_version": "2.28.9", "cuda_runtime_version": 13000, "cuda_driver_version": 13000,
            "timestamp": time.strftime("%Y-%m-%d %H:%M:%S"), "communicators_count": 1,
            "communicators": [{"hash": "0xe06ea772e6078d80", "secondary_hash": "0x1:0x2", "size": world,
                               "ranks_count": world, "missing_ranks_count": 0, "ranks": ranks, "missing_ranks": []}],
            "ras": {"collection_time_sec": 0.0, "timeouts_count": 0}}


def serve(conn):
    buf = b""
    while True:
        data = conn.recv(4096)
        if not data:
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            cmd = line.decode().strip().lower()
            if cmd.startswith("client protocol "):
                conn.sendall(b"SERVER PROTOCOL 2\n")
            elif cmd.startswith("set format ") and os.environ.get("RAS_TEXT") == "1":
                conn.sendall(b"ERROR Unknown command\n")
            elif cmd.startswith("set format "):
                conn.sendall(b"OK\n")
            elif cmd == "status" and os.environ.get("RAS_TEXT") == "1":
                conn.sendall(("NCCL version 2.26.2 compiled with CUDA 12.8\n\nCommunicators... (0.000s)\n"
                              "=============\n\n"
                              "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
                              "    #  in group  per comm  per node  per comm  in group\n"
                              "    0         1         1  %8d  %8d  %8d   RUNNING      OK\n\n"
                              "Errors\n======\n\nWarnings\n========\n\n" % (world, world, world)).encode())
            elif cmd == "status":
                text = json.dumps(status(), indent=2) + "\n"
                for i in range(0, len(text), 512):  # in pieces, as a socket may deliver it
                    conn.sendall(text[i:i + 512].encode())
                    time.sleep(0.01)


if foreign or (rank == 0 and os.environ.get("RAS_LISTEN") != "none"):
    port = int(sys.argv[2]) if foreign else int(os.environ["NCCL_RAS_ADDR"].rsplit(":", 1)[1])
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(4)
    if foreign:
        with open(os.path.join(d, "listening.tmp"), "w") as f:
            f.write(str(os.getpid()))
        os.rename(os.path.join(d, "listening.tmp"), os.path.join(d, "listening"))

    def accept():
        while True:
            c, _ = srv.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
while True:
    time.sleep(1)  # stuck: no output, no progress
