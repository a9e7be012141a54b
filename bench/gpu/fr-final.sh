#!/usr/bin/env bash
# Issue 38's part of the final device run (the 1-GPU kind: torch 2.11, gloo CPU ranks, NCCL-style waits through
# bench/gpu/fr_worker.py, 30-minute process-group timeout, every [timeout] key at its default for the culprit cases).
# At most two culprit cases run at a time (<= 16 ranks), so the load is a real job's, not 44 ranks importing torch:
#   pair1    pair groups [0,1] (one all_reduce a step), [2,3] + world; rank 3 skips its pair all_reduce at step 3
#   mesh2x2  init_device_mesh (2,2); rank 3 skips its second tp all_reduce at step 3
#   mesh2x4  init_device_mesh (2,4); rank 6 likewise
#   order    ranks 0-1 take groups 1, 2 in different orders from the start (a deadlock: nobody to blame)
#   order3   rank 1 swaps the order from step 3
#   dpslow   mesh (2,2); rank 3's data loading 40% slower (a straggler; ends normally)
#   dtype    pair [0,1]; rank 1 12 s late with float64 where rank 0 sent float32: gloo aborts rank 0; every rank's
#            recorder dump (FR_DUMP_DIR) is kept, with torch's analyzer run on the pickles
# The hangs add on_suspect = restart after 5 s, so the job stops at the live line and summary.json holds the
# post-mortem verdict. Beside them, from the start, one light job (1 NCCL rank on the GPU): NCCL RAS as ddplaunch
# queries it itself (watch/rasq.c, progress_ras.c ddp_progress_ras_ask): the rank stays in its data loading after 5 steps, with
# torch's recorder off (TORCH_FR_BUFFER_SIZE=0: no pg_status, so the sampler has no recorder line), so the
# suspicion asks RAS on the job's own NCCL_RAS_ADDR port; [timeout] suspect_setup/suspect_floor 10 s to fit, the
# job stopped (on_suspect = restart) 25 s into the suspicion, once RAS answered.
# Each line's time is taken when it reaches ddplaunch's stderr, counted from the job's launch.
# Everything (console, logs, summary.json, events, dumps, analyzer output) goes into ONE archive,
# $OUT/fr-final.tar.gz, and the console also into $OUT/fr-final.txt. The whole run stays under FR_BUDGET seconds
# (198): a case that would not fit is left out and said so; a running job is stopped at the budget (timeout).
# Usage (repository root on the GPU machine): OUT=... bash bench/gpu/fr-final.sh
# (FR_ONLY="ras dtype" runs only the cases named; FR_BUDGET=S another budget.)
# ddplaunch: $DDPLAUNCH, else .devrt/new/ddplaunch, ddplaunch beside this script, build/static/ddplaunch.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ddp=${DDPLAUNCH:-}
for c in "$root/.devrt/new/ddplaunch" "$here/ddplaunch" "$root/build/static/ddplaunch"; do
    [ -z "$ddp" ] && [ -x "$c" ] && ddp=$c
done
fw=${FR_WORKER:-$here/fr_worker.py}
out=${OUT:-fr-final-out}
budget=${FR_BUDGET:-198}
pack_s=10 # kept back for a stopped job's last seconds, the table and the archive
t_start=$(date +%s)
deadline=$((t_start + budget - pack_s))
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/fr-final.XXXXXX")
exec > >(tee "$work/console.txt") 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
[ -x "${ddp:-}" ] || { echo "fr-final: no ddplaunch (set DDPLAUNCH)"; exit 2; }
echo "fr-final: $ddp ($("$ddp" --version 2>&1 | head -1)); budget ${budget}s; work $work"
timeout 30 python3 -c 'import torch, sys, os; print("torch", torch.__version__, "python", sys.version.split()[0], "cpus", os.cpu_count(), "gpus", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else None)' &
vpid=$! # beside the cases, not before them

since() { python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 1))" "$1" "$2"; }

