# Written by ddplaunch (ddplaunch(1), LIVE HANG WATCH): lets ddplaunch sample this rank's Python stacks while it
# runs, into a file of the attempt's private directory (never the console), then runs the sitecustomize this one
# hides, if there is one further down sys.path. The signal is blocked in every thread; one idle thread of its own
# takes it with sigwait and writes every other thread's stack (faulthandler's format) holding the GIL, so that
# the signal never interrupts a system call of the program or of torch (a TCPStore connect fails on EINTR) and
# no frame is read while its thread changes it (faulthandler's own handler does, and crashed a rank in import).
# The file is opened by its path for each sample (a descriptor kept open could be closed and reused by the
# program), and nothing it does ever reaches the program's streams: a failure (a full disk) is put in the header.
#
# This file is launcher/watch/sitecustomize.py, built into the ddplaunch binary (the Makefile makes it
# $(BUILD)/gen/sitecustomize_py.h) and written by watch/sample.c into the launch's private run directory, which
# goes first on the workers' PYTHONPATH; the launcher never reads it from disk. The signal and the file come in
# DDPLAUNCH_STACKS_SIGNAL and DDPLAUNCH_STACKS_FILE. `make check` runs py_compile and pyflakes on it; `make unit`
# tests it (tests/unit/test_sitecustomize.py) against a stand-in torch of 1.x's and 2.x's shapes (fake_torch.py).


# ---- torch's flight recorder, read with each sample (watch/fr.c parses the line):
# _ddplaunch_fr_line(state, want) returns one "ddplaunch-fr {json}" line, or '' where torch was not imported by the
# program, has no process group yet, or has no recorder (torch 1.x). It never imports torch. The entries (3-35 ms
# for a full ring) are read once per standstill of the status, not per sample, or now when `want`: ddplaunch sent
# the signal with sigqueue (si_code SI_QUEUE) because a rank failed with a collective error (watch/atfail.c).
def _ddplaunch_fr_state():
    return {'key': None, 'since': 0.0, 'last': None, 'off': False, 'groups': None, 'ngroups': -1, 'pgmap': {},
            'tried': set()}


def _ddplaunch_fr_entries(st, fns):
    import json
    out = []
    for f in fns:
        for e in json.loads(f(includeCollectives=True, onlyActive=False).decode()).get('entries') or []:
            pg = e.get('process_group') or []
            if len(pg) == 2 and 'pg_id' in e:
                st['pgmap'].setdefault(str(e['pg_id']), [str(pg[0]), str(pg[1])])
            out.append(e)
    return out


def _ddplaunch_fr_last(entries):
    keep = ('record_id', 'pg_id', 'process_group', 'collective_seq_id', 'p2p_seq_id', 'profiling_name',
            'state', 'time_created_ns', 'input_sizes', 'input_dtypes', 'is_p2p')
    per = {}
    for e in entries:
        pg = e.get('process_group') or [e.get('pg_id')]
        per.setdefault(str(pg[0]), []).append({k: e[k] for k in keep if k in e})
    return [e for pg in per.values() for e in pg[-8:]]


def _ddplaunch_fr_groups(st, dist):
    try:
        w = dist.distributed_c10d._world
        if len(w.pg_names) != st['ngroups']:
            st['ngroups'] = len(w.pg_names)
            st['groups'] = {str(w.pg_names[pg]): sorted(w.pg_group_ranks[pg]) for pg in w.pg_names
                            if pg in w.pg_group_ranks}
    except Exception:
        st['groups'] = None
    return st['groups']


def _ddplaunch_fr_line(st, want):
    import sys
    torch, dist = sys.modules.get('torch'), sys.modules.get('torch.distributed')
    if st['off'] or torch is None or dist is None:
        return ''
    try:
        if not dist.is_available() or not dist.is_initialized():
            return ''
        C = getattr(torch._C, '_distributed_c10d', None)
        fns = [getattr(C, n) for n in ('_dump_nccl_trace_json', '_dump_fr_trace_json') if hasattr(C, n)]
        if not fns:
            st['off'] = True
            return ''
        import json, time
        status, config = {}, {}
        for f in fns:
            d = json.loads(f(includeCollectives=False, onlyActive=False).decode())
            for k, v in (d.get('pg_status') or {}).items():
                old = status.get(k)
                if old is None or int(v.get('last_enqueued_collective', -1)) > \
                        int(old.get('last_enqueued_collective', -1)):
                    status[k] = v
            config.update(d.get('pg_config') or {})
        if not status:
            return ''
        key, now = json.dumps(status, sort_keys=True), time.monotonic()
        if key != st['key']:
            st['key'], st['since'], st['last'] = key, now, None
        new = [k for k, v in status.items() if k not in st['pgmap'] and k not in st['tried']
               and int(v.get('last_enqueued_collective', -1)) > 0]
        if st['last'] is None and (want or now - st['since'] >= 10):
            st['last'] = _ddplaunch_fr_last(_ddplaunch_fr_entries(st, fns))
        elif new:
            _ddplaunch_fr_entries(st, fns)
        st['tried'].update(new)
        doc = {'pg_status': status, 'pg_config': config, 'ddp_groups': _ddplaunch_fr_groups(st, dist),
               'ddp_pgmap': st['pgmap']}
        if st['last'] is not None:
            doc['entries'] = st['last']
        return 'ddplaunch-fr ' + json.dumps(doc, separators=(',', ':')) + '\n'
    except Exception:
        return ''


