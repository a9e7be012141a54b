#!/usr/bin/env bash
# `plan` on a terminal fits one screen (issue 54: it printed about 100 lines): the settings not at their
# default, the GPUs and ranks, local rank 0's command, and how to get the rest; --full there gives what a pipe or
# a file gets, every setting and each rank's environment, unchanged (test 90 keeps that byte for byte).
. "$DDP_SRCDIR/tests/integration/lib.sh"
command -v script >/dev/null || fail "script (util-linux) not installed: no terminal for plan"
cd "$TMP" || fail "no TMP"
printf '[job]\nprogram = /bin/true\nnproc_per_node = 2\n[restart]\nmax_restarts = 3\n' >job.ini
on_tty() { script -qec "$*" /dev/null </dev/null | tr -d '\r'; }
on_tty "$DDP" plan job.ini >tty.out
n=$(grep -c '' tty.out)
cat tty.out
[ "$n" -le 24 ] || fail "plan on a terminal printed $n lines, more than a screen"
expect_grep '^    nproc_per_node += 2 +\(spec job.ini:3\)$' tty.out
expect_grep '^    max_restarts +' tty.out
grep -q '^    policy ' tty.out && fail "a default setting in the one-screen plan"
expect_grep '^Nodes: 1 ' tty.out
expect_grep '^command of local rank 0: /bin/true$' tty.out
expect_grep 'ddplaunch plan --full' tty.out
grep -q 'RANK=' tty.out && fail "an environment in the one-screen plan"
# --full on a terminal: what a pipe gets (the run id and port as the pipe's, which differ run to run)
on_tty "$DDP" plan --full --rdzv-id fixed --master-port 24913 job.ini >full.out
"$DDP" plan --rdzv-id fixed --master-port 24913 job.ini >pipe.out 2>/dev/null
sed -i 's/^\(Console: lines\).*/\1/' full.out pipe.out # a terminal gets prefixed lines, a pipe not
diff pipe.out full.out || fail "plan --full on a terminal differs from plan piped"
[ "$(grep -c '' pipe.out)" -gt 60 ] || fail "the full plan is short: $(grep -c '' pipe.out) lines"
expect_grep '^    RANK=0$' pipe.out
echo ok
