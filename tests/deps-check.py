#!/usr/bin/env python3
"""The include rule of launcher/ (launcher/deps.rules): every include of a launcher header names its folder
("run/runner.h"), goes to the folder itself or to one the rules allow, never to another folder's X_internal.h,
and the modules include each other without a cycle; in the tests beside launcher/ (tests/unit, tests/fuzz) a
folder's X_internal.h only in X's own test or stand-in (test_X*, fuzz_X*, fake_X*). With --objects OBJ_DIR (a build's obj/, one FOLDER/MODULE.o
per source) the same rule holds for calls: every symbol a module's object uses from another module (nm) is a call
or data edge, allowed only downward or inside a folder, and the modules call each other without a cycle.
Usage: deps-check.py LAUNCHER_DIR [--objects OBJ_DIR]. Exit 0: holds; 1: each violation on its own line.
`make` holds the layers between folders too (Makefile: each folder's archive linked whole against the folders
below it alone); this also names the edge between modules and their cycles."""
import glob, os, re, subprocess, sys

args = sys.argv[1:]
objdir = None
if "--objects" in args:
    i = args.index("--objects")
    objdir = args[i + 1]
    del args[i:i + 2]
root = args[0] if args else "launcher"
bad = []
allowed = {}
for n, line in enumerate(open(os.path.join(root, "deps.rules")), 1):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    folder, _, below = line.partition(":")
    folder = folder.strip()
    for d in below.split():
        if d not in allowed:
            bad.append("deps.rules:%d: %s may include %s, which is not listed above it" % (n, folder, d))
    allowed[folder] = set(below.split())
folders = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
for d in folders:
    if d not in allowed:
        bad.append("launcher/%s/: not in deps.rules" % d)
for d in allowed:
    if d not in folders:
        bad.append("deps.rules: folder %s does not exist" % d)
for f in glob.glob(os.path.join(root, "*.[ch]")):
    bad.append("launcher/%s: a source outside the subsystem folders" % os.path.basename(f))

mods = {}  # "folder/module" -> set of modules it includes
for path in sorted(glob.glob(os.path.join(root, "*", "*.[ch]"))):
    folder = os.path.basename(os.path.dirname(path))
    rel = os.path.relpath(path, root)
    mod = re.sub(r"_internal$", "", os.path.splitext(rel)[0])
    deps = mods.setdefault(mod, set())
    for n, line in enumerate(open(path, errors="replace"), 1):
        g = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if not g:
            continue
        inc = g.group(1)
        where = "launcher/%s:%d" % (rel, n)
        if "/" not in inc:
            bad.append('%s: #include "%s" does not name its folder' % (where, inc))
            continue
        to, name = inc.split("/", 1)
        if not os.path.exists(os.path.join(root, inc)):
            bad.append('%s: #include "%s": no such header' % (where, inc))
            continue
        if to != folder:
            if to not in allowed.get(folder, set()):
                bad.append('%s: #include "%s": %s may not include %s (deps.rules)' % (where, inc, folder, to))
            if name.endswith("_internal.h"):
                bad.append('%s: #include "%s": another folder\'s internal header' % (where, inc))
        dep = re.sub(r"_internal$", "", os.path.splitext(inc)[0])
        if dep != mod:
            deps.add(dep)

# The tests next to launcher/ (tests/unit, tests/fuzz): a folder's X_internal.h only in X's own test (test_X*.c,
# fuzz_X*.c) or X's stand-in (fake_X*.h); every other test reads a module through its public header, as the code
# does (issue 53 item 6: the runner's workers and attempts are opaque outside launcher/run/).
tests = os.path.join(os.path.dirname(os.path.abspath(root)), "tests")
for path in sorted(glob.glob(os.path.join(tests, "unit", "*.[ch]")) + glob.glob(os.path.join(tests, "fuzz", "*.[ch]"))):
    own = re.sub(r"^(test|fuzz|fake)_", "", os.path.splitext(os.path.basename(path))[0])
    for n, line in enumerate(open(path, errors="replace"), 1):
        g = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if not g or not g.group(1).endswith("_internal.h"):
            continue
        mod = os.path.basename(g.group(1))[:-len("_internal.h")]
        if own != mod and not own.startswith(mod + "_"):
            bad.append('tests/%s:%d: #include "%s": the internal header of a module this test does not test '
                       '(only test_%s*, fuzz_%s*, fake_%s* may)' % (os.path.relpath(path, tests), n, g.group(1),
                                                                     mod, mod, mod))

def cycles(graph, kind):
    state, stack = {}, []
    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                bad.append(kind + ": " + " -> ".join(stack[stack.index(d):] + [d]))
            elif d in graph and not state.get(d):
                visit(d)
        stack.pop()
        state[m] = 2
    for m in sorted(graph):
        if not state.get(m):
            visit(m)
cycles(mods, "cycle")

calls = {}  # "folder/module" -> set of modules whose symbols it uses
if objdir is not None:
    defined, used = {}, {}
    for path in sorted(glob.glob(os.path.join(objdir, "*", "*.o"))):
        mod = os.path.splitext(os.path.relpath(path, objdir))[0]
        out = subprocess.run(["nm", "-P", path], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) < 2:
                continue
            if f[1] == "U":
                used.setdefault(mod, set()).add(f[0])
            elif f[1] in "TDBRCVW":
                defined[f[0]] = mod
    if len(used) < 20:
        bad.append("only %d objects found under %s" % (len(used), objdir))
    for mod, syms in sorted(used.items()):
        calls.setdefault(mod, set())
        folder = mod.split("/")[0]
        for sym in sorted(syms):
            to = defined.get(sym)
            if not to or to == mod:
                continue
            calls[mod].add(to)
            tf = to.split("/")[0]
            if tf != folder and tf not in allowed.get(folder, set()):
                bad.append("%s.o uses %s of %s.o: %s may not call %s (deps.rules)" % (mod, sym, to, folder, tf))
    cycles(calls, "call cycle")

if len(mods) < 20:
    bad.append("only %d modules found under %s" % (len(mods), root))
for b in bad:
    print(b)
if not bad:
    print("%d folders, %d modules, %d include edges%s: the rules hold, no cycle"
          % (len(folders), len(mods), sum(len(v) for v in mods.values()),
             ", %d call edges" % sum(len(v) for v in calls.values()) if objdir else ""))
sys.exit(1 if bad else 0)
