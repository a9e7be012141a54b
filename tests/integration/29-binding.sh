#!/usr/bin/env bash
# Binding through the exec shim (issue 3 + topology): a worker runs on the CPUs the plan gave it (as far as this
# machine allows); a binding that cannot be applied is a warning naming the rank and the set, or with
# [numa] strict = yes an error before exec (exit 1, class bind-failed). Uses a 2-socket topology fixture.
. "$DDP_SRCDIR/tests/integration/lib.sh"
F=$TOPO_DIR/2s-8gpu-aws-g4dn-metal-t4.xml
[ -f "$F" ] || skip "topology fixture $F is missing"
allowed=$(awk '/^Cpus_allowed_list:/{print $2}' /proc/self/status)

# GPUs 0,1 are on NUMA node 0 (CPUs 0-23,48-71): bound to what of that is allowed here.
mkdir -p "$TMP/a"
"$DDP" --no-python --nproc-per-node 2 --topology "$F" "$HELPERS/dumpenv" "$TMP/a" >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
want=$($PY - "$allowed" <<'EOS'
import sys
def parse(s):
    out = set()
    for part in s.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out
got = sorted(parse(sys.argv[1]) & parse("0-23,48-71"))
print(",".join(map(str, got)))
EOS
)
for r in 0 1; do
    cpus=$(awk '/^Cpus_allowed_list:/{print $2}' "$TMP/a/status.$r")
    got=$($PY -c "
import sys
s=set()
for p in '$cpus'.split(','):
    a,_,b=p.partition('-'); s.update(range(int(a),int(b or a)+1))
print(','.join(map(str,sorted(s))))")
    expect_eq "rank $r CPUs" "$got" "$want"
done

# GPUs 4,5 are on NUMA node 1 (CPUs 24-47,72-95), none of which exists here: a warning, the job still runs.
if [ -z "$($PY -c "
s=set()
for p in '$allowed'.split(','):
    a,_,b=p.partition('-'); s.update(range(int(a),int(b or a)+1))
print('yes' if s & (set(range(24,48))|set(range(72,96))) else '')")" ]; then
    "$DDP" --no-python --nproc-per-node 2 --topology "$F" --set gpus.select=4,5 "$HELPERS/dumpenv" "$TMP/a" \
        >"$TMP/out" 2>"$TMP/err"
    expect_eq "status of an unbindable, non-strict job" "$?" 0
    expect_grep 'rank 1: cannot bind to cpus 24-47,72-95 mems 1: .*none of them is allowed here' "$TMP/err"

    mkdir -p "$TMP/b"
    "$DDP" --no-python --nproc-per-node 2 --topology "$F" --set gpus.select=4,5 --set numa.strict=yes \
        "$HELPERS/dumpenv" "$TMP/b" >"$TMP/out" 2>"$TMP/err"
    expect_eq "status of an unbindable, strict job" "$?" 1
    expect_grep 'error: rank [01]: cannot bind to cpus 24-47,72-95' "$TMP/err"
    sed -n '/^Root Cause/,$p' "$TMP/err" >"$TMP/root"
    expect_grep 'class +: bind-failed' "$TMP/root"
    [ -e "$TMP/b/env.0" ] && fail "the program ran although strict binding failed"
fi
echo ok
