"""What one live stack sample costs a rank (issue 22): run under ddplaunch, which loads its sitecustomize.
   ddplaunch --nproc-per-node 1 bench/sample-cost.py [THREADS] [DEPTH] [SAMPLES]
The rank signals itself (as ddplaunch does: SIGRTMIN+5 to its pid, the file emptied down to its header first) and times each sample from the signal to the
dump's last byte in its stacks file: the sampling thread's wake-up, taking the GIL, formatting every thread's
stack and one write. Prints median, p99 and max in ms, with THREADS idle Python threads and the main thread
DEPTH frames deep (defaults 10 and 50, 200 samples). Fails when ddplaunch's sitecustomize did not register."""
import os, signal, sys, threading, time

# the stacks file ddplaunch's sitecustomize registered in: attempt dir/stacks.LOCAL_RANK (the attempt dir is
# where ddplaunch puts torch's flight-recorder FIFO)
pipe = os.environ.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "")
path = os.path.join(os.path.dirname(pipe), "stacks." + os.environ.get("LOCAL_RANK", "0")) if pipe else None
if not path or not os.path.exists(path) or not any(t.name == "ddplaunch-stacks" for t in threading.enumerate()):
    sys.exit("ddplaunch's sitecustomize did not register (run under ddplaunch with [timeout] sample = yes)")
HEAD = 93  # the registration line (DDP_SAMPLE_HEAD_LEN); each dump is written after it
nthreads, depth, nsamples = (int(a) for a in (sys.argv[1:] + ["10", "50", "200"][len(sys.argv) - 1:])[:3])
sig = signal.SIGRTMIN + 5
stop = threading.Event()
for _ in range(nthreads):
    threading.Thread(target=stop.wait, daemon=True).start()


def deep(n):
    if n:
        return deep(n - 1)
    took = []
    for _ in range(nsamples):
        os.truncate(path, HEAD)
        t0 = time.perf_counter()
        os.kill(os.getpid(), sig)
        while os.stat(path).st_size <= HEAD:
            time.sleep(0.0001)
        took.append(time.perf_counter() - t0)
        time.sleep(0.005)
    return sorted(took)


t = deep(depth)
print("sample cost, %d threads, main thread %d frames deep, %d samples: median %.2f ms, p99 %.2f ms, max %.2f ms"
      % (nthreads + 1, depth, nsamples, 1e3 * t[len(t) // 2], 1e3 * t[int(len(t) * 0.99) - 1], 1e3 * t[-1]))