# runcase NAME WATCH NPROC NEED [env...]: one job; WATCH says which line is its live line (hang: the suspicion;
# crash: the verdict at the failure; straggler; ras). NEED: the seconds it needs; it is left out when fewer remain.
# Writes WORK/NAME.{t0,t1,rc,end,err,out,line} and the job's log dir WORK/NAME/.
runcase() {
    local name=$1 watch=$2 n=$3 need=$4 pat args=() pid t0 t1='' left cap rc
    shift 4
    [ -z "${FR_ONLY:-}" ] || [[ " $FR_ONLY " == *" $name "* ]] || return # FR_ONLY="ras dtype": only those
    left=$((deadline - $(date +%s)))
    if [ "$left" -lt "$need" ]; then
        echo "left out: $name needs ${need}s, ${left}s remained" | tee "$work/$name.skipped"
        return
    fi
    cap=$((left < 120 ? left : 120))
    case $watch in
    hang) pat="suspected hang" args=(--set timeout.on_suspect=restart --set timeout.on_suspect_after=5s) ;;
    crash) pat="flight recorder at the failure" ;;
    straggler) pat="straggler:" ;;
    ras) pat=": NCCL RAS: " args=(-v --set timeout.suspect_setup=10s --set timeout.suspect_floor=10s
        --set timeout.on_suspect=restart --set timeout.on_suspect_after=25s) ;; # after RAS's answer (<= 2 s
        # after the first suspicion line): the second verdict, the post-mortem one, may use it
    esac
    [ "$n" = 1 ] || args+=(--set gpus.select=none)
    t0=$(date +%s.%N)
    echo "$t0" >"$work/$name.t0"
    echo "start $name ($n rank$([ "$n" = 1 ] || echo s)) at +$(since "$t0" "$t_start") s"
    env "$@" timeout -k 4 "$cap" "$ddp" --nproc-per-node "$n" --set restart.shutdown_timeout=5s "${args[@]}" \
        --log-dir "$work/$name" "$fw" >"$work/$name.out" 2>"$work/$name.err" &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        if grep -qE "$pat" "$work/$name.err"; then
            t1=$(date +%s.%N)
            echo "$t1" >"$work/$name.t1"
            break
        fi
        sleep 0.2
    done
    wait "$pid"
    rc=$?
    [ -n "$t1" ] || { grep -qE "$pat" "$work/$name.err" && date +%s.%N >"$work/$name.t1"; }
    echo "$rc" >"$work/$name.rc"
    date +%s.%N >"$work/$name.end"
    grep -m1 -E "$pat" "$work/$name.err" >"$work/$name.line"
    echo "end $name: exit $rc after $(since "$(cat "$work/$name.end")" "$t0") s$([ -s "$work/$name.line" ] && echo ", line at +$(since "$(cat "$work/$name.t1")" "$t0") s" || echo ", NO line")"
    # torch's analyzer on dtype's pickles (post-mortem, by hand, as a user would); the hangs' dumps are only kept
    if [ "$name" = dtype ] && [ -d "$work/dumps/$name/pkl" ] && [ $((deadline - $(date +%s))) -gt 30 ]; then
        (cd "$work/dumps/$name" && timeout 25 python3 -m torch.distributed.flight_recorder.fr_trace pkl -p rank_ \
            >"$work/$name.fr_trace.txt" 2>&1)
    fi
}

d=$work/dumps
# the NCCL RAS job beside the first cases: one process, the only one on the GPU
runcase ras ras 1 50 FR_BACKEND=nccl FR_KIND=stuck FR_RANK=0 FR_STEPS=100 TORCH_FR_BUFFER_SIZE=0 \
    TORCH_NCCL_TRACE_BUFFER_SIZE=0 &
pids=("$vpid" $!) # waited for by id: a bare `wait` would wait for the tee of the console too
# two culprit cases at a time, in this order (the first free slot takes the next; pair1 last: pair2, the same
# pattern, was measured alone already)
cases=(
    "dpslow straggler 4 50 FR_KIND=dpslow FR_RANK=3 FR_STEPS=90"
    "mesh2x4 hang 8 50 FR_KIND=mesh FR_RANK=6 FR_DUMP_DIR=$d/mesh2x4"
    "mesh2x2 hang 4 50 FR_KIND=mesh FR_RANK=3 FR_DUMP_DIR=$d/mesh2x2"
    "dtype crash 4 30 FR_KIND=dtype FR_RANK=1 FR_PAIR01=1 FR_LATE=12 FR_STEPS=10 FR_DUMP_AFTER=5 FR_DUMP_DIR=$d/dtype"
    "order hang 4 50 FR_KIND=order FR_RANK=1 FR_AT=0 FR_DUMP_DIR=$d/order"
    "order3 hang 4 50 FR_KIND=order FR_RANK=1 FR_AT=3 FR_DUMP_DIR=$d/order3"
    "pair1 hang 4 50 FR_KIND=pair FR_RANK=3 FR_PAIR01=1 FR_DUMP_DIR=$d/pair1"
)
slots=(0 0)
for c in "${cases[@]}"; do
    while :; do
        free=-1
        for i in 0 1; do
            if [ "${slots[$i]}" = 0 ] || ! kill -0 "${slots[$i]}" 2>/dev/null; then
                free=$i
                break
            fi
        done
        [ "$free" -ge 0 ] && break
        sleep 0.5
    done
    # shellcheck disable=SC2086 # the case's words: name, watch, ranks, need, env
    runcase $c &
    slots[free]=$!
    pids+=($!)
    sleep 0.3
done
wait "${pids[@]}"

# ---- the results: each case's live line, the post-mortem verdict (summary.json), the table
python3 - "$work" <<'PY'
import glob, json, os, re, sys
work = sys.argv[1]
# case: (named rank expected, what else must be named)
expect = {"mesh2x4": (6, "tp group, #8"), "pair1": (3, "group 2 (ranks 2-3) #4"), "dtype": (1, "Double vs Float, group 1"),
          "order": (None, "deadlock, groups 1 and 2"), "order3": (1, "group 1 (ranks 0-1) #4"),
          "mesh2x2": (3, "tp group, #8"), "dpslow": (3, "straggler"), "ras": (None, "NCCL RAS line")}
def read(p):
    try:
        with open(p) as f:
            return f.read().strip()
    except OSError:
        return ""
