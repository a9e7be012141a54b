#!/bin/bash
# Warm = cold (issue 52): one table of program shapes runs cold ([restart] warm = no) and warm (= yes, its attempt
# 0 held until the standby is ready, then failed, so that attempt 1 starts in the standby), and everything the
# program observes at attempt 1's start is compared (warm_shape_probe.py): sys.path, argv, orig_argv where it
# exists, os.environ, cwd, sys.flags, signal dispositions and masks, __main__'s names, __spec__, __file__,
# __loader__, the site hooks' modules. Shapes: a script, -m module, a relative [job] workdir, PYTHONSAFEPATH with a
# PYTHONPATH, the program's own sitecustomize and usercustomize (they must run at the rank's start, with its RANK),
# an environment entry with an empty name, a --no-python program named python_*; and every Python 3 installed
# (/usr/bin/python3.*, /root/.pyenv/versions/3.*: 3.6-3.13 on the CI image) runs a script and a module. What a
# standby cannot run as python does (a zipapp, a directory, a .pyc) is refused: one line, attempt 1 cold, same view.
# No stderr of any run holds a traceback (3.6 and 3.7 have no threading.get_native_id: the sampler must not die).
# DDP_PYTHONS (a list of interpreters) narrows the versions checked, for a quick run by hand.
. "$DDP_SRCDIR/tests/integration/lib.sh"
unset DDPLAUNCH_RESTART_WARM PYTHONSAFEPATH PYTHONPATH
probe=$DDP_SRCDIR/tests/integration/warm_shape_probe.py
W=$TMP/w
mkdir -p "$W/sub/pkg" "$W/app" "$W/site" "$W/vendored"
cp "$probe" "$W/sub/prog.py"
cp "$probe" "$W/sub/pkg/main.py"
: >"$W/sub/pkg/__init__.py"
cp "$probe" "$W/app/__main__.py"
# the program's own site hooks: they note the RANK they saw in the environment the program then reads
cat >"$W/site/sitecustomize.py" <<'EOF'
import os, sys
os.environ["SITE_SAW_RANK"] = os.environ.get("RANK", "none")
os.environ["SITE_SAW_PATH"] = repr(sys.path)
os.environ["SITE_SAW_ARGV"] = repr(getattr(sys, "argv", "none yet"))  # 3.6: set after site
EOF
cat >"$W/site/usercustomize.py" <<'EOF'
import os
os.environ["USER_SAW_RANK"] = os.environ.get("RANK", "none")
EOF
printf 'X = 1\n' >"$W/vendored/vendored_mod.py"

# job NAME MODE PY DIR [VAR=VALUE...] -- DDPLAUNCH-ARGS...: one run in DIR; attempt 0 goes on once the standby
# spoke (warm) or at once (cold)
job() {
    local name=$1 mode=$2 py=$3 dir=$4 out=$TMP/$1.$2 warm=no pid
    shift 4
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    [ "$mode" = warm ] && warm=yes
    rm -rf "$out"
    mkdir -p "$out"
    (cd "$dir" && env PROBE_OUT="$out" PROBE_GO="$out/go" PYTHON_EXEC="$py" "${envs[@]}" "$DDP" -v \
        --nproc-per-node 1 --max-restarts 1 --set restart.backoff=0 --rdzv-id conform --set restart.warm=$warm \
        --set restart.preload=json "$@" >"$out/stdout" 2>"$out/stderr") &
    pid=$!
    for _ in $(seq 1200); do
        [ -f "$out/a0.json" ] && { [ "$mode" = cold ] ||
            grep -qE 'standby interpreters? ready|warm restart off' "$out/stderr"; } && break
        sleep 0.05
    done
    touch "$out/go"
    wait "$pid" || { cat "$out/stderr"; fail "$name $mode: exit status $?"; }
    [ -f "$out/a1.json" ] || { cat "$out/stderr"; fail "$name $mode: attempt 1 saw nothing"; }
    if grep -E 'Traceback|get_native_id|Error in (site|user)customize' "$out/stdout" "$out/stderr"; then
        fail "$name $mode: a traceback"
    fi
}

# shape NAME WANT PY DIR [VAR=VALUE...] -- ARGS: cold and warm, compared; WANT: warm (attempt 1 started in the
# standby) or refused (one "warm restart off" line, attempt 1 cold)
shape() {
    local name=$1 want=$2
    shift 2
    job "$name" cold "$@"
    job "$name" warm "$@"
    local err=$TMP/$name.warm/stderr
    if [ "$want" = warm ]; then
        expect_grep 'attempt 1: rank 0 started warm' "$err"
    else
        expect_eq "$name: refused, in one line" "$(grep -c 'warm restart off' "$err")" 1
        grep 'started warm' "$err" && fail "$name: a refused shape started warm"
    fi
    $PY - "$TMP" "$name" <<'PYEOF' || fail "$name: the warm rank saw something the cold one did not (above)"
import json, sys
tmp, name = sys.argv[1], sys.argv[2]
def load(mode):
    out = "%s/%s.%s" % (tmp, name, mode)
    d = json.load(open(out + "/a1.json"))
    env = d["environ"]
    run = env["DDPLAUNCH_ATTEMPT_DIR"].rsplit("/attempt_", 1)[0]
    for k in ("MASTER_PORT", "NCCL_RAS_ADDR"):
        if k in env:
            env[k] = k
    return json.loads(json.dumps(d).replace(out, "OUT").replace(run, "RUNDIR"))
cold, warm = load("cold"), load("warm")
bad = [k for k in sorted(set(cold) | set(warm)) if cold.get(k) != warm.get(k)]
for k in bad:
    a, b = cold.get(k), warm.get(k)
    if isinstance(a, dict) and isinstance(b, dict):
        a, b = ({x: v for x, v in a.items() if b.get(x) != v}, {x: v for x, v in b.items() if a.get(x) != v})
    print("%s: %s: cold %r, warm %r" % (name, k, a, b))
sys.exit(1 if bad else 0)
PYEOF
    echo "$name: $want, the same view"
}

