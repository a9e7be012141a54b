#!/usr/bin/env bash
# Issue 33: launcher/ is one folder per subsystem, and launcher/deps.rules (data) says which folder may include
# which. tests/deps-check.py holds the code to it: no include upward or sideways, none of another folder's
# X_internal.h, every include names its folder, no cycle between modules; in tests/unit and tests/fuzz, a folder's
# X_internal.h only in X's own test or stand-in (issue 53 item 6: the runner's workers are opaque outside run/).
# The check is shown to fail on each kind of planted violation, in a copy. README's layout has one line per folder.
# Issue 42: the rule holds for calls too. deps-check.py --objects reads the build's objects (nm) for call and data
# edges: none upward or sideways, no cycle between modules. And the linker enforces the layers: each folder is an
# archive linked highest first (Makefile, print-layers), so a planted upward call (base calling the driver) fails
# to link, while the same harness linking a downward call succeeds.
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
plant records/records.c '#include "run/runner_internal.h"' # the runner's workers: opaque outside run/ (issue 53)
# A test reads a module through its public header unless it tests that module or stands in for it (issue 53 item 6):
# a copy of tests/unit beside the copy, where records' test includes the runner's private data
rm -rf "$copy" "$TMP/tests" && cp -r "$DDP_SRCDIR/launcher" "$copy" && mkdir "$TMP/tests" &&
    cp -r "$DDP_SRCDIR/tests/unit" "$TMP/tests/" || fail "copying the tree failed"
$PY "$check" "$copy" >/dev/null || fail "the copy with tests/unit beside it did not pass"
printf '#include "run/runner_internal.h"\n' >>"$TMP/tests/unit/test_records.c"
o=$($PY "$check" "$copy") && fail "planted in tests/unit/test_records.c (run/runner_internal.h): the check passed"
grep -qF "tests/unit/test_records.c" <<<"$o" || fail "planted in tests/unit/test_records.c: not named: $o"
echo "planted tests/unit/test_records.c: run/runner_internal.h -> $(head -n 1 <<<"$o")"
rm -rf "$TMP/tests"
rm -rf "$copy" && cp -r "$DDP_SRCDIR/launcher" "$copy" && mkdir "$copy/extra"
$PY "$check" "$copy" >/dev/null && fail "a folder missing from deps.rules passed"

# Calls: the build's objects
out=$($PY "$check" "$DDP_SRCDIR/launcher" --objects "$DDP_BUILD/obj") || fail "the call rule does not hold:"$'\n'"$out"
echo "$out"

# The linker: a copy of the archives, with one planted object added to libbase.a (or libtopo.a)
libs=$(make -s -C "$DDP_SRCDIR" BUILD="$DDP_BUILD" print-layers) || fail "make print-layers failed"
san=
case $(basename "$DDP_BUILD") in san-*) san="-fsanitize=$(basename "$DDP_BUILD" | sed 's/^san-//; s/-/,/g')" ;; esac
deplibs="$(pkg-config --libs libuv hwloc inih jansson libsodium) -lnuma -ldl -lm"
link_planted() { # link_planted FOLDER CALLEE: link a program whose only object calls a planted FOLDER member
    local d=$TMP/link && rm -rf "$d" && mkdir -p "$d"
    printf 'void %s(void);\nvoid ddp_planted(void);\nvoid ddp_planted(void) { %s(); }\n' "$2" "$2" >"$d/planted.c"
    printf 'void ddp_planted(void);\nint main(void) { ddp_planted(); return 0; }\n' >"$d/main.c"
    cc $san -c -o "$d/planted.o" "$d/planted.c" && cc $san -c -o "$d/main.o" "$d/main.c" || fail "cc failed"
    local order=() l
    for l in $libs; do
        cp "$l" "$d/" && order+=("$d/$(basename "$l")")
    done
    ar rs "$d/lib$1.a" "$d/planted.o" 2>/dev/null || fail "ar failed"
    # shellcheck disable=SC2086
    cc $san -o "$d/prog" "$d/main.o" "${order[@]}" $deplibs 2>"$d/err"
}
link_planted topo ddp_now_ms || fail "a downward call (topo -> base) did not link: $(head -n 3 "$TMP/link/err")"
echo "planted downward call topo -> base: links"
link_planted base ddp_policy_init && fail "a planted upward call (base -> driver) linked"
grep -q "undefined reference to .ddp_policy_init" "$TMP/link/err" || fail "upward call: $(head -n 3 "$TMP/link/err")"
echo "planted upward call base -> driver: $(grep -m1 -o "undefined reference to .*" "$TMP/link/err")"
link_planted topo ddp_plan_build && fail "a planted upward call (topo -> run) linked"
echo "planted upward call topo -> run: does not link"

