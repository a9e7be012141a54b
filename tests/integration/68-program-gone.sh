#!/usr/bin/env bash
# Restarts (issue 24, item 9): a program deleted or replaced after the job started does not make the next
# restart fail with "cannot start": the launcher keeps the program it started open and restarts that one,
# saying once that the file at the path changed. An ELF binary (a copy of env) and a #! script. Issue 34 item 12:
# the same for ddplaunch's own binary (a package upgrade mid-job): shims start from the binary held open.
. "$DDP_SRCDIR/tests/integration/lib.sh"
mkdir -p "$TMP/bin"
common=(--no-python --nproc-per-node 1 --max-restarts 1 --set restart.backoff=0s)

# 1. an ELF program deleted by attempt 0: attempt 1 runs it anyway
cp /usr/bin/env "$TMP/bin/myenv"
"$DDP" "${common[@]}" "$TMP/bin/myenv" sh -c \
    'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then rm -f "$0"; exit 3; fi; echo "$TORCHELASTIC_RESTART_COUNT" >"$1"' \
    "$TMP/bin/myenv" "$TMP/elf.ok" >"$TMP/out" 2>"$TMP/err"
rc=$?
cat "$TMP/err"
[ ! -e "$TMP/bin/myenv" ] || fail "the program was not deleted (test precondition)"
expect_eq "status with a deleted ELF program" "$rc" 0
expect_eq "attempt that ran after the deletion" "$(cat "$TMP/elf.ok" 2>/dev/null)" 1
expect_grep "myenv was deleted since the job started: restarts run the program the job started with" "$TMP/err"

# 2. a #! script replaced by attempt 0 (a new file at its path that would fail): attempt 1 runs the original
cat >"$TMP/bin/prog" <<'EOS'
#!/bin/sh
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
    printf '#!/bin/sh\nexit 9\n' >"$1.new"; chmod 755 "$1.new"; mv -f "$1.new" "$1"; exit 3
fi
echo original >"$2"
EOS
chmod 755 "$TMP/bin/prog"
"$DDP" "${common[@]}" "$TMP/bin/prog" "$TMP/bin/prog" "$TMP/script.ok" >"$TMP/out" 2>"$TMP/err"
rc=$?
cat "$TMP/err"
grep -q 'exit 9' "$TMP/bin/prog" || fail "the script was not replaced (test precondition)"
expect_eq "status with a replaced script" "$rc" 0
expect_eq "what attempt 1 ran" "$(cat "$TMP/script.ok" 2>/dev/null)" original
expect_grep "prog was replaced since the job started" "$TMP/err"

# 3. untouched: restarts run it by name, no warning
cp /usr/bin/env "$TMP/bin/env2"
"$DDP" "${common[@]}" "$TMP/bin/env2" sh -c '[ "$TORCHELASTIC_RESTART_COUNT" = 1 ] || exit 3' >"$TMP/out" 2>"$TMP/err"
expect_eq "status, program untouched" "$?" 0
grep -q "since the job started" "$TMP/err" && fail "warned about an untouched program"
# 4. ddplaunch itself removed, then replaced, by attempt 0: attempt 1's shim still starts (from the binary the
# launcher opened at start), and the job succeeds
for how in rm replace; do
    cp "$DDP" "$TMP/bin/ddplaunch"
    rm -f "$TMP/self.ok"
    "$TMP/bin/ddplaunch" "${common[@]}" /bin/sh -c '
        if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
            rm -f "$1"
            if [ "$2" = replace ]; then printf "#!/bin/sh\nexit 9\n" >"$1"; chmod 755 "$1"; fi
            exit 3
        fi
        echo "$TORCHELASTIC_RESTART_COUNT" >"$3"' sh "$TMP/bin/ddplaunch" "$how" "$TMP/self.ok" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    cat "$TMP/err"
    case $how in
    rm) [ ! -e "$TMP/bin/ddplaunch" ] || fail "ddplaunch was not removed (test precondition)" ;;
    replace) grep -q 'exit 9' "$TMP/bin/ddplaunch" || fail "ddplaunch was not replaced (test precondition)" ;;
    esac
    expect_eq "status with ddplaunch's binary $how" "$rc" 0
    expect_eq "attempt that ran after ddplaunch's binary $how" "$(cat "$TMP/self.ok" 2>/dev/null)" 1
    grep -q "cannot start" "$TMP/err" && fail "a shim could not start after $how"
done
echo ok
