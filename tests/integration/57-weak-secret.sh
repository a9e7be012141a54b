#!/usr/bin/env bash
# Job secrets (issue 24, item 11): a weak secret (16 dictionary characters) is refused with a generator offered,
# a fair one warned about; and whoever squats the control endpoint (a real second user here) receives a
# handshake keyed by Argon2id of the secret, not by the secret itself, so each offline guess costs an Argon2id
# (64 MiB) instead of one HMAC: her dictionary, which holds the true secret, finds nothing with HMAC alone.
. "$DDP_SRCDIR/tests/integration/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to create a second user (useradd)"
command -v runuser >/dev/null || fail "runuser not installed"
M=ddptest-mallory
id -u "$M" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$M" || fail "useradd failed"
chmod 711 "$TMP"
export DDPLAUNCH_LOCK_DIR=$TMP/pub/locks
hold_port port 2 # mallory listens on port + 1, node 0's control port (lib.sh hold_port)
node1() { # node1 SECRET: node 1 of a 2-node job whose node 0 would be at 127.0.0.1:$port
    DDPLAUNCH_JOB_SECRET=$1 timeout 60 "$DDP" --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port $port \
        --rdzv-id job57 --set job.join_timeout=3s --nproc-per-node 1 --no-python /bin/true
}

# 0. Text from others: Mallory runs a job and rewrites her ps file (job-PID.json: hers, believed while her job
# holds its lock) with a right-to-left override (U+202E) and a C1 CSI (U+009B) in the job name; neither reaches
# root's terminal from `ddplaunch ps` (table or --json), where they show as '?' or as \u escapes.
mkdir -m 1777 "$TMP/pub"
cp "$DDP" "$TMP/pub/ddplaunch"
chmod 755 "$TMP/pub/ddplaunch"
runuser -u "$M" -- env DDPLAUNCH_LOCK_DIR="$DDPLAUNCH_LOCK_DIR" XDG_RUNTIME_DIR= "$TMP/pub/ddplaunch" \
    --no-python --nproc-per-node 1 --set job.name=plain /bin/sleep 30 >"$TMP/m.out" 2>&1 &
mjob=$!
for _ in $(seq 100); do ls "$DDPLAUNCH_LOCK_DIR"/job-*.json >/dev/null 2>&1 && break; sleep 0.1; done
mfile=$(ls "$DDPLAUNCH_LOCK_DIR"/job-*.json 2>/dev/null | head -1)
[ -n "$mfile" ] || { cat "$TMP/m.out"; fail "mallory's job published no ps file (test precondition)"; }
runuser -u "$M" -- $PY -c '
import json, sys
o = json.load(open(sys.argv[1])); o["job"] = "evil\u202egpj.exe\u009b31m\u2066x"
open(sys.argv[1], "w").write(json.dumps(o))' "$mfile"
"$DDP" ps >"$TMP/ps" 2>&1
"$DDP" ps --json >"$TMP/ps.json" 2>&1
cat "$TMP/ps"
grep -q "$M" "$TMP/ps" || fail "mallory's job is not listed (test precondition)"
for f in "$TMP/ps" "$TMP/ps.json"; do
    grep -qaP '\xe2\x80\xae|\xc2\x9b|\x9b|\xe2\x81\xa6' "$f" && fail "U+202E, U+2066 or 0x9b reached the terminal through $(basename "$f")"
done
expect_grep 'evil\?+gpj\.exe\?+31m' "$TMP/ps"
kill "$mjob" 2>/dev/null
wait "$mjob" 2>/dev/null

# 1. weak: refused before anything starts, with a generator offered
node1 correcthorsebatt >"$TMP/out" 2>"$TMP/err"
expect_eq "status with a weak secret" "$?" 2
cat "$TMP/err"
expect_grep "too easy to guess \(about [0-9]+ bits" "$TMP/err"
expect_grep "openssl rand -hex 32" "$TMP/err"
grep -q correcthorsebatt "$TMP/err" && fail "the secret was printed"

# 2. Mallory listens where node 0's control channel would be, greets node 1 as a coordinator would and keeps
# the JOIN it sends (its MAC is all she needs to guess offline).
mkfifo "$TMP/ready"
chmod 666 "$TMP/ready"
runuser -u "$M" -- $PY -c '
import socket, struct, sys
port, ready = int(sys.argv[1]), sys.argv[2]
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen(1); s.settimeout(30)
open(ready, "w").write("ok\n")
c, _ = s.accept(); c.settimeout(10)
hello = b"DDPC2 HELLO " + b"5" * 32
c.sendall(struct.pack(">I", len(hello)) + hello)
buf = b""
while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
    d = c.recv(4096)
    if not d: break
    buf += d
sys.stdout.write(buf[4:].decode())' $((port + 1)) "$TMP/ready" >"$TMP/join" &
squat=$!
read -r -t 20 _ <>"$TMP/ready" || fail "the squatter did not start"
secret=spec-file-secret-0123456789 # fair: warned about, used
node1 "$secret" >"$TMP/out" 2>"$TMP/err"
kill $squat 2>/dev/null; wait $squat
cat "$TMP/err"
expect_grep "\[job\] secret is weak \(about [0-9]+ bits" "$TMP/err"
join=$(cat "$TMP/join")
echo "mallory received: $join"
case $join in "DDPC2 JOIN 1 1 "*) ;; *) fail "no JOIN reached the squatter (test precondition)" ;; esac

# 3. Her offline guess: HMAC-SHA256 of the handshake under each candidate, the true secret among them; the job
# identity is BLAKE2b of the run id and command, which she can guess too (several spellings tried).
found=$($PY -c '
import hashlib, hmac, sys
join, secret = sys.argv[1].split(), sys.argv[2]
node, nproc, host, cnonce, mac = join[2], join[3], join[4], join[5], join[6]
words = ["password", "letmein", "secret", secret, "spec-file-secret-0123456788"]
argvs = [["program /bin/true"], ["/bin/true"], ["program", "/bin/true"]]
jobs = [hashlib.blake2b(b"".join(x.encode() + b"\0" for x in ["job57"] + a), digest_size=32).hexdigest() for a in argvs]
for w in words:
    for job in jobs:
        m = "\n".join(["join", job, "5" * 32, cnonce, "%s\n%s\n%s" % (node, nproc, host)])
        if hmac.new(w.encode(), m.encode(), hashlib.sha256).hexdigest() == mac:
            print(w)
' "$join" "$secret")
[ -z "$found" ] || fail "the squatter's dictionary found the secret with one HMAC per guess: '$found'"
echo ok
