#!/usr/bin/env bash
# Drop-in for torchrun on one node (issue 16): the same command lines under Debian's torchrun (1.13, through
# bench/torchrun.py) and under ddplaunch; what a user sees must be the same, or differ as ddplaunch(1)'s
# DIFFERENCES FROM TORCHRUN says.
#   1 `--nproc_per_node 1 metrics.py > out.json`: the same bytes, valid JSON
#   2 '\r' progress updates reach the console as they are written, never merged with another rank's line
#   3 the workers' interpreter: PYTHON_EXEC, else the Python environment the launcher is installed in
#   5 --tee 0:3 --redirects 3: rank 0 on the console (and logged), the others only logged, with torchrun's
#     "[default0]:" prefix; --role rank --tee 3 (torchtitan's line, less --local-ranks-filter, not in 1.13):
#     "[rank0]:" (issue 23 item 3)
#   6 --virtual-local-rank: LOCAL_RANK=0 and one GPU each (torch 2.x flag, not in 1.13: checked as documented)
#   7 --event-log-handler accepted, PET_SHUTDOWN_TIMEOUT read, --no-python -m refused before anything
#     starts, TORCHELASTIC_RUN_ID without --rdzv-id (torchrun "none", ddplaunch a fresh id: documented)
. "$DDP_SRCDIR/tests/integration/lib.sh"
have_torch || skip "python3-torch is not installed"

# torchrun ARGS...: Debian's torchrun, made usable on Python 3.11, polling as often as torch 2.x does; its store
# binds a port the kernel picks when it binds (--master_port 0: no worker here uses MASTER_PORT).
torchrun() { env -u OMP_NUM_THREADS $PY "$DDP_SRCDIR/bench/torchrun.py" --monitor_interval 0.1 \
    --master_port 0 "$@"; }

# ---- 1: raw output when one worker's output reaches the console
cat >"$TMP/metrics.py" <<'EOS'
import json, os
print(json.dumps({"world": int(os.environ["WORLD_SIZE"]), "rank": int(os.environ["RANK"]), "loss": 0.25}))
print(json.dumps({"done": True}), end="")
EOS
# torchrun 1.13's --standalone is c10d on localhost:29400 with a fresh id: a fixed port that another torchrun on
# this host may hold. Its half spells out the same rendezvous on a port its store picks (issue 34 item 15).
torchrun --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint localhost:0 --rdzv_id standalone \
    "$TMP/metrics.py" >"$TMP/tr.json" 2>"$TMP/tr.err" ||
    { cat "$TMP/tr.err"; fail "torchrun failed"; }
"$DDP" --nproc_per_node=1 --standalone "$TMP/metrics.py" >"$TMP/dd.json" 2>"$TMP/dd.err" ||
    { cat "$TMP/dd.err"; fail "ddplaunch failed"; }
cmp "$TMP/tr.json" "$TMP/dd.json" || { od -c "$TMP/dd.json" | head; fail "> out.json: bytes differ from torchrun's"; }
$PY -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' "$TMP/dd.json" || fail "out.json is not JSON"
# issue 23 item 4: two workers, only rank 0 prints (metrics.py as most scripts write it): the same bytes
cat >"$TMP/metrics0.py" <<'EOS'
import json, os
if os.environ["RANK"] == "0":
    print(json.dumps({"world": int(os.environ["WORLD_SIZE"]), "loss": 0.25}))
    print(json.dumps({"done": True}), end="")
EOS
torchrun --nproc_per_node 2 "$TMP/metrics0.py" >"$TMP/tr2.json" 2>"$TMP/tr.err" ||
    { cat "$TMP/tr.err"; fail "torchrun failed"; }
"$DDP" --nproc-per-node 2 "$TMP/metrics0.py" >"$TMP/dd2.json" 2>"$TMP/dd.err" ||
    { cat "$TMP/dd.err"; fail "ddplaunch failed"; }
[ -s "$TMP/tr2.json" ] || fail "torchrun's out.json is empty"
cmp "$TMP/tr2.json" "$TMP/dd2.json" ||
    { od -c "$TMP/dd2.json" | head; fail "2 workers > out.json: bytes differ from torchrun's"; }
"$DDP" --nproc-per-node 2 --console lines "$TMP/metrics0.py" >"$TMP/dd2.json" 2>"$TMP/dd.err" ||
    { cat "$TMP/dd.err"; fail "ddplaunch --console lines failed"; }
expect_eq "--console lines > out.json" "$(head -c 9 "$TMP/dd2.json")" "[rank0]: "
echo "1: > out.json byte-identical ($(wc -c <"$TMP/dd.json") bytes; 2 workers $(wc -c <"$TMP/tr2.json") bytes)"