# Each source opens with its module's name ("/* stall: ..."), never an old name (issue 42 item 6)
for f in "$DDP_SRCDIR"/launcher/*/*.[ch]; do
    m=$(basename "$f") && m=${m%.*} && m=${m%_internal}
    head -n 1 "$f" | grep -qE "^/\* $m(_internal)?: " || fail "${f#"$DDP_SRCDIR"/} opens with '$(head -n 1 "$f" | cut -c1-40)', not '/* $m: '"
done
echo "every source opens with its module's name"

# README's Layout names every module in its folder's entry (issue 42: the layout matches the tree): a module that is
# added, renamed or moved without README following fails here
layout=$(awk '/^launcher\/     C11/,/^config\//' "$DDP_SRCDIR/README.md")
[ -n "$layout" ] || fail "README.md has no Layout block (launcher/ ... config/)"
for d in "$DDP_SRCDIR"/launcher/*/; do
    folder=$(basename "$d")
    entry=$(printf '%s\n' "$layout" | awk -v f="  $folder/" 'index($0, f) == 1 { on = 1; print; next }
        on && /^  [a-z]+\/ / { exit } on && /^[a-z]/ { exit } on { print }')
    [ -n "$entry" ] || fail "README's Layout has no entry for launcher/$folder/"
    for f in "$d"*.c "$d"*.py; do
        [ -e "$f" ] || continue
        m=$(basename "$f") && m=${m%.c}
        printf '%s\n' "$entry" | grep -qE "(^|[^a-z_.])$m([^a-z_]|$)" ||
            fail "README's Layout entry for launcher/$folder/ does not name ${f#"$DDP_SRCDIR"/} ('$m')"
    done
done
echo "README's Layout names every module of every folder"

# Commit subjects of at most 72 characters, from the commit where the rule began being checked (issue 42)
if git -C "$DDP_SRCDIR" rev-parse -q --verify 3a0b4ff^{commit} >/dev/null 2>&1; then
    long=$(git -C "$DDP_SRCDIR" log --format='%h %s' 3a0b4ff..HEAD | awk 'length($0) - index($0, " ") > 72')
    [ -z "$long" ] || fail "commit subjects over 72 characters:"$'\n'"$long"
    echo "commit subjects since 3a0b4ff: at most 72 characters"
fi

# watch.c keeps the table and the dispatch only: struct ddp_watch holds the environment and each source's state,
# no field and no adapter of a source (each module exports its struct ddp_watch_source; issue 42 item 3)
fields=$(sed -n '/^struct ddp_watch {/,/^};/p' "$DDP_SRCDIR/launcher/watch/watch.c" | grep -cE '^    [a-z].*;')
[ "$fields" = 2 ] || fail "struct ddp_watch in watch.c has $fields fields, not the environment and the states"
adapters=$(grep -cE '^static [a-z].*\((struct ddp_watch|void) \*(w|self)[,)]' "$DDP_SRCDIR/launcher/watch/watch.c")
[ "$adapters" = 0 ] || fail "watch.c has $adapters per-source adapters"
for f in "$DDP_SRCDIR"/launcher/watch/*.c; do
    grep -q "^const struct ddp_watch_source ddp_" "$f" || continue
    m=$(basename "$f" .c)
    grep -q "&ddp_${m}_source" "$DDP_SRCDIR/launcher/watch/watch.c" || fail "$m exports a source that watch.c's table lacks"
done
echo "watch.c: the table and the dispatch, no per-source field or adapter"

# README's layout: one line per folder of launcher/, and where a timeout source goes
layout=$(sed -n '/^## Layout/,/^## Contributing/p' "$DDP_SRCDIR/README.md")
[ -n "$layout" ] || fail "README.md has no Layout section"
for d in "$DDP_SRCDIR"/launcher/*/; do
    d=$(basename "$d")
    grep -qE "^  $d/ " <<<"$layout" || fail "README's layout has no line for launcher/$d/"
done
grep -q "a timeout source" <<<"$layout" || fail "README's layout does not say where a timeout source goes"
echo "ok"
