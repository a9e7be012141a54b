#!/usr/bin/env bash
# Issue 33: launcher/ is one folder per subsystem, and launcher/deps.rules (data) says which folder may include
# which. tests/deps-check.py holds the code to it: no include upward or sideways, none of another folder's
# X_internal.h, every include names its folder, no cycle between modules. The check is shown to fail on each
# kind of planted violation, in a copy. README's layout has one line per folder. Reads the sources only.
. "$DDP_SRCDIR/tests/integration/lib.sh"
check=$DDP_SRCDIR/tests/deps-check.py
out=$($PY "$check" "$DDP_SRCDIR/launcher") || fail "the include rule does not hold:"$'\n'"$out"
echo "$out"

copy=$TMP/launcher
plant() { # plant FILE LINE: the check must fail on the copy with LINE added to FILE, naming FILE
    rm -rf "$copy" && cp -r "$DDP_SRCDIR/launcher" "$copy"
    printf '%s\n' "$2" >>"$copy/$1"
    local o
    o=$($PY "$check" "$copy") && fail "planted in $1 ($2): the check passed"
    grep -qF "launcher/$1" <<<"$o" || grep -q "^cycle:" <<<"$o" || fail "planted in $1 ($2): not named: $o"
    echo "planted $1: $2 -> $(head -n 1 <<<"$o")"
}
plant base/util.c '#include "run/runner.h"'           # upward
plant nodes/coord.c '#include "run/plan.h"'           # sideways (nodes may not see run)
plant driver/launch.c '#include "nodes/coord_internal.h"' # another folder's internal header
plant spec/spec.c '#include "util.h"'                 # an include that does not name its folder
plant run/pty.c '#include "run/runner.h"'             # a cycle inside a folder (runner.h -> pty.h)
rm -rf "$copy" && cp -r "$DDP_SRCDIR/launcher" "$copy" && mkdir "$copy/extra"
$PY "$check" "$copy" >/dev/null && fail "a folder missing from deps.rules passed"

# README's layout: one line per folder of launcher/, and where a timeout source goes
layout=$(sed -n '/^## Layout/,/^## Contributing/p' "$DDP_SRCDIR/README.md")
[ -n "$layout" ] || fail "README.md has no Layout section"
for d in "$DDP_SRCDIR"/launcher/*/; do
    d=$(basename "$d")
    grep -qE "^  $d/ " <<<"$layout" || fail "README's layout has no line for launcher/$d/"
done
grep -q "a timeout source" <<<"$layout" || fail "README's layout does not say where a timeout source goes"
echo "ok"
