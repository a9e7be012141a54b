#!/usr/bin/env bash
# The three ways ddplaunch ships, each built, installed as its users install it, and run (CI: .ci/run):
#   make static  build/static/ddplaunch: ldd lists glibc only; run from where it was built
#   make deb     apt-get install ./build/deb/ddplaunch_*.deb (root only); /usr/bin/ddplaunch, man pages,
#                site config, completion, tmpfiles; lintian's findings printed; removed (purged) at the end
#   make wheel   pip install --no-index into a fresh venv (--system-site-packages, for Debian's torch); the
#                venv's ddplaunch is the static executable
# Each installed ddplaunch: --version, `plan examples/job.ini`, and a 2-worker gloo job (examples/train_ddp.py).
# Run from the repository root. Exit 0 when all pass.
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=$(sed -n 's/^VERSION *:= *//p' Makefile)
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/ddppkg.XXXXXX)
deb_installed=0
cleanup() {
    if [ "$deb_installed" = 1 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq ddplaunch >/dev/null 2>&1 || true
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
# private state, as for the integration tests (tests/integration/lib.sh says why the random port range)
export DDPLAUNCH_LOCK_DIR=$TMP/locks XDG_RUNTIME_DIR=$TMP/run
mkdir -m 0700 "$XDG_RUNTIME_DIR"
lo=$((29600 + RANDOM % 28 * 100))
export DDPLAUNCH_JOB_MASTER_PORT=auto:$lo-$((lo + 399))
fail() { echo "FAIL: $*" >&2; exit 1; }

# check_run WHAT BINARY: --version, plan of examples/job.ini, a 2-worker gloo job
check_run() {
    local what=$1 bin=$2 out=$TMP/out
    [ "$("$bin" --version)" = "ddplaunch $VERSION" ] || fail "$what: --version said '$("$bin" --version)'"
    "$bin" plan examples/job.ini >"$out" 2>&1 || { cat "$out"; fail "$what: plan examples/job.ini failed"; }
    grep -qE "script *= ([^ ]*/)?examples/train_ddp.py " "$out" || { cat "$out"; fail "$what: plan does not show the script"; }
    PYTHON_EXEC=${3:-$PY} "$bin" --nproc-per-node 2 examples/train_ddp.py --steps 5 >"$out" 2>&1 ||
        { cat "$out"; fail "$what: the 2-worker gloo job failed"; }
    grep -q "done steps=5 world_size=2" "$out" || { cat "$out"; fail "$what: no 'done steps=5 world_size=2'"; }
    echo "$what: --version, plan, 2-worker gloo job: ok ($(grep -o 'checksum=.*' "$out"))"
}

# only glibc's own libraries (ld.so, libc, libm, ...)
glibc_only() {
    local bad
    bad=$(ldd "$1" | awk '{ n = $1; sub(/\.so.*/, "", n); sub(/.*\//, "", n); print n }' |
        grep -vxE 'linux-vdso|libc|libm|libdl|libpthread|librt|ld-linux-x86-64|ld-linux-aarch64' || true)
    [ -z "$bad" ] || fail "$1 needs more than glibc: $bad"
}

echo "== make static"
make --no-print-directory static
glibc_only build/static/ddplaunch
check_run static build/static/ddplaunch

echo "== make deb"
make --no-print-directory deb >"$TMP/deb.log" 2>&1 || { tail -n 40 "$TMP/deb.log"; fail "make deb failed"; }
deb=$(ls build/deb/ddplaunch_"$VERSION"_*.deb)
echo "built $deb"
echo "lintian (--pedantic):"
lintian --pedantic build/deb/ddplaunch_"$VERSION"_*.changes 2>&1 | sed 's/^/  /' || true
dpkg-deb -c "$deb" >"$TMP/contents"
for f in ./usr/bin/ddplaunch ./usr/share/man/man1/ddplaunch.1.gz ./usr/share/man/man5/ddplaunch.ini.5.gz \
    ./etc/ddplaunch/ddplaunch.ini ./usr/share/bash-completion/completions/ddplaunch \
    ./usr/lib/tmpfiles.d/ddplaunch.conf; do
    grep -q " $f\$" "$TMP/contents" || { cat "$TMP/contents"; fail "$deb lacks $f"; }
done
if [ "$(id -u)" = 0 ]; then
    if dpkg -s ddplaunch >/dev/null 2>&1; then
        echo "a ddplaunch package is installed on this machine already: not installing over it"
    else
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "./$deb" >"$TMP/apt.log" 2>&1 ||
            { cat "$TMP/apt.log"; fail "apt-get install ./$deb failed"; }
        deb_installed=1
        [ "$(command -v ddplaunch)" = /usr/bin/ddplaunch ] || fail "ddplaunch on PATH is $(command -v ddplaunch)"
        dpkg -s ddplaunch | grep -q '^Status: install ok installed' || fail "dpkg does not list ddplaunch"
        grep -q '^/etc/ddplaunch/ddplaunch.ini$' /var/lib/dpkg/info/ddplaunch.conffiles ||
            fail "/etc/ddplaunch/ddplaunch.ini is not a conffile"
        if command -v man >/dev/null; then
            man -P cat ddplaunch 2>/dev/null | grep -q "ddplaunch" || fail "man ddplaunch shows nothing"
            man -P cat 5 ddplaunch.ini 2>/dev/null | grep -q "ddplaunch" || fail "man 5 ddplaunch.ini shows nothing"
            echo "deb: man ddplaunch, man 5 ddplaunch.ini: ok"
        fi
        if command -v systemd-tmpfiles >/dev/null; then
            systemd-tmpfiles --create ddplaunch.conf 2>/dev/null || true
            [ "$(stat -c '%a %U' /run/lock/ddplaunch)" = "1777 root" ] ||
                fail "/run/lock/ddplaunch is $(stat -c '%a %U' /run/lock/ddplaunch), want 1777 root"
            echo "deb: systemd-tmpfiles created /run/lock/ddplaunch 1777 root: ok"
        fi
        check_run deb /usr/bin/ddplaunch
    fi
else
    echo "not root: $deb built, not installed"
fi

echo "== make wheel"
make --no-print-directory wheel >"$TMP/wheel.log" 2>&1 || { tail -n 40 "$TMP/wheel.log"; fail "make wheel failed"; }
whl=$(ls build/wheel/ddplaunch-"$VERSION"-py3-none-manylinux_2_*_"$(uname -m)".whl)
glibc=$(sh packaging/static/glibc-version.sh build/static/ddplaunch)
case $whl in *"manylinux_${glibc/./_}_"*) ;; *) fail "$whl: tag does not say glibc $glibc" ;; esac
echo "built $whl (the executable needs glibc >= $glibc)"
$PY -m venv --system-site-packages "$TMP/venv"
"$TMP/venv/bin/pip" install --no-index -q "$whl" || fail "pip install --no-index $whl failed"
[ -x "$TMP/venv/bin/ddplaunch" ] || fail "the wheel did not put ddplaunch into the venv's bin"
[ "$(PATH=$TMP/venv/bin:$PATH command -v ddplaunch)" = "$TMP/venv/bin/ddplaunch" ] || fail "not on the venv's PATH"
glibc_only "$TMP/venv/bin/ddplaunch"
[ -f "$TMP/venv/share/man/man1/ddplaunch.1" ] || fail "the wheel did not install share/man/man1/ddplaunch.1"
(
    . "$TMP/venv/bin/activate"
    check_run wheel ddplaunch "$TMP/venv/bin/python3"
)
echo "packaging: all passed"
