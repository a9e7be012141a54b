#!/usr/bin/env bash
# torchrun 2.9's --duplicate-stdout-filters and --duplicate-stderr-filters (issue 54: accepted, but did nothing):
# every line of every rank that holds one of the comma-separated substrings is also copied to the attempt's
# filtered_stdout.log / filtered_stderr.log in the run directory, each after "[rankR]: "; the console and the
# per-rank logs are unchanged; a restart gets its own copy; without a log_dir it is refused, naming the key.
. "$DDP_SRCDIR/tests/integration/lib.sh"
cd "$TMP" || fail "no TMP"
cat >w.sh <<'EOS'
#!/bin/sh
echo "step 1 loss 0.50"; echo "other line"; echo "val acc 0.9, loss 0.4"
echo "warning: slow input" >&2; echo "nothing here" >&2
[ "$RANK" = 0 ] && touch "printed.$DDPLAUNCH_ATTEMPT"
if [ "$DDPLAUNCH_ATTEMPT" = 0 ] && [ "$RANK" = 1 ]; then # fails once rank 0 has printed all
    for _ in $(seq 200); do [ -e printed.0 ] && exit 3; sleep 0.05; done
    exit 4
fi
exit 0
EOS
chmod +x w.sh
"$DDP" --nproc-per-node 2 --max-restarts 1 --log-dir logs --duplicate-stdout-filters 'loss,acc' \
    --duplicate_stderr_filters=warning --no-python ./w.sh >out 2>err
expect_eq "status (attempt 1 succeeds)" "$?" 0
run=$(ls -d logs/*/)
for a in 0 1; do
    f=${run}attempt_$a/filtered_stdout.log
    [ -f "$f" ] || { ls -R logs; fail "no $f"; }
    expect_eq "attempt $a: filtered stdout" "$(sort "$f" | paste -sd'|')" \
        "[rank0]: step 1 loss 0.50|[rank0]: val acc 0.9, loss 0.4|[rank1]: step 1 loss 0.50|[rank1]: val acc 0.9, loss 0.4"
    expect_eq "attempt $a: filtered stderr" "$(sort "${run}attempt_$a/filtered_stderr.log" | paste -sd'|')" \
        "[rank0]: warning: slow input|[rank1]: warning: slow input"
done
expect_eq "rank 0's own stdout.log unchanged" "$(cat "${run}attempt_0/0/stdout.log" | wc -l)" 3
expect_eq "console lines of 'other line'" "$(grep -c 'other line' out)" 4
# the key in a job spec works the same, with a pattern holding spaces
printf '[job]\nprogram = %s/w.sh\nnproc_per_node = 1\nlog_dir = logs2\ndup_stdout_filters = val acc\n' "$TMP" >job.ini
"$DDP" job.ini >out 2>err || { cat err; fail "the spec's key"; }
expect_eq "spec: filtered stdout" "$(cat logs2/*/attempt_0/filtered_stdout.log)" "[rank0]: val acc 0.9, loss 0.4"
# without a log_dir: refused before anything starts
"$DDP" --duplicate-stdout-filters loss --no-python /usr/bin/touch started >out 2>err
expect_eq "status without log_dir" "$?" 2
expect_grep "dup_stdout_filters and dup_stderr_filters copy lines to a file of the run: give log_dir" err
[ ! -e started ] || fail "a worker started"
echo ok
