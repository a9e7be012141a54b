# ddplaunch's standby interpreter (ddplaunch(1), WARM RESTART). Built into the ddplaunch binary (run/standby.c)
# and handed to "python -c" on descriptor 4, a socket to the launcher; never read from disk at run time.
#
# It imports the preload list (argv[1], comma-separated; argv[2]: the sampler signal to block there, or 0) in a
# helper thread at nice 19 (its IO priority follows: best-effort 7), so that a running attempt keeps the CPU and
# the disk, and with descriptors 1 and 2 on /dev/null, so that nothing an import prints reaches the next attempt's
# output. A module of the list that is not installed is skipped (said in "ready"); one that fails to import makes
# the standby unfit. Threads an import starts (torch 2.11 starts one) inherit that thread's signal mask and nice;
# at "go" they are set back to nice 0 where the user may (root, CAP_SYS_NICE, RLIMIT_NICE). It then says
# "ready PID RSS_KIB SKIPPED" (SKIPPED: the modules not installed, comma-separated, or "-") and waits.
# It initialises no CUDA, creates no process group, keeps no thread and reads no rank variable: it is started with
# the job's environment less the per-rank and per-attempt variables (standby.c). Before the preload and after each
# module it checks that CUDA's driver was not initialised in the process (a /dev/nvidia* descriptor open: cuInit
# opens the driver's devices and reads CUDA_VISIBLE_DEVICES once, before the rank's is set; libcuda merely mapped
# is no sign: torch 2.11's `import torch` maps it and opens nothing); if it was, it says "cuda MODULE WHAT" ("-":
# before the first) instead of "ready" and exits, and the launcher turns warm restart off for the job.
#
# "Go" is one message: 8 decimal digits of length, then NUL-separated fields: cwd, mode ("s" script, "m" module),
# target, the launcher's sitecustomize.py path or "", argc, the program's arguments (after the target), envc,
# NAME=VALUE..., origc, the worker's whole argv (sys.orig_argv). It then becomes the worker that python would have
# started: cwd, os.environ, sys.argv, sys.path[0], sys.orig_argv, a clean __main__, and runs the program as
# "python SCRIPT" (compile and exec in __main__, __file__ absolute) or "python -m MODULE" (runpy) would.
# End of the connection before "go": the launcher dropped it; exit 0.


