#!/bin/bash
# Layers a planted call cannot cross (issue 53 item 5): `make` itself fails when a lower folder of launcher/
# calls a higher one, or one deps.rules does not list below it (the Makefile links each folder's archive whole
# against the folders below it alone before it links build/ddplaunch), even where the final link would resolve
# the call because the callee is pulled in anyway (a planted ddp_launch_free call in base/util.c linked and
# passed `make unit` before). A downward call still builds. Runs make in a copy of the tree and the build.
. "$DDP_SRCDIR/tests/integration/lib.sh"
command -v make >/dev/null || skip "no make"
[ -d "$DDP_BUILD/obj" ] && [ -d "$DDP_BUILD/layers" ] || skip "no build objects in $DDP_BUILD"
san=
case $(basename "$DDP_BUILD") in san-*) san=$(basename "$DDP_BUILD" | sed 's/^san-//; s/-/,/g') ;; esac
tree=$TMP/tree
fresh() { # a copy of the sources and of the build (timestamps kept: only what a plant touches is rebuilt)
    rm -rf "$tree" && mkdir -p "$tree/b" && cp -a "$DDP_SRCDIR/Makefile" "$DDP_SRCDIR/launcher" "$tree/" &&
        cp -a "$DDP_BUILD/obj" "$DDP_BUILD/layers" "$DDP_BUILD/gen" "$DDP_BUILD/ddplaunch" "$tree/b/" ||
        fail "copying the tree failed"
}
build() { nice make -s -C "$tree" BUILD=b SANITIZE="$san" b/ddplaunch >"$TMP/make" 2>&1; }
plant() { # plant FILE CALLEE [declared]: a function in FILE that calls CALLEE (declared here unless FILE's headers do)
    [ "${3:-}" = declared ] || printf '\nvoid %s(void);' "$2" >>"$tree/launcher/$1"
    printf '\nvoid ddp_planted_call(void);\nvoid ddp_planted_call(void) { (void)%s(); }\n' "$2" >>"$tree/launcher/$1"
}

fresh
build || { cat "$TMP/make"; fail "the unchanged copy did not build"; }
echo "unchanged tree: builds"

for p in "base/util.c ddp_launch_free base" "topo/select.c ddp_plan_build topo" "nodes/coord.c ddp_plan_build nodes"; do
    set -- $p
    fresh
    plant "$1" "$2"
    build && fail "planted $1 -> $2: make succeeded"
    grep -q "undefined reference to .$2" "$TMP/make" || { cat "$TMP/make"; fail "planted $1 -> $2: not named"; }
    expect_grep "launcher/$3/ calls a folder that deps.rules does not list below it" "$TMP/make"
    echo "planted $1 -> $2: make fails: $(grep -m1 -o "undefined reference to .*" "$TMP/make")"
done

fresh
plant topo/select.c ddp_now_ms declared
build || { cat "$TMP/make"; fail "a planted downward call (topo -> base) did not build"; }
echo "planted topo -> base (downward): builds"