# ---- 2: progress bars. Each update carries the time it was written; the reader notes when it arrived.
cat >"$TMP/bar.py" <<'EOS'
import os, sys, time
r = os.environ["RANK"]
for i in range(4):
    os.write(2, ("%s|%d|%.6f\r" % (r, i, time.time())).encode())
    time.sleep(0.7)
os.write(2, b"\n")
EOS
cat >"$TMP/arrivals.py" <<'EOS'
import os, sys, time
# stdin: a launcher's stderr. Prints one line per '\r'-terminated update: its delay (arrival - write time),
# the time since the first update arrived, and the text; anything malformed is printed as BAD.
buf, t0 = b"", None
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        break
    now = time.time()
    buf += chunk
    while b"\r" in buf:
        seg, buf = buf.split(b"\r", 1)
        seg = seg.decode().lstrip("\n")
        text = seg.split(": ", 1)[1] if seg.startswith("[rank") else seg
        try:
            r, i, t = text.split("|")
        except ValueError:
            print("BAD %r" % seg)
            continue
        t0 = t0 or now
        print("%.3f %.3f %s %s %s" % (now - float(t), now - t0, r, i, seg.split("|")[0]))
EOS
torchrun --nproc_per_node 1 "$TMP/bar.py" 2>&1 >/dev/null | $PY "$TMP/arrivals.py" >"$TMP/tr.arr"
"$DDP" --nproc-per-node 1 "$TMP/bar.py" 2>&1 >/dev/null | $PY "$TMP/arrivals.py" >"$TMP/dd.arr"
"$DDP" --nproc-per-node 2 --console lines "$TMP/bar.py" 2>&1 >/dev/null | $PY "$TMP/arrivals.py" >"$TMP/dd2.arr"
for f in tr dd dd2; do
    want=4; [ $f = dd2 ] && want=8
    expect_eq "$f: updates seen" "$(grep -vc BAD "$TMP/$f.arr")" "$want"
    grep -q BAD "$TMP/$f.arr" && { cat "$TMP/$f.arr"; fail "$f: an update was merged or split"; }
    # each update arrives within 0.6 s of being written (one held until the newline waits 2.1-2.8 s; the next
    # update comes after 0.7 s), so a loaded machine's scheduling delay does not fail it
    awk '$1 > 0.6 { bad = 1 } END { exit bad }' "$TMP/$f.arr" || { cat "$TMP/$f.arr"; fail "$f: updates held back"; }
done
# with two ranks every update is its own prefixed segment
awk '$5 != "[rank" $3 "]:" || $6 != $3 { bad = 1 } END { exit bad }' "$TMP/dd2.arr" ||
    { cat "$TMP/dd2.arr"; fail "two ranks: updates not framed per rank"; }
echo "2: '\\r' updates: max delay torchrun $(sort -n "$TMP/tr.arr" | tail -1 | cut -d' ' -f1) s," \
    "ddplaunch $(sort -n "$TMP/dd.arr" | tail -1 | cut -d' ' -f1) s (1 rank), $(sort -n "$TMP/dd2.arr" | tail -1 |
    cut -d' ' -f1) s (2 ranks)"

# ---- 3: the interpreter. A venv (system site packages: torch) with ddplaunch installed into its bin/,
# used without activation, PATH without it: both launchers run the venv's python3.
cat >"$TMP/who.py" <<'EOS'
import os, sys
os.write(1, ("%s %s\n" % (sys.executable, sys.prefix)).encode())
EOS
$PY -m venv --system-site-packages --without-pip "$TMP/venv" || skip "python3 -m venv is not available"
cp "$DDP" "$TMP/venv/bin/ddplaunch"
clean_path=/usr/bin:/bin
env -u PYTHON_EXEC -u VIRTUAL_ENV PATH=$clean_path "$TMP/venv/bin/python3" "$DDP_SRCDIR/bench/torchrun.py" \
    --nproc_per_node 1 --master_port 0 "$TMP/who.py" >"$TMP/tr.py" 2>"$TMP/tr.err" ||
    { cat "$TMP/tr.err"; fail "torchrun in the venv failed"; }
env -u PYTHON_EXEC -u VIRTUAL_ENV PATH=$clean_path "$TMP/venv/bin/ddplaunch" "$TMP/who.py" >"$TMP/dd.py" \
    2>"$TMP/dd.err" || { cat "$TMP/dd.err"; fail "ddplaunch in the venv failed"; }
