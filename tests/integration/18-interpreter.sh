#!/usr/bin/env bash
# Issue 23 item 7: with PYTHON_EXEC unset and ddplaunch outside a venv, a script's workers run under the Python
# that the torchrun on PATH runs with (its #! line), as torchrun's own workers do (sys.executable); without a
# torchrun, python3 from PATH as an absolute path. `plan` prints the path and why. The same line runs under
# Debian's torchrun 1.13 and under ddplaunch, with the real torchrun and with a copy whose #! names another
# interpreter path.
. "$DDP_SRCDIR/tests/integration/lib.sh"
unset PYTHON_EXEC
cd "$TMP"
printf 'import sys\nprint("exe", sys.executable)\n' >"$TMP/s.py"

# both_run LABEL INTERPRETER: the same line under torchrun (Debian's 1.13 made usable on Python 3.11 by
# bench/torchrun.py, run by INTERPRETER as its #! line would) and under ddplaunch; each worker's sys.executable
# must match
both_run() {
    env -u OMP_NUM_THREADS "$2" "$DDP_SRCDIR/bench/torchrun.py" --monitor_interval 0.1 --master_port 0 --nproc_per_node 1 s.py \
        >"$TMP/tr.$1" 2>&1 || { cat "$TMP/tr.$1"; fail "$1: torchrun failed"; }
    "$DDP" --nproc_per_node 1 s.py >"$TMP/dl.$1" 2>&1 || { cat "$TMP/dl.$1"; fail "$1: ddplaunch failed"; }
    want=$(grep -o 'exe .*' "$TMP/tr.$1")
    [ -n "$want" ] || { cat "$TMP/tr.$1"; fail "$1: torchrun's worker printed no sys.executable"; }
    expect_eq "$1: worker's interpreter under ddplaunch" "$(grep -o 'exe .*' "$TMP/dl.$1")" "$want"
    echo "$1: $want"
}

command -v torchrun >/dev/null || fail "no torchrun on PATH (python3-torch is a test dependency)"
real=$(head -n 1 "$(command -v torchrun)" | sed 's/^#! *//; s/ .*//')
"$DDP" plan s.py >"$TMP/plan" 2>&1 || { cat "$TMP/plan"; fail "plan failed"; }
expect_grep "^Python: $real \(the interpreter of torchrun on PATH, its #! line\)$" "$TMP/plan"
both_run debian-torchrun "$real"

# a torchrun whose #! names another path to a python (here a symlink to the same one, so torch imports)
mkdir -p "$TMP/venv/bin" "$TMP/trbin"
ln -s "$real" "$TMP/venv/bin/python3"
{ echo "#!$TMP/venv/bin/python3"; tail -n +2 "$(command -v torchrun)"; } >"$TMP/trbin/torchrun"
chmod +x "$TMP/trbin/torchrun"
PATH=$TMP/trbin:$PATH both_run copied-torchrun "$TMP/venv/bin/python3"
PATH=$TMP/trbin:$PATH "$DDP" plan s.py >"$TMP/plan2" 2>&1 || { cat "$TMP/plan2"; fail "plan failed"; }
expect_grep "^Python: $TMP/venv/bin/python3 \(the interpreter of torchrun on PATH, its #! line\)$" "$TMP/plan2"
expect_grep "exe $TMP/venv/bin/python3$" "$TMP/dl.copied-torchrun"

# no torchrun on PATH: python3 from PATH, as an absolute path
mkdir "$TMP/pybin"
ln -s "$real" "$TMP/pybin/python3"
PATH=$TMP/pybin "$DDP" plan s.py >"$TMP/plan3" 2>&1 || { cat "$TMP/plan3"; fail "plan failed"; }
expect_grep "^Python: $TMP/pybin/python3 \(python3 from PATH\)$" "$TMP/plan3"
PATH=$TMP/pybin "$DDP" plan --json s.py >"$TMP/plan3.json" 2>&1 || fail "plan --json failed"
expect_eq "plan --json: python" "$($real -c 'import json,sys; print(json.load(open(sys.argv[1]))["python"])' "$TMP/plan3.json")" \
    "$TMP/pybin/python3"
# PYTHON_EXEC still wins
PYTHON_EXEC=$real PATH=$TMP/trbin:$PATH "$DDP" plan s.py >"$TMP/plan4" 2>&1 || fail "plan failed"
expect_grep "^Python: $real \(PYTHON_EXEC\)$" "$TMP/plan4"

# issue 43 item 5: workers whose python lacks torch end with class missing-module, whose hint names that
# interpreter and the module (what doctor says too), not "exit-1, read its traceback above".
printf '#!/bin/sh\nexec /usr/bin/python3 -S "$@"\n' >"$TMP/py-notorch"
chmod +x "$TMP/py-notorch"
printf 'import torch\n' >"$TMP/needs_torch.py"
PYTHON_EXEC=$TMP/py-notorch "$DDP" --nproc-per-node 2 "$TMP/needs_torch.py" >"$TMP/out" 2>"$TMP/err"
expect_eq "missing torch: status" "$?" 1
sed -n '/^Root Cause/,$p' "$TMP/err" >"$TMP/root"
expect_grep '^  class +: missing-module$' "$TMP/root"
expect_grep "^  hint +: the workers' Python $TMP/py-notorch has no module 'torch': install it for that python, or run with PYTHON_EXEC=" "$TMP/root"
echo "interpreter: ok"
