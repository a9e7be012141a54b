#!/usr/bin/env python3
"""The include rule of launcher/ (launcher/deps.rules): every include of a launcher header names its folder
("run/runner.h"), goes to the folder itself or to one the rules allow, never to another folder's X_internal.h,
and the modules include each other without a cycle. Usage: deps-check.py LAUNCHER_DIR. Exit 0: holds; 1: each
violation on its own line (file:line: what)."""
import glob, os, re, sys

root = sys.argv[1] if len(sys.argv) > 1 else "launcher"
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

state, stack = {}, []
def visit(m):
    state[m] = 1
    stack.append(m)
    for d in sorted(mods.get(m, ())):
        if state.get(d) == 1:
            bad.append("cycle: " + " -> ".join(stack[stack.index(d):] + [d]))
        elif d in mods and not state.get(d):
            visit(d)
    stack.pop()
    state[m] = 2
for m in sorted(mods):
    if not state.get(m):
        visit(m)

if len(mods) < 20:
    bad.append("only %d modules found under %s" % (len(mods), root))
for b in bad:
    print(b)
if not bad:
    print("%d folders, %d modules, %d include edges: the rules hold, no cycle"
          % (len(folders), len(mods), sum(len(v) for v in mods.values())))
sys.exit(1 if bad else 0)