expect_eq "interpreter (venv, not activated)" "$(cat "$TMP/dd.py")" "$(cat "$TMP/tr.py")"
expect_eq "interpreter is the venv's" "$(cut -d' ' -f1 "$TMP/dd.py")" "$TMP/venv/bin/python3"
env -u PYTHON_EXEC PATH=$clean_path "$TMP/venv/bin/ddplaunch" plan "$TMP/who.py" >"$TMP/plan" 2>&1
expect_grep "^Python: $TMP/venv/bin/python3 \(the Python environment ddplaunch is installed in\)$" "$TMP/plan"
# PYTHON_EXEC wins over both
PYTHON_EXEC=/usr/bin/python3 PATH=$clean_path "$TMP/venv/bin/python3" "$DDP_SRCDIR/bench/torchrun.py" \
    --nproc_per_node 1 --master_port 0 "$TMP/who.py" >"$TMP/tr.py" 2>"$TMP/tr.err"
PYTHON_EXEC=/usr/bin/python3 PATH=$clean_path "$TMP/venv/bin/ddplaunch" "$TMP/who.py" >"$TMP/dd.py" 2>"$TMP/dd.err"
expect_eq "interpreter (PYTHON_EXEC)" "$(cat "$TMP/dd.py")" "$(cat "$TMP/tr.py")"
expect_eq "PYTHON_EXEC's interpreter" "$(cut -d' ' -f1 "$TMP/dd.py")" /usr/bin/python3
# not installed in an environment: the interpreter of torchrun on PATH (its #! line), else python3 from PATH
env -u PYTHON_EXEC PATH=$clean_path "$DDP" plan "$TMP/who.py" >"$TMP/plan" 2>&1
if [ -x /usr/bin/torchrun ]; then
    tr_py=$(sed -n '1s/^#! *//p' /usr/bin/torchrun | cut -d' ' -f1)
    expect_grep "^Python: $tr_py \(the interpreter of torchrun on PATH, its #! line\)$" "$TMP/plan"
else
    expect_grep "^Python: python3 \(python3 from PATH\)$" "$TMP/plan"
fi
echo "3: interpreter as torchrun's: $(cut -d' ' -f1 "$TMP/dd.py"), venv $TMP/venv/bin/python3"

# ---- 5: --tee 0:3 --redirects 3 (Megatron-LM's CI line)
cat >"$TMP/tee.py" <<'EOS'
import os
r = os.environ["LOCAL_RANK"]
os.write(1, ("test_one PASSED rank %s\n" % r).encode())
os.write(2, ("warning from rank %s\n" % r).encode())
EOS
torchrun --nproc_per_node 2 --tee 0:3 --redirects 3 --log_dir "$TMP/trl" "$TMP/tee.py" >"$TMP/tr.out" 2>"$TMP/tr.err" ||
    { cat "$TMP/tr.err"; fail "torchrun failed"; }
"$DDP" --nproc-per-node 2 --tee 0:3 --redirects 3 --log-dir "$TMP/ddl" "$TMP/tee.py" >"$TMP/dd.out" 2>"$TMP/dd.err" ||
    { cat "$TMP/dd.err"; fail "ddplaunch failed"; }
# torchrun prefixes its tee copies with "[default0]:", so does ddplaunch
expect_eq "console stdout" "$(cat "$TMP/dd.out")" "$(cat "$TMP/tr.out")"
expect_eq "console stdout" "$(cat "$TMP/dd.out")" "[default0]:test_one PASSED rank 0"
expect_eq "console stderr (worker lines)" "$(grep -v '^ddplaunch: ' "$TMP/dd.err")" \
    "$(grep '^\[default0\]:' "$TMP/tr.err")"
torchrun --nproc_per_node 1 --role rank --tee 3 "$TMP/tee.py" >"$TMP/tr.out" 2>"$TMP/tr.err" ||
    { cat "$TMP/tr.err"; fail "torchrun --role rank failed"; }
"$DDP" --nproc-per-node 2 --local-ranks-filter 0 --role rank --tee 3 "$TMP/tee.py" >"$TMP/dd.out" 2>"$TMP/dd.err" ||
    { cat "$TMP/dd.err"; fail "ddplaunch --role rank failed"; }
expect_eq "--role rank --tee 3 stdout" "$(cat "$TMP/dd.out")" "$(cat "$TMP/tr.out")"
expect_eq "--role rank --tee 3 stdout" "$(cat "$TMP/dd.out")" "[rank0]:test_one PASSED rank 0"
expect_eq "--role rank --tee 3 stderr" "$(grep -v '^ddplaunch: ' "$TMP/dd.err")" "$(grep '^\[rank0\]:' "$TMP/tr.err")"
for d in trl ddl; do
    expect_eq "$d: rank 1 stdout.log" "$(cat "$TMP"/$d/*/attempt_0/1/stdout.log)" "test_one PASSED rank 1"
    expect_eq "$d: rank 0 stderr.log" "$(cat "$TMP"/$d/*/attempt_0/0/stderr.log)" "warning from rank 0"
