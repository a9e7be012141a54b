"""Unit tests for launcher/watch/sitecustomize.py, the Python ddplaunch's workers load first (built into the
binary; the Makefile's `make unit` runs these with /usr/bin/python3 -m unittest).

The flight-recorder reader runs against a stand-in torch (fake_torch.py) shaped as torch 1.13 and torch 2.11, fed
the recorded and synthesized dumps of tests/fixtures/fr. The stack sampler, the PYTHONPATH restore and the chain to
the program's own sitecustomize run in real child interpreters, as a worker does. The numbers the C side holds the
Python to (the header's length, the sample signal, the entries kept per group) are read from its headers."""
import ctypes
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import fake_torch

SRC = os.environ.get("DDP_SRCDIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SITE = os.path.join(SRC, "launcher", "watch", "sitecustomize.py")
FR = os.path.join(SRC, "tests", "fixtures", "fr")


def c_define(name):
    """The value of #define NAME N in launcher/watch/*.h."""
    for h in sorted(glob.glob(os.path.join(SRC, "launcher", "watch", "*.h"))):
        with open(h) as f:
            m = re.search(r"^#define %s (\d+)" % name, f.read(), re.M)
        if m:
            return int(m.group(1))
    raise LookupError("no #define %s in launcher/watch/*.h" % name)


def load_site():
    """The file's functions, as the standby interpreter takes them: under another name than sitecustomize, so that
    it neither registers nor chains."""
    ns = {"__name__": "_ddplaunch_test", "__file__": SITE}
    with open(SITE, "rb") as f:
        exec(compile(f.read(), SITE, "exec"), ns)
    return ns


def fixture(path):
    with open(os.path.join(FR, path)) as f:
        return json.load(f)


def parse_line(line):
    """The JSON of one "ddplaunch-fr {json}" line, checked for the shape watch/fr.c reads."""
    assert line.startswith("ddplaunch-fr ") and line.endswith("\n") and line.count("\n") == 1, line
    return json.loads(line[len("ddplaunch-fr ") :])


class FlightRecorder(unittest.TestCase):
    def setUp(self):
        fake_torch.uninstall()
        self.addCleanup(fake_torch.uninstall)
        self.site = load_site()
        self.st = self.site["_ddplaunch_fr_state"]()

    def line(self, want=False):
        return self.site["_ddplaunch_fr_line"](self.st, want)

    def test_no_torch_no_line_and_torch_not_imported(self):
        self.assertEqual(self.line(True), "")
        self.assertNotIn("torch", sys.modules)

    def test_torch_without_distributed_no_line(self):
        fake_torch.install_torch2(gloo=fake_torch.Dump(fixture("stuck.rank0.json")))
        del sys.modules["torch.distributed"]
        self.assertEqual(self.line(True), "")

    def test_torch1_no_line_and_never_asked_again(self):
        _, state = fake_torch.install_torch1(initialized=False, groups={"0": [0, 1]})
        self.assertEqual(self.line(True), "")
        self.assertFalse(self.st["off"], "no process group yet: asked again at the next sample")
        state["initialized"] = True
        self.assertEqual(self.line(True), "")
        self.assertTrue(self.st["off"], "torch 1.x has no recorder: off for good")

    def test_torch2_before_init_process_group_no_dump(self):
        gloo = fake_torch.Dump(fixture("stuck.rank0.json"))
        fake_torch.install_torch2(gloo=gloo, initialized=False)
        self.assertEqual(self.line(True), "")
        self.assertEqual(gloo.calls, 0)

    def test_torch2_groups_by_name_with_members(self):
        """rank 2 of pair2: its pg_status key "1" is group "2" (ranks 2-3); there is no group "1" on this rank"""
        gloo = fake_torch.Dump(fixture("groups/pair2.rank2.json"))
        fake_torch.install_torch2(gloo=gloo, groups={"0": [0, 1, 2, 3], "2": [2, 3]})
        doc = parse_line(self.line())
        self.assertEqual(set(doc), {"pg_status", "pg_config", "ddp_groups", "ddp_pgmap"}, "status only at first")
        self.assertEqual(doc["ddp_groups"], {"0": [0, 1, 2, 3], "2": [2, 3]})
        self.assertEqual(doc["ddp_pgmap"], {"0": ["0", "default_pg"], "1": ["2", "undefined"]})
        self.assertEqual(doc["pg_status"], gloo.doc["pg_status"])
        self.assertEqual(gloo.entries, 1, "the entries read once, for the join of the new keys to names")

    def test_torch2_every_case_as_the_c_side_reads_it(self):
        """For every synthesized case (tests/fixtures/fr/groups), the line after a 10 s standstill is the .line
        beside the dump, which tests/unit/test_fr.c parses and decides on; but for the join of a key with no
        collective yet, which the line there has from synth.py's knowledge and the sampler only from an entry."""
        cases = sorted(glob.glob(os.path.join(FR, "groups", "*.json")))
        self.assertGreater(len(cases), 30)
        for path in cases:
            with self.subTest(case=os.path.basename(path)):
                fake_torch.uninstall()
                with open(path[: -len(".json")] + ".line") as f:
                    want = parse_line(f.read())
                gloo = fake_torch.Dump(fixture(path))
                fake_torch.install_torch2(gloo=gloo, groups=want["ddp_groups"])
                self.st = self.site["_ddplaunch_fr_state"]()
                self.assertNotIn("entries", parse_line(self.line()))
                self.st["since"] -= 11
                got = parse_line(self.line())
                started = {k for k, v in want["pg_status"].items() if int(v["last_enqueued_collective"]) > 0}
                want["ddp_pgmap"] = {k: v for k, v in want["ddp_pgmap"].items() if k in started}
                self.assertEqual(got, want)

    def test_torch2_last_entries_per_group_trimmed(self):
        """NCCL, one group with 10 entries: its last DDP_FR_PER_GROUP, oldest first, with only the fields kept"""
        nccl = fake_torch.Dump(fixture("nccl.rank0.json"))
        fake_torch.install_torch2(nccl=nccl, groups={"0": [0]})
        doc = parse_line(self.line(True))
        keep = c_define("DDP_FR_PER_GROUP")
        self.assertEqual(len(nccl.doc["entries"]), 10)
        self.assertEqual([e["record_id"] for e in doc["entries"]],
                         [e["record_id"] for e in nccl.doc["entries"][-keep:]])
        fields = {"record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "profiling_name",
                  "state", "time_created_ns", "input_sizes", "input_dtypes", "is_p2p"}
        for e in doc["entries"]:
            self.assertLessEqual(set(e), fields)
            self.assertIn("profiling_name", e)
        self.assertEqual(doc["pg_status"]["0"]["last_enqueued_collective"], "301")

    def test_torch2_entries_once_per_standstill(self):
        """The entries (milliseconds for a full ring) are read once when asked, sent while the status stands still,
        and dropped when it moves; a moved status does not read them again."""
        gloo = fake_torch.Dump(fixture("stuck.rank0.json"))
        fake_torch.install_torch2(gloo=gloo, groups={"0": [0, 1, 2]})
        self.assertIn("entries", parse_line(self.line(True)))
        self.assertIn("entries", parse_line(self.line()))
        self.assertEqual(gloo.entries, 1)
        status = json.loads(json.dumps(gloo.doc["pg_status"]))
        status["0"]["last_completed_collective"] = 6
        gloo.doc = dict(gloo.doc, pg_status=status)
        self.assertNotIn("entries", parse_line(self.line()))
        self.assertEqual(gloo.entries, 1)

    def test_torch2_gloo_and_nccl_status_merged(self):
        """Both recorders answer (a group with both backends, "cpu:gloo,cuda:nccl"): per pg_status key, the one
        further ahead; the last entries of the group from both, NCCL's first (the order the dumps are asked in)."""
        gloo, nccl = fake_torch.Dump(fixture("stuck.rank0.json")), fake_torch.Dump(fixture("nccl.rank0.json"))
        fake_torch.install_torch2(gloo=gloo, nccl=nccl, groups={"0": [0, 1, 2]})
        doc = parse_line(self.line(True))
        self.assertEqual(doc["pg_status"]["0"], nccl.doc["pg_status"]["0"])
        both = [e["record_id"] for e in nccl.doc["entries"] + gloo.doc["entries"]]
        self.assertEqual([e["record_id"] for e in doc["entries"]], both[-c_define("DDP_FR_PER_GROUP") :])

    def test_torch2_failing_dump_no_line(self):
        gloo = fake_torch.Dump(fixture("stuck.rank0.json"))
        gloo.fail = RuntimeError("recorder torn down")
        fake_torch.install_torch2(gloo=gloo)
        self.assertEqual(self.line(True), "")
        gloo.fail = None
        self.assertTrue(self.line(True).startswith("ddplaunch-fr "), "tried again at the next sample")


class PythonPath(unittest.TestCase):
    """_ddplaunch_pythonpath(here): ddplaunch put `here` first on PYTHONPATH and what the program was given in
    DDPLAUNCH_PYTHONPATH ("+" and the value, "-" none). It undoes only its own change, and only as far as nobody
    changed PYTHONPATH since."""

    HERE = "/run/ddp/python"
    CASES = (
        # PYTHONPATH the interpreter starts with, DDPLAUNCH_PYTHONPATH, PYTHONPATH the program sees (None: unset)
        (HERE, "-", None),  # there was none
        (HERE, "+", ""),  # it was empty: empty again, not unset
        (HERE + ":a::b/", "+a::b/", "a::b/"),  # byte for byte, the empty entry (the current directory) kept
        ("/run/ddp/./python/:a", "+a", "a"),  # our entry however it is spelled
        ("w:" + HERE + ":a", "+a", "w:a"),  # a wrapper prepended its own: only ours goes
        (HERE + ":a:x", "+a", "a:x"),  # something appended since: kept
        ("w:" + HERE, "-", "w"),
        ("x:y", "+a", "x:y"),  # replaced since: not ours to touch
        (None, "+a", None),  # unset since: stays unset
        (HERE + ":a", None, "a"),  # no record of the old value: only ours goes
    )

    def setUp(self):
        saved = dict(os.environ)
        self.addCleanup(lambda: (os.environ.clear(), os.environ.update(saved)))
        self.fn = load_site()["_ddplaunch_pythonpath"]

    def test_restores_only_what_ddplaunch_changed(self):
        for now, was, want in self.CASES:
            with self.subTest(PYTHONPATH=now, DDPLAUNCH_PYTHONPATH=was):
                for k, v in (("PYTHONPATH", now), ("DDPLAUNCH_PYTHONPATH", was)):
                    os.environ.pop(k, None)
                    if v is not None:
                        os.environ[k] = v
                self.fn(self.HERE)
                self.assertEqual(os.environ.get("PYTHONPATH"), want)
                self.assertNotIn("DDPLAUNCH_PYTHONPATH", os.environ)


class Worker(unittest.TestCase):
    """The file as a worker loads it: first on PYTHONPATH of a real interpreter."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ddp-test-site-")
        self.addCleanup(shutil.rmtree, self.tmp)
        self.pydir = os.path.join(self.tmp, "python")
        os.mkdir(self.pydir)
        shutil.copy(SITE, os.path.join(self.pydir, "sitecustomize.py"))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DDPLAUNCH_"))}

    def test_chains_to_the_programs_sitecustomize(self):
        user = os.path.join(self.tmp, "user")
        os.mkdir(user)
        with open(os.path.join(user, "sitecustomize.py"), "w") as f:
            f.write("import builtins\nbuiltins.user_site = __file__\n")
        env = dict(self.env, PYTHONPATH=self.pydir + ":" + user, DDPLAUNCH_PYTHONPATH="+" + user)
        prog = ("import builtins, json, os, sys\n"
                "print(json.dumps([getattr(builtins, 'user_site', None), sys.modules['sitecustomize'].__file__,\n"
                "                  os.environ.get('PYTHONPATH'), sys.path]))\n")
        out = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stderr, "")
        ran, module, pythonpath, path = json.loads(out.stdout)
        self.assertEqual(ran, os.path.join(user, "sitecustomize.py"), "the program's own sitecustomize ran")
        self.assertEqual(module, ran, "and is the sitecustomize module the program sees")
        self.assertEqual(pythonpath, user, "PYTHONPATH as the program was given it")
        self.assertNotIn(self.pydir, path, "ddplaunch's directory is off sys.path")
        self.assertIn(user, path)

    def test_sampler_answers_the_signal_with_stacks(self):
        """Registration (the header the C side parses, DDP_SAMPLE_HEAD_LEN bytes, before the program runs), the
        signal blocked, every thread's stack but the sampler's on the signal, nothing on the program's streams."""
        stacks = os.path.join(self.tmp, "stacks.0")
        sig = signal.SIGRTMIN + c_define("DDP_SAMPLE_SIGNAL_OFFSET")
        env = dict(self.env, PYTHONPATH=self.pydir, DDPLAUNCH_PYTHONPATH="-", DDPLAUNCH_STACKS_FILE=stacks,
                   DDPLAUNCH_STACKS_SIGNAL=str(sig))
        prog = ("import os, sys\n"
                "def waiting_here():\n"
                "    print(repr([os.environ.get('DDPLAUNCH_STACKS_FILE'), os.environ.get('PYTHONPATH')]), flush=True)\n"
                "    return sys.stdin.readline()\n"
                "waiting_here()\n")
        p = subprocess.Popen([sys.executable, "-c", prog], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            self.assertEqual(p.stdout.readline(), "[None, None]\n", "the variables are taken out of the environment")
            with open(stacks, "rb") as f:
                head = f.read()
            n = c_define("DDP_SAMPLE_HEAD_LEN")
            self.assertEqual(len(head), n, head)
            m = re.fullmatch(rb"ddplaunch-stacks pid=(\d{10}) signal=(\d{3}) start=(\d{20}) tid=(\d{10}) err=000\n",
                             head)
            self.assertIsNotNone(m, head)
            self.assertEqual((int(m.group(1)), int(m.group(2))), (p.pid, sig))
            with open("/proc/%d/status" % p.pid) as f:
                blocked = int(re.search(r"^SigBlk:\s*([0-9a-f]+)", f.read(), re.M).group(1), 16)
            self.assertTrue(blocked >> (sig - 1) & 1, "the main thread blocks the signal")
            os.kill(p.pid, sig)
            deadline = time.monotonic() + 30
            text = b""
            while b"in waiting_here" not in text and time.monotonic() < deadline:
                time.sleep(0.05)
                with open(stacks, "rb") as f:
                    text = f.read()
            self.assertTrue(text.startswith(head), "the same registration")
            body = text[n:].decode()
            self.assertRegex(body, r'^Current thread 0x[0-9a-f]{16} \(most recent call first\):\n'
                                   r'  File "<string>", line [34] in waiting_here\n'
                                   r'  File "<string>", line 5 in <module>\n')
            self.assertNotIn("_ddplaunch_wait", body, "not the sampler's own stack")
            self.assertNotIn("ddplaunch-fr", body, "no torch: no recorder line")
            out, err = p.communicate("\n", timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.assertEqual(p.returncode, 0)
        self.assertEqual(out, "")
        self.assertEqual(err, "", "nothing reaches the program's streams")

    def test_sigqueue_asks_for_the_entries_now(self):
        """A rank failed with a collective error (watch/atfail.c): the signal sent with sigqueue (si_code
        SI_QUEUE) makes the sampler read its recorder's entries at once; a plain kill (a regular sample) does not
        before the status stood still 10 s."""
        stacks = os.path.join(self.tmp, "stacks.0")
        sig = signal.SIGRTMIN + c_define("DDP_SAMPLE_SIGNAL_OFFSET")
        env = dict(self.env, PYTHONPATH=self.pydir, DDPLAUNCH_PYTHONPATH="-", DDPLAUNCH_STACKS_FILE=stacks,
                   DDPLAUNCH_STACKS_SIGNAL=str(sig))
        prog = ("import json, sys\n"
                "sys.path.insert(0, %r)\n"
                "import fake_torch\n"
                "fake_torch.install_torch2(gloo=fake_torch.Dump(json.load(open(%r))), groups={'0': [0, 1, 2]})\n"
                "print('ready', flush=True)\n"
                "sys.stdin.readline()\n" % (os.path.dirname(os.path.abspath(__file__)),
                                            os.path.join(FR, "stuck.rank0.json")))
        p = subprocess.Popen([sys.executable, "-c", prog], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        libc = ctypes.CDLL(None, use_errno=True)
        n = c_define("DDP_SAMPLE_HEAD_LEN")

        def sample(send):
            with open(stacks, "r+b") as f:
                f.truncate(n)  # as ddp_sample_poke empties it down to the header
            send()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with open(stacks, "rb") as f:
                    body = f.read()[n:].decode()
                if body.endswith("\n") and "ddplaunch-fr " in body:
                    return parse_line(body[body.index("ddplaunch-fr "):])
                time.sleep(0.05)
            self.fail("no recorder line: %r" % body)

        try:
            self.assertEqual(p.stdout.readline(), "ready\n")
            self.assertNotIn("entries", sample(lambda: os.kill(p.pid, sig)), "a regular sample: status only")
            value = ctypes.c_void_p(1)  # union sigval, as ddp_sample_poke's sival_int = 1
            self.assertIn("entries", sample(lambda: self.assertEqual(libc.sigqueue(p.pid, sig, value), 0)),
                          "asked with sigqueue: the entries now")
            out, err = p.communicate("\n", timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.assertEqual(p.returncode, 0)
        self.assertEqual(err, "", "nothing reaches the program's streams")


if __name__ == "__main__":
    unittest.main()
