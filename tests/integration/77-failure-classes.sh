#!/usr/bin/env bash
# Every failure class that ddplaunch(1)'s FAILURE CLASSES lists, produced by a real small job (issue 43, "Done
# when"): the class summary.json names (root_cause.class; for a timeout that blames no rank, the timeout event's
# class in events.jsonl) is the man page's name. A class listed there with no job here fails the test; a class
# this host cannot produce for real is run with a stand-in or skipped, and the test prints which and why. The
# jobs run in parallel (about 10 s on 2 CPUs).
. "$DDP_SRCDIR/tests/integration/lib.sh"
W=$DDP_SRCDIR/tests/integration/class_worker.py

# The classes on the section's tag lines (.B/.BR/.BI after .TP), "exit-N" for ".BI exit\- N".
mapfile -t CLASSES < <($PY - "$DDP_SRCDIR/man/ddplaunch.1" <<'EOF'
import re, sys
sec, tag = None, False
for line in open(sys.argv[1]):
    line = line.rstrip("\n").replace("\\-", "-")
    if line.startswith(".SH"):
        sec = line[4:].strip('" ')
    elif sec == "FAILURE CLASSES" and tag and re.match(r"\.B[IR]? ", line):
        words = [w for w in re.split(r'[ ",]+', line.split(" ", 1)[1]) if w]
        print("exit-N" if line.startswith(".BI") else "\n".join(words))
    tag = line.startswith(".TP")
EOF
)
[ "${#CLASSES[@]}" -ge 10 ] || fail "only ${#CLASSES[@]} classes read from the man page: ${CLASSES[*]}"

# A memory cgroup of 96 MiB for this test (cgroup v1 or v2), for a real OOM kill: sets CG to its directory
# (removed at exit), or fails saying why none could be made.
CG=
oom_cgroup() {
    local p d
    p=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
    if [ -n "$p" ]; then
        d=/sys/fs/cgroup/memory$p/ddpit-$$
        mkdir "$d" 2>/dev/null || { echo "cannot make a cgroup v1 memory group under $p"; return 1; }
        CG=$d
        echo $((96 << 20)) >"$d/memory.limit_in_bytes" || return 1
        [ ! -e "$d/memory.memsw.limit_in_bytes" ] || echo $((96 << 20)) >"$d/memory.memsw.limit_in_bytes" || return 1
        return 0
    fi
    p=$(sed -n 's/^0:://p' /proc/self/cgroup)
    d=/sys/fs/cgroup$p/ddpit-$$
    mkdir "$d" 2>/dev/null || { echo "cannot make a cgroup v2 group under '$p'"; return 1; }
    CG=$d
    [ -e "$d/memory.max" ] || { echo "no memory controller in cgroup v2 group '$p'"; return 1; }
    echo $((96 << 20)) >"$d/memory.max" || return 1
    [ ! -e "$d/memory.swap.max" ] || echo 0 >"$d/memory.swap.max"
}
# ... and a process can join it (cgroup v2 refuses some moves)
oom_cgroup_usable() {
    oom_cgroup && sh -c 'echo $$ >"$1/cgroup.procs"' sh "$CG" 2>&1 || {
        echo "cannot move a process into $CG"
        return 1
    }
}
trap '[ -z "$CG" ] || rmdir "$CG" 2>/dev/null; rm -rf "$TMP"' EXIT

# The jobs: CLASS -> ddplaunch's arguments. NOTES: how a class was produced where it is not the real thing.
declare -A JOB NOTE
JOB[exit-N]="$W usage" # argparse's usage error: exit-2
JOB[segfault]="$W segv"
JOB[abort]="$W abort"
JOB[signal]="$W usr1"
printf 'import no_such_module_ddplaunch_test\n' >"$TMP/imports.py"
JOB[missing-module]="$TMP/imports.py"
printf '#!/no/such/interpreter\n' >"$TMP/badinterp"
chmod +x "$TMP/badinterp"
JOB[exec-failed]="--no-python $TMP/badinterp" # exec fails (ENOENT for the interpreter): 127
JOB[local-rank-arg]="$W local-rank" # argparse requires --local_rank, which no launcher after torch 1.x passes
JOB[init-timeout]="--set timeout.init=2s $W silent"
JOB[wall-timeout]="--set timeout.wall=2s $W silent"
# rank 1 stops touching its heartbeat file after 2 beats
JOB[hang]="--nproc-per-node 2 --set timeout.stall=2s --no-python $DDP_BUILD/helpers/heartbeat 100 100 1"
if oom_cgroup_usable >"$TMP/no-cgroup" 2>&1; then
    printf '#!/bin/sh\necho $$ >"%s/cgroup.procs" || exit 99\nexec %s %s oom\n' "$CG" "$PY" "$W" >"$TMP/oom.sh"
    chmod +x "$TMP/oom.sh"
    JOB[killed]="--no-python $TMP/oom.sh"