done
echo "5: --tee 0:3 --redirects 3: rank 0 shown with [default0]: and logged, rank 1 logged only, as torchrun;" \
    "--role rank --tee 3: [rank0]:"

# ---- 6: --virtual-local-rank on the 8-GPU fixture (torch 2.x: LOCAL_RANK=0, CUDA_VISIBLE_DEVICES=<its GPU>)
cat >"$TMP/env.sh" <<'EOS'
#!/bin/sh
echo "$RANK $LOCAL_RANK $CUDA_VISIBLE_DEVICES" >"$1/vlr.$RANK"
EOS
chmod +x "$TMP/env.sh"
"$DDP" --topology "$TOPO_DIR/2s-8gpu-aws-g4dn-metal-t4.xml" --numa-binding none --set gpus.lease=no \
    --nproc-per-node 3 --virtual-local-rank --no-python "$TMP/env.sh" "$TMP" >"$TMP/out" 2>"$TMP/err" ||
    { cat "$TMP/err"; fail "--virtual-local-rank failed"; }
cat "$TMP"/vlr.* >"$TMP/vlr"
expect_eq "LOCAL_RANK of every worker" "$(cut -d' ' -f2 "$TMP/vlr" | sort -u)" 0
expect_eq "one visible GPU each, all different" "$(cut -d' ' -f3 "$TMP/vlr" | grep -cE '^[0-9]+$' | tr -d ' ')/$(
    cut -d' ' -f3 "$TMP/vlr" | sort -u | wc -l | tr -d ' ')" "3/3"
echo "6: --virtual-local-rank: $(tr '\n' ';' <"$TMP/vlr")"

# ---- 7: flags and variables
"$DDP" --event-log-handler console --no-python --nproc-per-node 1 true || fail "--event-log-handler refused"
# --no-python with -m: refused before anything starts (torchrun: ValueError, exit 1; ddplaunch: exit 2)
torchrun --no_python -m "$TMP/env.sh" "$TMP" >"$TMP/out" 2>"$TMP/err"
trs=$?
"$DDP" --no-python -m "$TMP/env.sh" "$TMP/m" >"$TMP/out" 2>"$TMP/err"
expect_eq "--no-python -m status (torchrun $trs)" "$?" 2
expect_grep "no-python and --module" "$TMP/err"
[ "$trs" != 0 ] || fail "torchrun accepted --no_python -m"
[ -e "$TMP/m" ] && fail "a worker started"
# PET_SHUTDOWN_TIMEOUT: a worker that ignores SIGTERM is killed after 1 s, not 30
cat >"$TMP/stubborn.sh" <<'EOS'
#!/bin/sh
trap '' TERM
touch "$1/up"
while :; do sleep 0.1; done
EOS
chmod +x "$TMP/stubborn.sh"
PET_SHUTDOWN_TIMEOUT=1 "$DDP" --no-python "$TMP/stubborn.sh" "$TMP" >"$TMP/out" 2>"$TMP/err" &
pid=$!
for _ in $(seq 100); do [ -e "$TMP/up" ] && break; sleep 0.1; done
t0=$EPOCHREALTIME
kill -TERM $pid
wait $pid
t1=$EPOCHREALTIME
ms=$(( (${t1/./} - ${t0/./}) / 1000 ))
[ "$ms" -lt 8000 ] || fail "PET_SHUTDOWN_TIMEOUT=1: stopping took $ms ms"
[ "$ms" -ge 900 ] || fail "PET_SHUTDOWN_TIMEOUT=1: stopped after $ms ms, before the grace time"
# TORCHELASTIC_RUN_ID without --rdzv-id: torchrun "none", ddplaunch a fresh id (documented difference)
cat >"$TMP/runid.sh" <<'EOS'
#!/bin/sh
echo "$TORCHELASTIC_RUN_ID"
EOS
chmod +x "$TMP/runid.sh"
expect_eq "torchrun's run id" "$(torchrun --no_python "$TMP/runid.sh" 2>/dev/null)" none
id1=$("$DDP" --no-python "$TMP/runid.sh" 2>/dev/null)
id2=$("$DDP" --no-python "$TMP/runid.sh" 2>/dev/null)
[[ $id1 =~ ^[0-9a-f]{12}$ && $id1 != "$id2" ]] || fail "run ids '$id1' '$id2': want two different 12-digit hex ids"
expect_eq "--rdzv-id" "$("$DDP" --rdzv-id myjob --no-python "$TMP/runid.sh" 2>/dev/null)" myjob
echo "7: --event-log-handler ok; --no-python -m exit 2 (torchrun $trs); PET_SHUTDOWN_TIMEOUT=1 stop in $ms ms;" \
    "run ids $id1 $id2"
echo ok
