#!/usr/bin/env bash
# The key table, --help and the man pages stay in step (issue 2): every key of `ddplaunch --help-keys` is
# documented under its section in man/ddplaunch.ini.5 with its default (a description that differs from the
# table's one-line doc is printed as a note), every key the
# page documents exists, every option of --help has an entry in man/ddplaunch.1, and both pages are clean
# under groff -ww (and mandoc -T lint when installed). Skips while man/ is missing.
. "$DDP_SRCDIR/tests/integration/lib.sh"
MAN1=$DDP_SRCDIR/man/ddplaunch.1
MAN5=$DDP_SRCDIR/man/ddplaunch.ini.5
[ -f "$MAN1" ] && [ -f "$MAN5" ] || skip "man/ddplaunch.1 or man/ddplaunch.ini.5 not written yet"

"$DDP" --help-keys >"$TMP/keys" || fail "--help-keys failed"
"$DDP" --help >"$TMP/help" || fail "--help failed"

$PY - "$TMP/keys" "$TMP/help" "$MAN5" "$MAN1" <<'PYEOF' || fail "man pages out of step (see above)"
import re, sys
keys_txt, help_txt, man5, man1 = (open(p, encoding="utf-8").read() for p in sys.argv[1:5])

def plain(s):
    """man source -> text: font escapes off, \- -> -, \(aq -> ', \& dropped."""
    s = re.sub(r"\\f[BIRP]|\\f\(..|\\f\[[A-Z]*\]", "", s)
    s = s.replace("\\-", "-").replace("\\(aq", "'").replace("\\&", "").replace("\\e", "\\").replace("\\(em", "--")
    return s

def norm(s):
    s = re.sub(r"\s+", " ", s).strip().rstrip(".")
    return s[:1].lower() + s[1:]

# --help-keys: "[section]", "  key   type   [default]", "      doc" (on one or more lines)
table = []
section = None
lines = keys_txt.splitlines()
for i, line in enumerate(lines):
    m = re.match(r"^\[(\w+)\]$", line)
    if m:
        section = m.group(1)
        continue
    m = re.match(r"^  ([a-z_]+) +(\S+) +\[(.*)\]$", line)
    if m:
        # the doc: the indented lines below the key's line (wrapped at 80 columns)
        j, body = i + 1, []
        while j < len(lines) and lines[j].startswith("      "):
            body.append(lines[j].strip())
            j += 1
        doc = " ".join(body)
        table.append((section, m.group(1), m.group(3), doc))
if len(table) < 40:
    sys.exit("--help-keys listed only %d keys" % len(table))

# ddplaunch.ini.5: .SS [section] then .TP / .B[R] key ... / paragraph
doc5 = {}
section = None
in_keys = False
src = man5.splitlines()
i = 0
while i < len(src):
    line = src[i]
    if line.startswith(".SH"):
        in_keys = line.split(None, 1)[1].strip('"') == "KEYS" if len(line.split()) > 1 else False
    m = re.match(r'^\.SS\s+"?\[(\w+)\]"?', line)
    if m:
        section = m.group(1)
    if in_keys and section and line.startswith(".TP") and i + 1 < len(src):
        m = re.match(r'^\.B[RI]?\s+"?([a-z_]+)"?', src[i + 1])
        if m:
            body = []
            j = i + 2
            while j < len(src) and not re.match(r"^\.(TP|SS|SH|PP|P|LP)\b", src[j]):
                body.append(src[j])
                j += 1
            doc5[(section, m.group(1))] = plain(" ".join(l for l in body if not l.startswith(".\\\"")))
    i += 1

bad, notes = [], []
for section, key, default, doc in table:
    text = doc5.get((section, key))
    if text is None:
        bad.append("ddplaunch.ini.5: [%s] %s is not documented (expected '.TP' then '.BR %s ...' under '.SS [%s]')"
                   % (section, key, key, section))
        continue
    if norm(doc) not in norm(text):
        # The page may say more than the one-line table doc; a differing text is worth a look, not a failure.
        notes.append("ddplaunch.ini.5: [%s] %s: description differs from the key table:\n    table: %s\n    man:   %s"
                   % (section, key, doc, text.strip()))
    if default and ("Default: %s." % default) not in text and ("Default: %s " % default) not in text:
        bad.append("ddplaunch.ini.5: [%s] %s: default '%s' not stated ('Default: %s.'); man says: %s"
                   % (section, key, default, default, text.strip()))
known = {(s, k) for s, k, _, _ in table}
for (section, key) in doc5:
    if (section, key) not in known and section not in ("nccl", "env"):
        bad.append("ddplaunch.ini.5: documents [%s] %s, which is not in the key table" % (section, key))

# --help options -> ddplaunch.1 entries
flags = set()
for line in help_txt.splitlines():
    m = re.match(r"^  (-\w), (--[a-z][a-z0-9-]*)", line) or re.match(r"^ {6}(--[a-z][a-z0-9-]*)", line)
    if m:
        flags.update(g for g in m.groups() if g)
if len(flags) < 30:
    sys.exit("--help listed only %d options" % len(flags))
entries = " ".join(plain(l) for l in man1.splitlines() if re.match(r"^\.(B|BI|BR|IR|IB)\b", l))
for f in sorted(flags):
    if not re.search(r"(^|[\s\"])%s($|[\s\",=])" % re.escape(f), entries):
        bad.append("ddplaunch.1: option %s of --help has no entry (expected a line like '.BI %s ...')"
                   % (f, f.replace("-", "\\-")))
for n in notes:
    print("note: " + n)
for b in bad:
    print(b)
print("%d keys and %d options checked, %d problems, %d notes" % (len(table), len(flags), len(bad), len(notes)))
sys.exit(1 if bad else 0)
PYEOF

if command -v groff >/dev/null; then
    groff -ww -man -z "$MAN1" "$MAN5" 2>"$TMP/groff" || true
    [ -s "$TMP/groff" ] && { cat "$TMP/groff"; fail "groff -ww warnings"; }
fi
if command -v mandoc >/dev/null; then
    mandoc -T lint -W warning "$MAN1" "$MAN5" >"$TMP/mandoc" 2>&1 || true
    grep -vE 'STYLE|(WARNING|UNSUPP).*(sections out of conventional order|unusual Xr order|no blank before trailing delimiter)' \
        "$TMP/mandoc" >"$TMP/mandoc.bad"
    [ -s "$TMP/mandoc.bad" ] && { cat "$TMP/mandoc.bad"; fail "mandoc -T lint warnings"; }
fi
echo "man pages in step with the key table and --help"
