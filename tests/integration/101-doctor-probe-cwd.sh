#!/usr/bin/env bash
# No code from where others write (issue 52 item 2): `ddplaunch doctor SCRIPT` asks the workers' Python whether
# it imports torch. Run as root in a shared directory (mode 1777, like /tmp) where another local user left a
# torch.py, a sitecustomize.py and a readline.py, none of them may run: each would write a marker file. The probe
# still answers (the real torch where it is installed, else "cannot import torch"), and never with the planted one.
. "$DDP_SRCDIR/tests/integration/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to create a second user (useradd)"
command -v runuser >/dev/null || skip "runuser not installed"
M=ddptest-mallory
id -u "$M" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$M" || skip "useradd failed"
as_m() { runuser -u "$M" -- "$@"; }

chmod 711 "$TMP"
PUB=$TMP/pub
mkdir -m 1777 "$PUB"
for mod in torch sitecustomize readline; do
    as_m sh -c "printf '%s\n' 'open(\"$PUB/ran.$mod\", \"w\").write(\"planted\")' \"__version__ = 'planted'\" >'$PUB/$mod.py'" ||
        fail "mallory cannot write $PUB/$mod.py"
done
echo 'print("train")' >"$TMP/train.py"

# the workers' Python (PYTHON_EXEC from lib.sh), then the search on PATH when it has no torch: both probes
for py in "$PY" "$TMP/nopython"; do
    (cd "$PUB" && PYTHON_EXEC=$py "$DDP" doctor --nproc-per-node 1 "$TMP/train.py") >"$TMP/out" 2>&1
    grep -E '^[a-z]+ +python ' "$TMP/out" >"$TMP/line" || { cat "$TMP/out"; fail "$py: no python check"; }
    ran=$(ls "$PUB" | grep '^ran\.' || true)
    [ -z "$ran" ] || fail "PYTHON_EXEC=$py: doctor ran another user's code from its directory: $ran"
    grep -q planted "$TMP/line" && fail "PYTHON_EXEC=$py: doctor believed the planted torch: $(cat "$TMP/line")"
    if have_torch; then
        expect_grep "python .* imports torch [0-9]" "$TMP/line"
    else
        expect_grep "cannot import torch" "$TMP/line"
    fi
done

# a module job from that directory: the same probe
(cd "$PUB" && "$DDP" doctor --nproc-per-node 1 -m json.tool) >"$TMP/out" 2>&1
grep -qE '^[a-z]+ +python ' "$TMP/out" || { cat "$TMP/out"; fail "module: no python check"; }
[ -z "$(ls "$PUB" | grep '^ran\.' || true)" ] || fail "module job: doctor ran another user's code"
echo ok
