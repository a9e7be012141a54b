#!/usr/bin/env bash
# --log-dir where clusters and containers keep logs (issue 54, trap 2): root in a container, with a workspace
# bind-mounted from uid 1000, is refused as before but the refusal names the way to accept it (--trust-log-dir,
# [job] trust_log_dir), which works; a user's own 0755 directory inside a setgid 2775 group project directory is
# accepted without it (the run directory is made 0700 there), while the 2775 directory itself, and a 0777 one,
# are still refused. Test 46 keeps the cases root must refuse.
. "$DDP_SRCDIR/tests/integration/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to create a second user (useradd)"
command -v runuser >/dev/null || fail "runuser not installed"
U=ddptest-victim G=ddptest-proj
id -u "$U" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$U" || fail "useradd failed"
getent group "$G" >/dev/null || groupadd -r "$G" || fail "groupadd failed"
usermod -a -G "$G" "$U"
uid=$(id -u "$U")
chmod 711 "$TMP"

# 1. Root and a workspace of uid 1000 (a container's bind mount): refused naming the flag; accepted with it.
mkdir -m 755 "$TMP/workspace"
chown 1000:1000 "$TMP/workspace"
"$DDP" --no-python --nproc-per-node 1 --log-dir "$TMP/workspace/logs" /usr/bin/touch "$TMP/started" \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "root in uid 1000's workspace" "$?" 2
cat "$TMP/err"
expect_grep "'workspace' belongs to uid 1000.*to accept it, pass --trust-log-dir \(or \[job\] trust_log_dir = yes\)" \
    "$TMP/err"
[ ! -e "$TMP/started" ] || fail "a worker started"
"$DDP" --no-python --nproc-per-node 1 --log-dir "$TMP/workspace/logs" --trust-log-dir /bin/sh -c \
    'echo "$TORCHELASTIC_ERROR_FILE" >"$0"' "$TMP/ef" >"$TMP/out" 2>"$TMP/err"
expect_eq "with --trust-log-dir" "$?" 0
case $(cat "$TMP/ef") in "$TMP/workspace/logs/"*/attempt_0/0/error.json) ;; *) fail "error file $(cat "$TMP/ef")" ;; esac
printf '[job]\nprogram = /bin/true\nnproc_per_node = 1\nlog_dir = %s\ntrust_log_dir = Yes\n' "$TMP/workspace/logs2" \
    >"$TMP/job.ini"
"$DDP" "$TMP/job.ini" >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err"; fail "[job] trust_log_dir = Yes"; }
[ -d "$TMP/workspace/logs2" ] || fail "no run directory under [job] trust_log_dir"

# 2. A setgid group project directory (2775, root:proj) holding the user's own 0755 directory: accepted, the run
# directory private; the project directory itself is refused (a group member could rename the run directory).
mkdir -m 2775 "$TMP/proj"
chgrp "$G" "$TMP/proj"
chmod 2775 "$TMP/proj"
runuser -u "$U" -- mkdir -m 755 "$TMP/proj/me"
mkdir -m 755 "$TMP/bin"
cp "$DDP" "$TMP/bin/"
chmod 755 "$TMP/bin/ddplaunch"
as_u() { (cd "$TMP/bin" && env -u XDG_RUNTIME_DIR DDPLAUNCH_LOCK_DIR="$TMP/bin/locks" runuser -u "$U" -- "$@"); }
mkdir -m 1777 "$TMP/bin/locks"
as_u ./ddplaunch --no-python --nproc-per-node 1 --log-dir "$TMP/proj/me/logs" /bin/true >"$TMP/out" 2>"$TMP/err"
rc=$?
cat "$TMP/err"
expect_eq "the user's own directory in a 2775 project directory" "$rc" 0
run=$(ls -d "$TMP"/proj/me/logs/*/)
mode=$(stat -c '%a' "$run")
expect_eq "run directory owner and mode (setgid inherited, private)" "$(stat -c '%u' "$run") ${mode: -3}" "$uid 700"
as_u ./ddplaunch --no-python --nproc-per-node 1 --log-dir "$TMP/proj/me" /bin/true >"$TMP/out" 2>"$TMP/err" ||
    { cat "$TMP/err"; fail "log_dir = the user's own directory itself"; }
as_u ./ddplaunch --no-python --nproc-per-node 1 --log-dir "$TMP/proj" /usr/bin/touch "$TMP/proj/me/started" \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "the 2775 project directory itself" "$?" 2
expect_grep "'proj' has mode 2775.*--trust-log-dir" "$TMP/err"
[ ! -e "$TMP/proj/me/started" ] || fail "a worker started"
# ... and a directory everybody may write stays refused, even with one of the user's own below it.
mkdir -m 777 "$TMP/open"
chmod 777 "$TMP/open"
runuser -u "$U" -- mkdir -m 755 "$TMP/open/me"
as_u ./ddplaunch --no-python --nproc-per-node 1 --log-dir "$TMP/open/me" /bin/true >"$TMP/out" 2>"$TMP/err"
expect_eq "a 0777 ancestor" "$?" 2
expect_grep "'open' has mode 0777" "$TMP/err"
echo ok