def _ddplaunch_standby(main0):
    import os
    import sys
    import _thread
    __import__("threading")  # in the main thread, so that threading's main thread is this one (torch imports it)

    ctl = 4
    preload = [m.strip() for m in (sys.argv[1] if len(sys.argv) > 1 else "").split(",") if m.strip()]
    block = int(sys.argv[2]) if len(sys.argv) > 2 else 0  # the stack sampler's signal, 0 without sampling
    failed = []
    cuda = []
    missing = []
    done = _thread.allocate_lock()
    done.acquire()

    def cuda_held(m):
        # CUDA's driver initialised in this process: GPU device files open (cuInit opens them and reads
        # CUDA_VISIBLE_DEVICES once, and this process has not the rank's yet). Said as "cuda MODULE WHAT" ("-":
        # before the preload).
        devs = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                link = os.readlink("/proc/self/fd/" + fd)
            except OSError:
                continue
            if link.startswith("/dev/nvidia"):
                devs.append(link)
        what = ["%s open" % ", ".join(sorted(set(devs)))] if devs else []
        if what and not cuda:
            cuda.append("cuda %s %s" % (m or "-", "; ".join(what)))
        return bool(what)

    def load():
        try:
            os.setpriority(os.PRIO_PROCESS, _thread.get_native_id(), 19)
        except OSError:
            pass
        try:
            if block:  # a thread an import starts gets this mask, as under a fresh worker's sitecustomize
                import signal

                signal.pthread_sigmask(signal.SIG_BLOCK, {block})
            for m in [""] + preload:  # "": before the first (a sitecustomize, LD_PRELOAD)
                try:
                    if m:
                        __import__(m)
                except ModuleNotFoundError as e:  # not installed (torch._dynamo before torch 2.0): skipped, said
                    if e.name is None or not (m == e.name or m.startswith(e.name + ".")):
                        raise  # a module m imports is missing: m cannot be imported
                    missing.append(m)
                if cuda_held(m):
                    break
        except BaseException as e:  # noqa: B902 - whatever it was, the standby is unfit
            failed.append("%s: %s" % (type(e).__name__, e))
        finally:
            done.release()

    null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    saved = (os.dup(1), os.dup(2))
    os.dup2(null, 1)
    os.dup2(null, 2)
    _thread.start_new_thread(load, ())
    done.acquire()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)
    for fd in saved + (null,):
        os.close(fd)
    if failed or cuda:
        said = cuda[0] if cuda else "unfit %s" % failed[0]
        os.write(ctl, ("%s\n" % said.replace("\n", " ")[:300]).encode("utf-8", "replace"))
        os._exit(0)
    with open("/proc/self/status", "rb") as f:
        rss = [ln.split()[1] for ln in f.read().splitlines() if ln.startswith(b"VmRSS:")]
    os.write(ctl, b"ready %d %s %s\n" % (os.getpid(), rss[0] if rss else b"0", ",".join(missing).encode() or b"-"))

    data = b""
    want = 8
    while len(data) < want:
        chunk = os.read(ctl, 1 << 16)
        if not chunk:
            os._exit(0)
        data += chunk
        if want == 8 and len(data) >= 8:
            want = 8 + int(data[:8])
    f = data[8:want].split(b"\0")
    os.close(ctl)
    cwd, mode, target, site = f[0], f[1], os.fsdecode(f[2]), os.fsdecode(f[3])
    n = int(f[4])
    args = [os.fsdecode(a) for a in f[5 : 5 + n]]
    i = 5 + n
    env = f[i + 1 : i + 1 + int(f[i])]
    i += 1 + int(f[i])
    orig = [os.fsdecode(a) for a in f[i + 1 : i + 1 + int(f[i])]]

    os.chdir(cwd)
    os.environ.clear()
    for e in env:
        k, _, v = e.partition(b"=")
        os.environ[os.fsdecode(k)] = os.fsdecode(v)
    for tid in os.listdir("/proc/self/task"):  # threads an import started inherited nice 19: back, where allowed
        try:
            if int(tid) != os.getpid():
                os.setpriority(os.PRIO_PROCESS, int(tid), 0)
        except OSError:
            pass
    if site:  # what the launcher's sitecustomize does at a fresh interpreter's start, with this rank's variables
        ns = {"__name__": "_ddplaunch_site", "__file__": site}
        with open(site, "rb") as fh:
            exec(compile(fh.read(), site, "exec"), ns)
        ns["_ddplaunch_register"]()
        ns["_ddplaunch_pythonpath"](os.path.dirname(os.path.abspath(site)))
    sys.orig_argv[:] = orig

    main = sys.modules["__main__"].__dict__
    main.clear()
    main.update(main0)
    if mode == b"m":
        import runpy

        sys.argv[:] = ["-m"] + args
        sys.path[0] = os.getcwd()
        run = (runpy._run_module_as_main, (target, True))
    else:
        full = target if target.startswith("/") else os.getcwd() + "/" + target  # as python's own (not normalised)
        sys.argv[:] = [target] + args
        sys.path[0] = os.path.dirname(os.path.realpath(target))
        main["__file__"] = full
        main["__cached__"] = None
        from importlib.machinery import SourceFileLoader

        main["__loader__"] = SourceFileLoader("__main__", full)
        with open(target, "rb") as fh:
            code = compile(fh.read(), full, "exec", dont_inherit=True)
        run = (exec, (code, main))
    del f, data, env, args, orig
    try:
        run[0](*run[1])
    except SystemExit:
        raise
    except BaseException:
        t, e, tb = sys.exc_info()
        sys.excepthook(t, e, tb.tb_next)  # the traceback python prints, without this frame
        if isinstance(e, KeyboardInterrupt):  # python ends by SIGINT then (3.8+)
            import signal

            signal.signal(signal.SIGINT, signal.SIG_DFL)
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGINT)
        sys.exit(1)


_ddplaunch_standby({k: v for k, v in globals().items() if not k.startswith("_ddplaunch")})
