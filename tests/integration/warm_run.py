"""Runs one ddplaunch job of warm_probe.py for test 92 and times it: warm_run.py MODE PROBE_OUT RESULT.json -- ARGV
MODE cold: says go once attempt 0's ranks printed; warm: once the launcher said its standbys are ready; fallback:
as warm, after killing local rank 1's standby (its pid from the -v line) and seeing it gone. RESULT: the exit
status, the seconds from the launcher's restart decision (its "restarting" line) to each rank's first line of
attempt 1, and the launcher's "started warm" line."""
import json, os, re, signal, subprocess, sys, time

mode, out, result = sys.argv[1], sys.argv[2], sys.argv[3]
argv = sys.argv[sys.argv.index("--") + 1:]
p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
t_restart, first, warm_line, said_go, seen0, standby = None, {}, None, False, set(), {}
standbys_ready = False
deadline = time.monotonic() + 150
with open(os.path.join(out, "launcher.txt"), "w") as log:
    for raw in p.stdout:
        now = time.monotonic()
        line = raw.decode(errors="replace").rstrip("\n")
        log.write("%.3f %s\n" % (now, line))
        m = re.search(r"standby of local rank (\d+) ready .*pid (\d+)", line)
        if m:
            standby[int(m.group(1))] = int(m.group(2))
        m = re.match(r"probe rank (\d+) attempt (\d+)", line)
        if m and m.group(2) == "0":
            seen0.add(m.group(1))
        if m and m.group(2) == "1" and m.group(1) not in first and t_restart is not None:
            first[m.group(1)] = round(now - t_restart, 3)
        if "restarting" in line and t_restart is None:
            t_restart = now
        if "started warm" in line:
            warm_line = line
        if "standby interpreters ready" in line:
            standbys_ready = True
        ready = len(seen0) == 2 and (mode == "cold" or standbys_ready)
        if ready and not said_go:
            if mode == "fallback":
                os.kill(standby[1], signal.SIGKILL)
                while os.path.exists("/proc/%d" % standby[1]) and time.monotonic() < deadline:
                    time.sleep(0.02)
            open(os.path.join(out, "go"), "w").close()
            said_go = True
        if time.monotonic() > deadline:
            p.kill()
rc = p.wait()
json.dump({"rc": rc, "first": first, "warm_line": warm_line, "go": said_go}, open(result, "w"))
