#!/usr/bin/env bash
# Issue 34 item 6: the log disk fills while the stack sampler runs. Its thread stays silent in the program's
# streams (no "Exception in thread ddplaunch-stacks", no Errno 28) and the launcher says, once, that sampling
# stopped for that rank; the rank ends as it would have.
. "$DDP_SRCDIR/tests/integration/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to mount a small tmpfs"
mkdir "$TMP/full"
mount -t tmpfs -o size=400k tmpfs "$TMP/full" || skip "cannot mount tmpfs"
trap 'umount "$TMP/full"; rm -rf "$TMP"' EXIT

# six threads a few frames deep while there is room; once the disk is full (and kept full) they go 95 frames
# deeper: a dump of some 60 KB, that the room the stacks file had cannot hold
cat >"$TMP/w.py" <<'EOF'
import os, sys, threading, time
deeper = threading.Event()
def deep_recursion_to_make_the_dump_large(n):
    if n == 95:
        deeper.wait()
    if n:
        return deep_recursion_to_make_the_dump_large(n - 1)
    time.sleep(6)
def fill(name, full):
    fd = os.open(os.path.join(sys.argv[1], name), os.O_WRONLY | os.O_CREAT, 0o600)
    while True:  # and keep it full: room freed later (the stacks file emptied) is taken at once
        try:
            os.write(fd, b"x" * 4096)
        except OSError as e:
            if not full.is_set():
                print("filled:", e.strerror, flush=True)
                full.set()
            time.sleep(0.001)
for _ in range(6):
    threading.Thread(target=deep_recursion_to_make_the_dump_large, args=(100,), daemon=True).start()
time.sleep(1.5)  # sampled while there is room
full = threading.Event()
threading.Thread(target=fill, args=("fill", full), daemon=True).start()
full.wait()
deeper.set()
time.sleep(3)  # sampled on the full disk
print("rank done", flush=True)
EOF
"$DDP" --nproc-per-node 1 --set timeout.sample_interval=200ms --log-dir "$TMP/full/logs" "$TMP/w.py" "$TMP/full" \
    >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc = 0 ] || { cat "$TMP/out" "$TMP/err"; fail "exit $rc, want 0"; }
expect_grep "filled: No space left on device" "$TMP/out"
expect_grep "rank done" "$TMP/out"
! grep -E "Exception in thread|Errno 28|Traceback" "$TMP/out" "$TMP/err" || fail "the sampler wrote into the program's streams"
expect_grep "^ddplaunch: warning: attempt 0: rank 0: live stack sampling stopped for this rank: pid [0-9]+ cannot write its stacks file \(No space left on device\)$" "$TMP/err"
expect_eq "said once" "$(grep -c 'live stack sampling stopped' "$TMP/err")" 1
echo ok
