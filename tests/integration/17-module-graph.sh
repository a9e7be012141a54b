#!/usr/bin/env bash
# Issue 21: the modules of launcher/ include each other without a cycle (two modules that include each other's
# headers are one module in two files; X_internal.h counts as module X), and no file of launcher/ has more than 800
# lines; README's layout names every module. Reads the sources only.
. "$DDP_SRCDIR/tests/integration/lib.sh"
cd "$DDP_SRCDIR/launcher" || fail "no launcher/"
ls ./*.c >/dev/null 2>&1 || fail "no sources in launcher/"
$PY - <<'PYEOF' || fail "the include graph of launcher/ has a cycle (above)"
import glob, os, re, sys
mods = {}
for f in sorted(glob.glob("*.c") + glob.glob("*.h")):
    m = re.sub(r"_internal$", "", os.path.splitext(f)[0])  # a module's private header is the module
    deps = mods.setdefault(m, set())
    for line in open(f, errors="replace"):
        g = re.match(r'\s*#\s*include\s+"([^"]+)\.h"', line)
        d = g and re.sub(r"_internal$", "", g.group(1))
        if d and d != m:
            deps.add(d)
assert len(mods) > 20, "only %d modules found" % len(mods)
state, stack = {}, []
def visit(m):
    state[m] = 1
    stack.append(m)
    for d in sorted(mods.get(m, ())):
        if state.get(d) == 1:
            print("cycle: " + " -> ".join(stack[stack.index(d):] + [d]))
            sys.exit(1)
        if d in mods and not state.get(d):
            visit(d)
    stack.pop()
    state[m] = 2
for m in sorted(mods):
    if not state.get(m):
        visit(m)
print("%d modules, %d include edges, no cycle" % (len(mods), sum(len(v) for v in mods.values())))
PYEOF
# no file of launcher/ over 800 lines, and the part that runs a job is all there
for f in supervise.c runner.c lifecycle.c records.c capture.c nodes.c agent.c policy.c timer.c watch.c wall.c \
    watchdog.c timeouts.c filetimer.c signals.c live.c; do
    [ -e "$f" ] || fail "launcher/$f is missing"
done
for f in ./*.c ./*.h; do
    n=$(wc -l <"$f")
    [ "$n" -le 800 ] || fail "launcher/${f#./} has $n lines (over 800: split it by concern)"
done
# README's layout names every module (one line each) and says where a new timeout source goes
layout=$(sed -n '/^## Layout/,/^## Install/p' "$DDP_SRCDIR/README.md")
[ -n "$layout" ] || fail "README.md has no Layout section"
for f in ./*.c; do
    f=${f#./}
    grep -qE "(^| )${f//./\\.}( |,|;|$)" <<<"$layout" || fail "README's layout does not name launcher/$f"
done
grep -q "a timeout source" <<<"$layout" || fail "README's layout does not say where a timeout source goes"
echo "ok"
