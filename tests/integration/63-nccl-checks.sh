#!/usr/bin/env bash
# NCCL/torch variables are checked before anything starts, and presets reach the workers.
. "$DDP_SRCDIR/tests/integration/lib.sh"
TRUE=/bin/true

# An impossible value in a job spec: exit 2, file:line, the rule, nothing started.
cat >"$TMP/job.ini" <<EOS
[job]
program = $HELPERS/dumpenv
args = $TMP
nproc_per_node = 1

[nccl]
NCCL_IB_TIMEOUT = 600
EOS
"$DDP" "$TMP/job.ini" >"$TMP/out" 2>"$TMP/err"
expect_eq "status for NCCL_IB_TIMEOUT=600" "$?" 2
expect_grep "^ddplaunch: (error: )?$TMP/job.ini:7: NCCL_IB_TIMEOUT=600: expected an exponent 0-31 \(4.096 us \* 2\^v" "$TMP/err"
[ -e "$TMP/env.0" ] && fail "a worker started although the spec was refused"

# The same from the command line and from the inherited environment.
"$DDP" --nproc-per-node 1 --set nccl.NCCL_NVLS_ENABLE=5 --no-python "$TRUE" >"$TMP/out" 2>"$TMP/err"
expect_eq "status for --set NCCL_NVLS_ENABLE=5" "$?" 2
expect_grep 'NCCL_NVLS_ENABLE=5: expected 0, 1 or 2' "$TMP/err"
NCCL_DEBUG=FOO "$DDP" --nproc-per-node 1 --no-python "$TRUE" >"$TMP/out" 2>"$TMP/err"
expect_eq "status for NCCL_DEBUG=FOO" "$?" 2
expect_grep 'environment: NCCL_DEBUG=FOO: expected VERSION, WARN, INFO, ABORT or TRACE' "$TMP/err"
NCCL_P2P_DISABLE=true "$DDP" --nproc-per-node 1 --no-python "$TRUE" >"$TMP/out" 2>"$TMP/err"
expect_eq "status for NCCL_P2P_DISABLE=true" "$?" 2
expect_grep "counts as 0" "$TMP/err"

# Variables that do not exist, deprecated and misspelt names: warnings, and the job runs.
NCCL_SOCKET_TIMEOUT=600 NCCL_BLOCKING_WAIT=1 NCCL_IB_TIMOUT=22 \
    "$DDP" --nproc-per-node 1 --no-python "$TRUE" >"$TMP/out" 2>"$TMP/err"
expect_eq "status with warnings" "$?" 0
expect_grep 'warning: environment: NCCL_SOCKET_TIMEOUT=600: NCCL has no such variable, so this has no effect' "$TMP/err"
expect_grep 'warning: environment: NCCL_BLOCKING_WAIT=1: deprecated name of TORCH_NCCL_BLOCKING_WAIT' "$TMP/err"
expect_grep 'warning: environment: NCCL_IB_TIMOUT=22: .*did you mean NCCL_IB_TIMEOUT\?' "$TMP/err"

# An explicit [nccl] key replaces a bad inherited value: no error.
NCCL_DEBUG=FOO "$DDP" --nproc-per-node 1 --set nccl.NCCL_DEBUG=WARN --no-python "$HELPERS/dumpenv" "$TMP" \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status with the key overriding the environment" "$?" 0
expect_grep '^NCCL_DEBUG=WARN$' "$TMP/env.0"

# preset = debug with a log dir: per-rank NCCL debug files and flight-recorder dumps in the attempt directory;
# an explicit key beats the preset.
rm -f "$TMP"/env.*
"$DDP" --nproc-per-node 2 --log-dir "$TMP/logs" --set nccl.preset=debug --set nccl.NCCL_DEBUG_SUBSYS=INIT \
    --no-python "$HELPERS/dumpenv" "$TMP" >"$TMP/out" 2>"$TMP/err"
expect_eq "status with preset debug" "$?" 0
for r in 0 1; do
    expect_grep '^NCCL_DEBUG=INFO$' "$TMP/env.$r"
    expect_grep '^NCCL_DEBUG_SUBSYS=INIT$' "$TMP/env.$r"
    expect_grep "^NCCL_DEBUG_FILE=$TMP/logs/.*attempt_0/nccl\.rank$r\.%h\.%p\.log$" "$TMP/env.$r"
    expect_grep '^TORCH_NCCL_DUMP_ON_TIMEOUT=1$' "$TMP/env.$r"
    expect_grep "^TORCH_NCCL_DEBUG_INFO_TEMP_FILE=$TMP/logs/.*attempt_0/nccl_trace_rank_$" "$TMP/env.$r"
    expect_grep "^TORCH_FR_DUMP_TEMP_FILE=$TMP/logs/.*attempt_0/nccl_trace_rank_$" "$TMP/env.$r"
    expect_grep '^TORCH_NCCL_TRACE_BUFFER_SIZE=2000$' "$TMP/env.$r"
done
# The attempt directory the files point at exists.
d=$(sed -n 's/^NCCL_DEBUG_FILE=\(.*\)\/nccl\.rank0.*/\1/p' "$TMP/env.0")
[ -d "$d" ] || fail "attempt directory $d does not exist"

# preset = robust; a misspelt preset is refused with a suggestion.
rm -f "$TMP"/env.*
"$DDP" --nproc-per-node 1 --set nccl.preset=robust --no-python "$HELPERS/dumpenv" "$TMP" >"$TMP/out" 2>"$TMP/err"
expect_eq "status with preset robust" "$?" 0
expect_grep '^TORCH_NCCL_ASYNC_ERROR_HANDLING=1$' "$TMP/env.0"
expect_grep '^NCCL_ASYNC_ERROR_HANDLING=1$' "$TMP/env.0"
expect_grep '^TORCH_NCCL_ENABLE_MONITORING=1$' "$TMP/env.0"
grep -q 'warning' "$TMP/err" && { cat "$TMP/err"; fail "the robust preset warns about itself"; }
"$DDP" --nproc-per-node 1 --set nccl.preset=debgu --no-python "$TRUE" >"$TMP/out" 2>"$TMP/err"
expect_eq "status for preset debgu" "$?" 2
expect_grep "preset = debgu: unknown preset \(did you mean 'debug'\?" "$TMP/err"

# With real torch 1.13 (gloo), TORCH_DISTRIBUTED_DEBUG from the debug preset is accepted by torch itself.
if have_torch; then
    "$DDP" --nproc-per-node 2 --set nccl.preset=debug --no-python "$PY" -c \
        'import torch.distributed as d; d.init_process_group("gloo"); d.barrier(); print("ok", d.get_rank())' \
        >"$TMP/out" 2>"$TMP/err"
    expect_eq "status of a gloo job with preset debug" "$?" 0
    expect_eq "ranks ok" "$(grep -c 'ok [01]' "$TMP/out")" 2
fi
echo ok