sys_py=/usr/bin/python3 # not a wrapper (pyenv's shim): that is refused (below)
shape script warm "$sys_py" "$W/sub" -- prog.py one "two words" ""
shape module warm "$sys_py" "$W/sub" -- -m pkg.main --flag
shape relative-workdir warm "$sys_py" "$W" -- --set job.workdir=sub prog.py
shape own-site-hooks warm "$sys_py" "$W/sub" PYTHONPATH="$W/site" -- prog.py
# the program's site hooks ran at the rank's start, with its RANK
expect_grep '"SITE_SAW_RANK": "0"' "$TMP/own-site-hooks.warm/a1.json"
expect_grep '"USER_SAW_RANK": "0"' "$TMP/own-site-hooks.warm/a1.json"
if "$sys_py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    shape safe-path warm "$sys_py" "$W/sub" PYTHONSAFEPATH=1 PYTHONPATH="$W/vendored:$W/site" -- prog.py
    $PY -c 'import json,sys; p=json.load(open(sys.argv[1]))["path"]; sys.exit(p[0] != sys.argv[2])' \
        "$TMP/safe-path.warm/a1.json" "$W/vendored" || fail "PYTHONSAFEPATH: the first PYTHONPATH entry is not first"
fi
# an environment entry with an empty name (execve takes "=odd"; the launcher is started with it), and odd values
DDP_REAL=$DDP
DDP=$TMP/ddp-odd
printf '#!/bin/bash\nexec %q -c %q "%s" "$@"\n' "$PY" \
    'import ctypes, os, sys; ctypes.CDLL(None).putenv(b"=odd"); os.execv(sys.argv[1], sys.argv[1:])' "$DDP_REAL" >"$DDP"
chmod +x "$DDP"
shape empty-name-env warm "$sys_py" "$W/sub" "ODD_NL=a
b" "ODD_EQ==x=" -- prog.py
DDP=$DDP_REAL
grep -q '"": "odd"' "$TMP/empty-name-env.cold/a1.json" && echo "empty-name-env: the rank has the entry"
# what python runs otherwise than as source text: refused, cold
(cd "$W" && "$sys_py" -m zipapp app -o "$W/sub/app.pyz")
"$sys_py" -c 'import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)' \
    "$W/sub/prog.py" "$W/sub/prog.pyc"
shape zipapp refused "$sys_py" "$W/sub" -- app.pyz
shape directory refused "$sys_py" "$W/sub" -- ../app
shape pyc refused "$sys_py" "$W/sub" -- prog.pyc
# an interpreter that is a script (pyenv's shim, a wrapper): it may set what python sees; refused, cold
mkdir -p "$W/bin"
printf '#!/bin/sh\nWRAPPED=1 exec %q "$@"\n' "$sys_py" >"$W/bin/python3"
chmod +x "$W/bin/python3"
shape wrapper refused "$W/bin/python3" "$W/sub" -- prog.py
expect_grep '"WRAPPED": "1"' "$TMP/wrapper.warm/a1.json"
# a --no-python program whose name starts with "python": never a standby
printf '#!/bin/sh\nexec %q %q "$@"\n' "$sys_py" "$W/sub/prog.py" >"$W/sub/python_job.sh"
chmod +x "$W/sub/python_job.sh"
job nopython warm "$sys_py" "$W/sub" -- --no-python ./python_job.sh
grep -E 'standby interpreter|started warm' "$TMP/nopython.warm/stderr" && fail "--no-python python_job.sh: a standby"
echo "nopython: no standby"

# every Python 3 installed: a script and a module, cold and warm
n=0
for py in ${DDP_PYTHONS:-/usr/bin/python3.[0-9]* /root/.pyenv/versions/3.*/bin/python3}; do
    [ -x "$py" ] && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 6))' 2>/dev/null || continue
    [ "$(readlink -f "$py")" = "$(readlink -f "$sys_py")" ] && continue
    v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    shape "py$v-script" warm "$py" "$W/sub" PYTHONPATH="$W/site" -- prog.py a
    shape "py$v-module" warm "$py" "$W/sub" -- -m pkg.main b
    n=$((n + 1))
done
echo "$n other Python versions checked"
echo "PASS"