else
    JOB[killed]="$W kill"
    NOTE[killed]="SIGKILL sent by the program itself, not the OOM killer: $(head -c 200 "$TMP/no-cgroup")"
fi
if have_torch; then
    JOB[collective-timeout]="--nproc-per-node 2 --set timeout.stacks=no $W collective"
    JOB[rendezvous-timeout]="$W rendezvous"
    JOB[port-in-use]="$W port"
    JOB[communication-error]="--nproc-per-node 2 $W peer-exits"
    JOB[cpu-oom]="$W cpu-oom"
    JOB[cuda-oom]="$W cuda-oom"
    NOTE[cuda-oom]="stand-in: no GPU here, the script raises torch's own torch.cuda.OutOfMemoryError"
    # rank 1 all_reduces float64 where the others send float32: gloo aborts a rank, and the survivors' recorders
    # name rank 1 (issue 38)
    JOB[collective-mismatch]="--nproc-per-node 4 --set env.FR_KIND=wdtype --set env.FR_RANK=1 --set env.FR_STEPS=8
        $DDP_SRCDIR/tests/integration/fake_recorder.py $DDP_SRCDIR/bench/gpu/fr_worker.py"
    NOTE[collective-mismatch]="stand-in recorder: torch 1.13 has none, fake_recorder.py answers as torch 2.11's"
else
    for c in collective-timeout rendezvous-timeout port-in-use communication-error cpu-oom cuda-oom collective-mismatch; do
        NOTE[$c]="skipped: no torch for $PY"
    done
fi

start_job() { # class
    mkdir "$TMP/$1"
    # shellcheck disable=SC2086 # the job's words, split as written above (no path here has a space)
    "$DDP" --log-dir "$TMP/$1/logs" ${JOB[$1]} >"$TMP/$1/out" 2>"$TMP/$1/err"
}
for c in "${CLASSES[@]}"; do
    [ -n "${JOB[$c]:-}${NOTE[$c]:-}" ] || fail "the man page lists class '$c' and this test has no job for it"
    [ -n "${JOB[$c]:-}" ] && [ "$c" != collective-mismatch ] || continue
    start_job "$c" &
done
wait
# The mismatch's verdict needs the survivors' recorders to answer within the 1 s the launcher waits at a failure
# (ddplaunch(1), "Mismatch at a failure"); beside the ten other torch jobs above on a 2-CPU host, gloo's abort
# cascade can take every survivor first. It runs on its own (it passes under stress-ng --cpu 6 so).
[ -z "${JOB[collective-mismatch]:-}" ] || start_job collective-mismatch

ran=0
for c in "${CLASSES[@]}"; do
    if [ -z "${JOB[$c]:-}" ]; then
        echo "$c: ${NOTE[$c]}"
        continue
    fi
    S=$(echo "$TMP/$c"/logs/*/summary.json)
    [ -f "$S" ] || { cat "$TMP/$c/err"; fail "$c: no summary.json"; }
    got=$(jq -r '.root_cause.class // empty' "$S") from=root_cause
    if [ -z "$got" ]; then
        got=$(jq -r 'select(.event == "timeout") | .class' "$(dirname "$S")/events.jsonl") from="timeout event"
    fi
    want=$c
    [ "$c" != exit-N ] || want=exit-2
    [ "$got" = "$want" ] || { cat "$TMP/$c/err"; fail "$c: the job's class is '$got' ($from), want '$want'"; }
    echo "$c: $got ($from, exit status $(jq -r .exit_status "$S"))${NOTE[$c]:+; ${NOTE[$c]}}"
    ran=$((ran + 1))
done
echo "ok: $ran of ${#CLASSES[@]} classes produced and named as the man page names them"