rows = []
for name in expect:
    p = os.path.join(work, name)
    if os.path.exists(p + ".skipped"):
        rows.append((name, "LEFT OUT (time)", "-", "-", "-"))
        continue
    line = read(p + ".line")
    line = re.sub(r"^ddplaunch: (warning|error): ", "", line)
    t0, t1 = read(p + ".t0"), read(p + ".t1")
    at = "%.1f" % (float(t1) - float(t0)) if t0 and t1 else "-"
    named = "NO LINE"
    if line:
        m = re.search(r"suspected hang: (.*?); no progress", line)
        if m:
            named = re.sub(r" \(local [^)]*\)( at [^;]*)?", "", m.group(1))
            groups = re.findall(r"(#\d+) of group (\S+) \(ranks ([^;)]*)", line)
            if "ordering deadlock" in line:
                named += "; ordering deadlock, groups " + " and ".join(
                    "%s (ranks %s)" % (g, r) for g, r in dict((g, r) for _, g, r in groups).items())
            elif "shape mismatch" in line or "never entered" in line:
                if groups:
                    named += "; group %s (ranks %s) %s" % (groups[0][1], groups[0][2], groups[0][0])
        elif "straggler:" in line:
            m = re.search(r"straggler: (rank \d+)", line)
            named = "straggler " + (m.group(1) if m else "?")
        elif "flight recorder at the failure:" in line:
            m = re.search(r"at the failure: (rank \d+ sent .*? in \S+ #\d+ of group \S+ \(ranks [^)]*\))", line)
            named = m.group(1) if m else line[:120]
        else:
            named = line[line.find("NCCL RAS"):][:140]
    root = "-"
    runs = sorted(glob.glob(p + "/*/summary.json"))
    if runs:
        s = json.load(open(runs[0]))
        r = s.get("root_cause") or {}
        h = s.get("hang") or {}
        root = "rank %s %s" % (r.get("rank"), r.get("class")) if r else "none"
        if not r and "ordering deadlock" in (h.get("why") or ""):
            root = "none (ordering deadlock)"
        if name == "dpslow":
            root += "; stragglers %s" % [x.get("rank") for x in s.get("stragglers") or []]
        if h.get("chain"):
            root += "; chain %s" % "; ".join("%s wait in %s (ranks %s) #%s on %s" % (
                c.get("waiting"), c.get("group"), c.get("ranks"), c.get("seq"), c.get("on")) for c in h["chain"])
        root += "; exit %s" % s.get("exit_status")
    rows.append((name, named, at, root, "rank %s, %s" % expect[name] if expect[name][0] is not None
                 else expect[name][1]))
print()
print("== issue 38, final run: live lines (full in the archive)")
for name in expect:
    line = read(os.path.join(work, name + ".line"))
    if line:
        print("%s: %s" % (name, line[:350]))
    elif os.path.exists(os.path.join(work, name + ".err")):
        err = read(os.path.join(work, name + ".err")).splitlines()
        said = [l for l in err if "NCCL RAS did not answer" in l or "NCCL_RAS_ADDR" in l][:2]  # -v: why not
        print("%s: no line; %sits stderr ends: %s" % (name, "".join(l.strip()[:200] + "; " for l in said),
                                                     " / ".join(err[-3:])[:350]))
for l in read(os.path.join(work, "ras.out")).splitlines():
    if "NCCL_RAS_ADDR" in l:
        print("ras job:", l[:200])  # the port ddplaunch gave it (the query's)
for ev in glob.glob(os.path.join(work, "ras", "*", "events.jsonl")):
    for l in open(ev, errors="replace"):
        if '"ras"' in l:
            print("ras event:", l.strip()[:500])
print()
print("| case | named live | s after launch | post-mortem root cause | expected |")
print("| --- | --- | --- | --- | --- |")
for r in rows:
    print("| " + " | ".join(x.replace("|", "/")[:400] for x in r) + " |")
for t in sorted(glob.glob(os.path.join(work, "*.fr_trace.txt"))):
    txt = read(t).splitlines()
    print("torch's analyzer, %s: %s" % (os.path.basename(t).split(".")[0], (txt[-1] if txt else "")[:200]))
PY
echo "fr-final: took $(($(date +%s) - t_start)) s"

# ---- one archive of everything
sleep 0.5 # tee's last lines into console.txt
tar -C "$(dirname "$work")" -czf "$out/fr-final.tar.gz" "$(basename "$work")" 2>/dev/null
if [ "$(stat -c %s "$out/fr-final.tar.gz")" -gt $((15 * 1024 * 1024)) ]; then # the device returns 16 MiB a file
    tar -C "$(dirname "$work")" --exclude='stacks*' --exclude='*.pkl' -czf "$out/fr-final.tar.gz" \
        "$(basename "$work")" 2>/dev/null
    echo "fr-final: archive over 15 MiB, packed again without stacks files"
fi
echo "fr-final: archive $out/fr-final.tar.gz ($(stat -c %s "$out/fr-final.tar.gz") bytes, $(tar -tzf "$out/fr-final.tar.gz" | wc -l) entries)"
cp "$work/console.txt" "$out/fr-final.txt"
