# ddplaunch's standby interpreter (ddplaunch(1), WARM RESTART). Built into the ddplaunch binary (run/standby.c)
# and handed to "python -c" on descriptor 4, a socket to the launcher; never read from disk at run time.
#
# Isolation: "-c" put the working directory first on sys.path (""), where another user may write (a shared 1777
# directory): it is taken out before anything is imported, so the preload finds what a fresh "python SCRIPT" would
# (PYTHONSAFEPATH: python put nothing there). The program's own sitecustomize and usercustomize do not run here:
# the launcher's sitecustomize (first on PYTHONPATH, DDPLAUNCH_STANDBY set) holds them back, and they run at "go",
# with the rank's environment, as site would have run them at a fresh interpreter's start.
#
# It imports the preload list (argv[1], comma-separated; argv[2]: the sampler signal to block there, or 0) in a
# helper thread at nice 19 (its IO priority follows: best-effort 7), so that a running attempt keeps the CPU and
# the disk, and with descriptors 1 and 2 on /dev/null, so that nothing an import prints reaches the next attempt's
# output. A module of the list that is not installed is skipped (said in "ready"); one that fails to import makes
# the standby unfit. Threads an import starts (torch 2.11 starts one) inherit that thread's signal mask and nice;
# at "go" they are set back to nice 0 where the user may (root, CAP_SYS_NICE, RLIMIT_NICE). It then says
# "ready PID RSS_KIB SKIPPED" (SKIPPED: the modules not installed, comma-separated, or "-") and waits. The launcher
# believes the PID only where it is the one its shim started (standby.c).
# It initialises no CUDA, creates no process group, keeps no thread and reads no rank variable: it is started with
# the job's environment less the per-rank and per-attempt variables (standby.c). Before the preload and after each
# module it checks that CUDA's driver was not initialised in the process (a /dev/nvidia* descriptor open: cuInit
# opens the driver's devices and reads CUDA_VISIBLE_DEVICES once, before the rank's is set; libcuda merely mapped
# is no sign: torch 2.11's `import torch` maps it and opens nothing); if it was, it says "cuda MODULE WHAT" ("-":
# before the first) instead of "ready" and exits, and the launcher turns warm restart off for the job.
#
# "Go" is one message: 8 decimal digits of length, then NUL-separated fields: cwd (absolute), mode ("s" script,
# "m" module), target, "1" where the workers sample stacks (the launcher's sitecustomize registers then) else "",
# argc, the program's arguments (after the target), envc, NAME=VALUE..., origc, the worker's whole argv
# (sys.orig_argv, where this Python has it). It then becomes the worker that python would have started: cwd,
# os.environ, sys.argv, sys.path (path0 in front of what the preload left), sys.orig_argv, the site hooks, a clean
# __main__, and runs the program as "python SCRIPT" (compile and exec in __main__, __file__ absolute) or
# "python -m MODULE" (runpy) would. A zipapp, a directory or a .pyc is never sent here (standby.c starts it cold).
# End of the connection before "go": the launcher dropped it; exit 0.


def _ddplaunch_standby(main0):
    import os
    import sys
    import _thread

    if not getattr(sys.flags, "safe_path", False):  # before any import: "-c" put the working directory first
        del sys.path[0]
    held = sys.modules.get("sitecustomize")  # the launcher's, holding the program's site hooks back
    if not getattr(held, "_ddplaunch_held", False):
        os.write(4, b"unfit the launcher's sitecustomize did not load (a sitecustomize would run too early)\n")
        os._exit(0)
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

    def native_id():  # threading.get_native_id is Python 3.8+
        f = getattr(_thread, "get_native_id", None)
        return f() if f else int(os.readlink("/proc/thread-self").rsplit("/", 1)[1])

    def load():
        try:
            os.setpriority(os.PRIO_PROCESS, native_id(), 19)
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
    cwd, mode, target, sampling = f[0], f[1], os.fsdecode(f[2]), f[3] == b"1"
    n = int(f[4])
    args = [os.fsdecode(a) for a in f[5 : 5 + n]]
    i = 5 + n
    env = f[i + 1 : i + 1 + int(f[i])]
    i += 1 + int(f[i])
    orig = [os.fsdecode(a) for a in f[i + 1 : i + 1 + int(f[i])]]

    os.chdir(cwd)
    for k in list(os.environ):  # an entry with an empty name (execve takes "=x") cannot be unset: it stays, as
        if k:  # it came with the job's environment to both
            del os.environ[k]
    for e in env:
        k, _, v = e.partition(b"=")
        if k:
            os.environ[os.fsdecode(k)] = os.fsdecode(v)
    for tid in os.listdir("/proc/self/task"):  # threads an import started inherited nice 19: back, where allowed
        try:
            if int(tid) != os.getpid():
                os.setpriority(os.PRIO_PROCESS, int(tid), 0)
        except OSError:
            pass
    argv = (["-m"] if mode == b"m" else [target]) + args  # as python 3.7+ sets it before site runs (3.6: after)
    if sys.version_info >= (3, 7):
        sys.argv[:] = argv
    else:
        del sys.argv
    if hasattr(sys, "orig_argv"):  # Python 3.10+
        sys.orig_argv[:] = orig
    # what site does at a fresh interpreter's start, with this rank's variables: the launcher's sitecustomize (the
    # sampler where the workers sample), the program's own sitecustomize, then its usercustomize
    import site as _site

    del sys.modules["sitecustomize"]
    here = os.path.dirname(os.path.abspath(held.__file__))
    if sampling:
        held._ddplaunch_register()
    held._ddplaunch_pythonpath(here)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    _site.execsitecustomize()
    if sampling and "sitecustomize" not in sys.modules:
        sys.modules["sitecustomize"] = held
    if "usercustomize" in sys.modules and sys.modules["usercustomize"] is None:
        del sys.modules["usercustomize"]
    if _site.ENABLE_USER_SITE:
        _site.execusercustomize()
    if sys.version_info < (3, 7):
        sys.argv = argv
    safe = getattr(sys.flags, "safe_path", False)  # PYTHONSAFEPATH: python puts no path0 first

    main = sys.modules["__main__"].__dict__
    main.clear()
    main.update(main0)
    if mode == b"m":
        import runpy

        if not safe:  # python -m: the working directory from 3.7, "" before
            sys.path.insert(0, os.getcwd() if sys.version_info >= (3, 7) else "")
        run = (runpy._run_module_as_main, (target, True))
    else:
        full = target  # as python's own: absolute from 3.9 (not normalised), as given before
        if not target.startswith("/") and sys.version_info >= (3, 9):
            full = os.getcwd() + "/" + target
        if not safe:
            sys.path.insert(0, os.path.dirname(os.path.realpath(target)))
        main["__file__"] = full
        main["__cached__"] = None
        from importlib.machinery import SourceFileLoader

        main["__loader__"] = SourceFileLoader("__main__", full)
        with open(target, "rb") as fh:
            code = compile(fh.read(), full, "exec", dont_inherit=True)
        run = (exec, (code, main))
    del f, data, env, args, orig, held, argv
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
