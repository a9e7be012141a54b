"""What a warm-restart standby interpreter holds of CUDA's driver (issue 41: a standby must not initialise CUDA, or
its devices are fixed before the rank's CUDA_VISIBLE_DEVICES): its /dev/nvidia* descriptors and whether libcuda is
mapped. Used by warm_restart.py and warm_phases_run.py."""
import os


def gpu_state(pid):
    """One line: pid's /dev/nvidia* descriptors and the libcuda it maps."""
    fds = set()
    try:
        for f in os.listdir("/proc/%d/fd" % pid):
            try:
                t = os.readlink("/proc/%d/fd/%s" % (pid, f))
            except OSError:
                continue
            if t.startswith("/dev/nvidia"):
                fds.add(t)
        libs = sorted({ln.split()[-1] for ln in open("/proc/%d/maps" % pid) if "libcuda.so" in ln})
    except OSError as e:
        return "standby %d: %s" % (pid, e)
    return "standby %d: /dev/nvidia* descriptors %s, libcuda mapped %s" % (pid, sorted(fds) or "none", libs or "no")


def standby_pids():
    """The standby interpreters running on this host: pythons started with run/standby.c's BOOT (-c)."""
    out = []
    for p in os.listdir("/proc"):
        try:
            if not p.isdigit() or b"exec(__import__('os').read(4" not in open("/proc/%s/cmdline" % p, "rb").read():
                continue
            if os.path.basename(os.readlink("/proc/%s/exe" % p)).startswith("python"):
                out.append(int(p))  # not its exec shim (ddplaunch), whose argv holds the python's
        except OSError:
            continue
    return out
