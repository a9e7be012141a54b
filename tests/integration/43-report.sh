#!/usr/bin/env bash
# `ddplaunch report` (issue 18): the timeline of a run from its records, as text and as an SVG that a real browser
# (headless Chromium) draws: the culprit of a hang in red, the ranks ddplaunch stopped in grey. The hang here needs
# no torch: ranks 0 and 2 wait in all_reduce of a stand-in distributed_c10d.py, rank 1 is stuck in load_batch, the
# silence (heartbeat = output) ends the attempt, the stacks name rank 1.
. "$DDP_SRCDIR/tests/integration/lib.sh"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
mkdir -p "$TMP/w"
cat >"$TMP/w/distributed_c10d.py" <<'EOS'
import time
def all_reduce(x):
    time.sleep(3600)
EOS
cat >"$TMP/w/worker.py" <<'EOS'
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import distributed_c10d
def load_batch():
    time.sleep(3600)
print("step 0", flush=True)
if os.environ["RANK"] == "1":
    load_batch()
distributed_c10d.all_reduce(1)
EOS
"$DDP" --nproc-per-node 3 --log-dir "$TMP/logs" --set timeout.heartbeat=output --set timeout.init=60s \
    --set timeout.stall=2s "$TMP/w/worker.py" >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 124
expect_grep '^Hang verdict \(high confidence\): rank 1 .* at worker.py:5 in load_batch' "$TMP/err"

"$DDP" report --svg "$TMP/t.svg" "$TMP/logs" >"$TMP/report" 2>"$TMP/report.err"
expect_eq "report status" "$?" 0
cat "$TMP/report"
expect_grep '^job worker.py on .*: timeout, exit status 124, 1 attempt' "$TMP/report"
expect_grep '^  1 +\+[0-9.]+s +\+[0-9.]+s +\+[0-9.]+s +abort \(SIGABRT\)  CULPRIT$' "$TMP/report"
expect_grep '^         at worker.py:5 in load_batch$' "$TMP/report"
expect_grep '^  0 +\+[0-9.]+s +\+[0-9.]+s +\+[0-9.]+s +abort \(SIGABRT\)$' "$TMP/report"
expect_grep '^  \+[0-9.]+s timeout: no rank wrote any output for 2s \(output\)$' "$TMP/report"
expect_grep '^  \+[0-9.]+s decision: exit(: | with status )[^ ]' "$TMP/report"
expect_grep '^  \+[0-9.]+s hang: verdict \(high confidence\): ' "$TMP/report"
expect_eq "svg lanes" "$(grep -c '<rect class="rank"' "$TMP/t.svg")" 3
expect_eq "culprit lane" "$(grep -c '<rect class="rank" data-rank="1" .*fill="#d32f2f"' "$TMP/t.svg")" 1
$PY -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$TMP/t.svg" || fail "the SVG is not well-formed XML"

# An ordinary failure (issue 23 item 12): the first rank to fail is marked as the root cause, in text and SVG.
EXITN_RANK=1 "$DDP" --no-python --nproc-per-node 3 --log-dir "$TMP/logs2" "$HELPERS/exitn" 3 "boom" \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "ordinary failure status" "$?" 3
"$DDP" report --svg "$TMP/t2.svg" "$TMP/logs2" >"$TMP/report2" 2>"$TMP/report.err" || fail "report of a failure"
expect_grep '^  1 +\+[0-9.]+s +\+?[0-9.s-]+ +\+[0-9.]+s +exit-3 \(exit 3\)  ROOT CAUSE$' "$TMP/report2"
expect_eq "one root cause" "$(grep -c 'ROOT CAUSE' "$TMP/report2")" 1
expect_grep '^  \+[0-9.]+s decision: exit(: | with status )[^ ]' "$TMP/report2"
expect_eq "root cause lane" "$(grep -c '<rect class="rank" data-rank="1" .*fill="#e65100"' "$TMP/t2.svg")" 1
expect_grep '>rank 1 \(root cause\)</text>' "$TMP/t2.svg"

# A run directory works as well as its log_dir; no records is exit 2 with one line.
"$DDP" report "$(echo "$TMP"/logs/*/)" >/dev/null 2>&1 || fail "report RUN_DIR failed"
"$DDP" report "$TMP/w" >/dev/null 2>"$TMP/e2"
expect_eq "no records" "$?" 2
expect_grep "^ddplaunch: report: $TMP/w: no events.jsonl" "$TMP/e2"

# The browser: Chromium draws the SVG; the screenshot has the red culprit bar and the grey stopped ones.
[ -n "$CHROMIUM" ] || skip "report text checked; no chromium for the SVG check"
prof=$(mktemp -d "$TMP/chromium.XXXXXX")
timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$prof" --window-size=1180,330 \
    --screenshot="$TMP/t.png" "file://$TMP/t.svg" >"$TMP/chromium.log" 2>&1
[ -s "$TMP/t.png" ] || { cat "$TMP/chromium.log"; fail "chromium wrote no screenshot"; }
read -r red grey < <($PY "$DDP_SRCDIR/tests/integration/png_colours.py" "$TMP/t.png" d32f2f 9e9e9e | tr '\n' ' ')
echo "screenshot: $red red and $grey grey pixels"
[ "$red" -gt 3000 ] || fail "the culprit's red bar is not in the screenshot ($red pixels)"
[ "$grey" -gt 6000 ] || fail "the two stopped ranks' grey bars are not in the screenshot ($grey pixels)"

# issue 43 item 12: every label of the SVG's legend is in the man page's words for --svg.
"$DDP" report --svg "$TMP/legend.svg" "$FIXTURES/golden/runs/hang" >/dev/null 2>&1 || fail "report --svg on the golden hang run"
sed -n '/^also draws it as a standalone SVG image/,/^output)/p' "$DDP_SRCDIR/man/ddplaunch.1" | tr '\n' ' ' >"$TMP/man.svg"
n=0
while IFS= read -r label; do
    n=$((n + 1))
    grep -qF "$label" "$TMP/man.svg" || fail "the man page's --svg paragraph leaves out the legend's '$label'"
done < <(grep -o '<text x="[0-9]*" y="45">[^<|]*</text>' "$TMP/legend.svg" | sed 's/<[^>]*>//g')
[ "$n" -ge 6 ] || fail "precondition: $n legend labels in the SVG"
echo ok
