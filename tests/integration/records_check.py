#!/usr/bin/env python3
"""Validate events.jsonl and summary.json against the schema documented in man/ddplaunch.1 (RUN RECORDS).
Usage: records_check.py MAN1 LOG_DIR   -> prints the event names, one per line; exit 1 with a reason on a mismatch.
The schema is read from the page itself (".TP / .B name / key (type|type), ..."), so the page and the files
cannot drift apart without this failing."""
import json, re, sys

man, logdir = sys.argv[1], sys.argv[2]
src = open(man, encoding="utf-8").read()
m = re.search(r"^\.SH RUN RECORDS\n(.*?)^\.SH ", src, re.S | re.M)
if not m:
    sys.exit("no RUN RECORDS section in " + man)
sec = m.group(1).replace("\\-", "-")
schema = {}
for name, body in re.findall(r"^\.TP\n\.B (\w+)\n(.*?)(?=^\.[A-Z]{2})", sec, re.S | re.M):
    keys = {}
    for k, types, opt in re.findall(r"(\w+) \(([a-z|]+)(, optional)?\)", body.replace("\n", " ")):
        keys[k] = (set(types.split("|")), not opt)
    schema[name] = keys
for need in ("job_start", "job_end", "summary", "failure"):
    if need not in schema:
        sys.exit("schema for %s not found in the man page (found %s)" % (need, sorted(schema)))

def typ(v):
    return ("null" if v is None else "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else
            "number" if isinstance(v, float) else "string" if isinstance(v, str) else
            "array" if isinstance(v, list) else "object")

def check(obj, name, common, where):
    want = dict(schema[name])
    for k, t in common.items():
        want[k] = ({t}, True)
    for k, v in obj.items():
        if k not in want:
            sys.exit("%s: key %r is not documented for %s" % (where, k, name))
        t = typ(v)
        ok = want[k][0]
        if t not in ok and not (t == "int" and "number" in ok):
            sys.exit("%s: %s.%s is %s, documented %s" % (where, name, k, t, "|".join(sorted(ok))))
    for k, (t, required) in want.items():
        if required and k not in obj:
            sys.exit("%s: %s lacks documented key %r" % (where, name, k))

ts_re = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
last = ""
for i, line in enumerate(open(logdir + "/events.jsonl", encoding="utf-8"), 1):
    e = json.loads(line)
    where = "events.jsonl:%d" % i
    if e.get("v") != 1 or not ts_re.match(e.get("ts", "")):
        sys.exit(where + ": v must be 1 and ts an ISO time: " + line)
    if e["ts"] < last:
        sys.exit(where + ": ts goes backwards")
    last = e["ts"]
    if e.get("event") not in schema:
        sys.exit(where + ": undocumented event " + str(e.get("event")))
    check(e, e["event"], {"v": "int", "ts": "string", "event": "string"}, where)
    for c in e.get("culprits", []) if e["event"] == "hang" else []:
        check(c, "culprit", {}, where + " culprit")
    print(e["event"])
s = json.load(open(logdir + "/summary.json", encoding="utf-8"))
check(s, "summary", {}, "summary.json")
for f in ([s["root_cause"]] if s["root_cause"] else []) + s["failures"]:
    check(f, "failure", {}, "summary.json failure")
for f in s["logs_stopped"]:
    check(f, "log_stopped", {}, "summary.json log_stopped")
if s.get("hang"):
    check(s["hang"], "hang", {}, "summary.json hang")
    for c in s["hang"]["culprits"]:
        check(c, "culprit", {}, "summary.json hang culprit")