# the kernel's id of the calling thread: threading.get_native_id is Python 3.8+; before, /proc/thread-self names it
def _ddplaunch_native_id():
    import os, threading
    f = getattr(threading, 'get_native_id', None)
    return f() if f else int(os.readlink('/proc/thread-self').rsplit('/', 1)[1])


# ---- the stack sampler: registration, and the thread that answers the signal. The registration is once per
# process that got DDPLAUNCH_STACKS_FILE (popped, so the program's own Python subprocesses do not register).
def _ddplaunch_register():
    import os
    path = os.environ.pop('DDPLAUNCH_STACKS_FILE', None)
    sig = os.environ.pop('DDPLAUNCH_STACKS_SIGNAL', None)
    if not path or not sig:
        return None
    try:
        import signal, sys, threading
        sig = int(sig)
        pid = os.getpid()
        with open('/proc/self/stat', 'rb') as f:
            start = int(f.read().rsplit(b')', 1)[1].split()[19])
        signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
        main = threading.main_thread().ident
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC

        def _ddplaunch_head(tid, err):
            return ('ddplaunch-stacks pid=%010d signal=%03d start=%020d tid=%010d err=%03d\n'
                    % (pid, sig, start, tid, err)).encode()

        made = threading.Event()

        def _ddplaunch_wait():
            me = threading.get_ident()
            try:
                tid = _ddplaunch_native_id()
                mine = _ddplaunch_head(tid, 0)
                fd = os.open(path, flags | os.O_CREAT | os.O_TRUNC, 0o600)
                try:
                    os.write(fd, mine)
                finally:
                    os.close(fd)
            except BaseException:
                return
            finally:
                made.set()
            fr = _ddplaunch_fr_state()
            while True:
                try:
                    want = signal.sigwaitinfo({sig}).si_code == -1  # SI_QUEUE: the entries are wanted now
                    out = []
                    for ident, frame in sys._current_frames().items():
                        if ident == me:
                            continue
                        out.append('%s 0x%016x (most recent call first):\n'
                                   % ('Current thread' if ident == main else 'Thread', ident))
                        depth = 0
                        while frame is not None and depth < 100:
                            out.append('  File "%s", line %s in %s\n'
                                       % (frame.f_code.co_filename, frame.f_lineno or 0, frame.f_code.co_name))
                            frame = frame.f_back
                            depth += 1
                        out.append('\n')
                    out.append(_ddplaunch_fr_line(fr, want))
                    data = memoryview(''.join(out).encode('utf-8', 'backslashreplace'))
                    fd = os.open(path, flags)
                    try:
                        if os.pread(fd, len(mine), 0) != mine:
                            continue  # a newer Python of this rank registered: it answers now
                        off = len(mine)
                        try:
                            while data:
                                n = os.pwrite(fd, data, off)
                                data = data[n:]
                                off += n
                        except OSError as e:
                            os.pwrite(fd, _ddplaunch_head(tid, (e.errno or 1) % 1000), 0)
                    finally:
                        os.close(fd)
                except BaseException:
                    pass

        threading.Thread(target=_ddplaunch_wait, name='ddplaunch-stacks', daemon=True).start()
        made.wait(2.0)  # the file exists before the program runs, however short it is
        return sig
    except Exception:
        return None


def _ddplaunch_pythonpath(here):
    import os
    was = os.environ.pop('DDPLAUNCH_PYTHONPATH', None)
    now = os.environ.get('PYTHONPATH')
    parts = now.split(os.pathsep) if now is not None else []
    ours = [i for i, p in enumerate(parts) if p and os.path.abspath(p) == here]
    old = was[1:] if was is not None and was[:1] == '+' else None
    if ours and ours[0] == 0 and ((len(parts) == 1 and not old) or os.pathsep.join(parts[1:]) == old):
        # as ddplaunch left it: back byte for byte to what the program was given
        if old is None:
            os.environ.pop('PYTHONPATH', None)
        else:
            os.environ['PYTHONPATH'] = old
    elif ours:
        # changed on the way (a wrapper script prepended its own): only ddplaunch's entry goes
        del parts[ours[0]]
        if parts:
            os.environ['PYTHONPATH'] = os.pathsep.join(parts)
        else:
            os.environ.pop('PYTHONPATH', None)


# the chained import is what Python would have done without this directory
def _ddplaunch_chain():
    import os, sys, importlib.machinery, importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    _ddplaunch_pythonpath(here)
    spec = importlib.machinery.PathFinder.find_spec('sitecustomize', sys.path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules['sitecustomize'] = mod
    spec.loader.exec_module(mod)


# a warm restart's standby interpreter (ddplaunch(1), WARM RESTART; DDPLAUNCH_STANDBY=1) starts before its rank is
# known: here it only holds the program's own sitecustomize and usercustomize back (usercustomize: None in
# sys.modules, which site's import takes for "not there"); run/standby.py runs them, and the functions above, once
# it is given the rank's environment, as site would have at a fresh interpreter's start
def _ddplaunch_hold():
    import os, sys
    if os.environ.pop('DDPLAUNCH_STANDBY', None) != '1':
        return False
    if 'usercustomize' not in sys.modules:
        sys.modules['usercustomize'] = None
    return True


if __name__ == 'sitecustomize':
    _ddplaunch_held = _ddplaunch_hold()
    if not _ddplaunch_held:
        _ddplaunch_stacks = _ddplaunch_register()
        _ddplaunch_chain()
