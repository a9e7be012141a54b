"""A worker that fails in one way, for the failure-class test (77, issue 43): class_worker.py KIND.
Each way is the real one where this host can produce it (the argparse error, the import, the signal, torch's own
gloo timeout, TCPStore's failed bind and connect); cuda-oom, which needs a GPU, raises torch's own exception."""
import os, signal, socket, sys, time

kind = sys.argv[1]
rank = int(os.environ.get("RANK", "0"))


def torch_pg(timeout_s):
    import datetime
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))
    return dist


if kind == "usage":  # argparse's usage error: exit 2
    import argparse

    argparse.ArgumentParser().add_argument("--steps", required=True)
    argparse.ArgumentParser().parse_args(["--steps"])
elif kind == "segv":
    import ctypes

    ctypes.string_at(0)
elif kind == "abort":
    os.abort()
elif kind == "usr1":
    os.kill(os.getpid(), signal.SIGUSR1)
elif kind == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
elif kind == "oom":  # in a memory cgroup smaller than this: the kernel's OOM killer
    x = b"\1" * (512 << 20)
elif kind == "silent":  # no output, no heartbeat
    time.sleep(120)
elif kind == "collective":  # rank 1 stays out of the all_reduce; gloo's timeout ends rank 0
    dist = torch_pg(2)
    import torch

    if rank == 1:
        time.sleep(120)
    dist.all_reduce(torch.ones(1))
elif kind == "rendezvous":  # a TCP store client whose server never comes
    import datetime
    import torch.distributed as dist

    s = socket.socket()
    s.bind(("127.0.0.1", 0))  # bound, never listening: nobody else gets the port, every connect is refused
    dist.TCPStore("127.0.0.1", s.getsockname()[1], 2, False, datetime.timedelta(seconds=2))  # port held: s stays bound
elif kind == "port":  # the store's port is taken by a listener
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    import datetime
    import torch.distributed as dist

    dist.TCPStore("127.0.0.1", s.getsockname()[1], 1, True, datetime.timedelta(seconds=5))  # port held: s listens
elif kind == "peer-exits":  # rank 1 ends well (exit 0) while rank 0 still talks to it
    dist = torch_pg(30)
    import torch

    dist.barrier()
    if rank == 1:
        os._exit(0)
    time.sleep(0.5)
    dist.all_reduce(torch.ones(1))
elif kind == "cuda-oom":
    import torch

    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; stand-in)")
elif kind == "cpu-oom":  # torch's CPU allocator refuses (the real message, no memory used)
    import torch

    torch.empty(10**15, dtype=torch.uint8)
elif kind == "local-rank":  # an old torch.distributed.launch script: argparse requires --local_rank
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--local_rank", type=int, required=True)
    p.parse_args(sys.argv[2:])
sys.exit(f"class_worker.py: unknown kind {kind}")
