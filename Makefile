# ddplaunch: a job launcher and process supervisor for multi-GPU PyTorch training.
# Plain GNU make. Project flags first, user CFLAGS last.

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
DATADIR    ?= $(PREFIX)/share/ddplaunch
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
DESTDIR    ?=
VERSION    := 0.1.0

CC         ?= cc
PKG_CONFIG ?= pkg-config
SANITIZE   ?=

comma      := ,
PERCENT    := %
ifeq ($(SANITIZE),)
BUILD      ?= build
SANFLAGS   :=
else
BUILD      ?= build/san-$(subst $(comma),-,$(SANITIZE))
SANFLAGS   := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

PKGS       := libuv hwloc inih jansson libsodium
# libcurl: its headers only; nodes/etcd.c loads libcurl.so.4 with dlopen when a job meets through etcd, so that
# no other launch loads its thirty libraries and `make static` stays glibc-only
PKGS_HDR   := libcurl
# Asked of pkg-config on first use (a recipe), not when make reads this file: on a bare machine `make demo`
# and `make test` install pkg-config and the -dev packages first (deps-check), then build in a second make.
DEP_CFLAGS  = $(eval DEP_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) $(PKGS_HDR) 2>/dev/null))$(DEP_CFLAGS)
DEP_LIBS    = $(eval DEP_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null) -lnuma -ldl -lm)$(DEP_LIBS)
CRIT_LIBS   = $(eval CRIT_LIBS := $(shell $(PKG_CONFIG) --libs criterion 2>/dev/null))$(CRIT_LIBS)

WARN       := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2
DDP_CFLAGS  = -std=c11 -D_GNU_SOURCE -O2 -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2 -g $(WARN) -Ilauncher -I$(BUILD)/gen -MMD -MP $(SANFLAGS) $(DEP_CFLAGS) \
              -DDDP_VERSION='"$(VERSION)"' -DDDP_SYSCONFDIR='"$(SYSCONFDIR)"' \
              -DDDP_DATADIR='"$(DATADIR)"'
DDP_LDFLAGS := $(SANFLAGS)

# launcher/FOLDER/MODULE.c: one folder per subsystem (README, Layout; launcher/deps.rules says which folder may
# include which). Headers are included as "folder/module.h" from launcher/.
SRCS       := $(sort $(wildcard launcher/*/*.c))
LIB_SRCS   := $(filter-out launcher/driver/main.c,$(SRCS))
OBJS       := $(SRCS:launcher/%.c=$(BUILD)/obj/%.o)
LIB_OBJS   := $(LIB_SRCS:launcher/%.c=$(BUILD)/obj/%.o)
UNIT_SRCS  := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
HELP_SRCS  := $(filter-out tests/helpers/fake_nvml.c tests/helpers/fake_cuda.c,$(sort $(wildcard tests/helpers/*.c)))
# the fake NVML (a shared library, tests/helpers/fake_nvml.c), and an older one without the newer calls; a fake
# libcuda.so.1 (tests/helpers/fake_cuda.c)
FAKE_NVML  := $(BUILD)/helpers/fake_nvml/libnvidia-ml.so.1 $(BUILD)/helpers/fake_nvml_old/libnvidia-ml.so.1
FAKE_CUDA  := $(BUILD)/helpers/fake_cuda/libcuda.so.1
HELP_BINS  := $(HELP_SRCS:tests/helpers/%.c=$(BUILD)/helpers/%) $(FAKE_NVML) $(FAKE_CUDA)

# Debian packages for building, testing and the demo.
DEPS_BUILD := build-essential pkg-config libuv1-dev libhwloc-dev libnuma-dev libinih-dev libjansson-dev libsodium-dev \
              libcurl4-openssl-dev
DEPS_TEST  := libcriterion-dev python3 python3-torch hwloc-nox numactl iproute2 procps stress-ng etcd-server etcd-client \
              groff-base mandoc valgrind clang libclang-rt-14-dev clang-format jq pyflakes3 \
              slurmctld slurmd slurm-client munge chromium
DEPS_DEMO  := python3 python3-torch
# make deb, make wheel and their check (tests/packaging/run.sh)
DEPS_PACKAGE := debhelper dpkg-dev fakeroot lintian python3-build python3-setuptools python3-wheel \
              python3-venv python3-pip man-db binutils
DEPS_ALL   := $(DEPS_BUILD) $(DEPS_TEST) $(DEPS_PACKAGE)

.SECONDEXPANSION:
.PHONY: print-layers all test unit integration integration-warm test-load check deps deps-check deps-demo install uninstall demo demo-run fuzz bench \
        clean lint-man lint-py static deps-build-check deb wheel format format-check

all: $(BUILD)/ddplaunch

# The layers (launcher/deps.rules), and what enforces them:
# - includes: tests/deps-check.py (test 17), from the sources;
# - calls: the build itself. Each folder of launcher/ is its own archive, and before build/ddplaunch is linked each
#   archive is linked whole, with a stub main, against the archives of the folders below it alone
#   ($(BUILD)/layers/FOLDER.ok): a call from a lower folder to a higher one (base calling the driver), or to a
#   folder deps.rules does not list below it, is an undefined reference there and `make` fails naming it, even
#   when the final link would resolve it because something else pulled the callee in (issue 53 item 5; test 104
#   plants one). The final link takes the archives highest first. Inside a folder, calls are free.
LAYERS     := $(shell awk -F: '/^[a-z]+:/ { print $$1 }' launcher/deps.rules)
LINK_ORDER := $(shell printf '%s\n' $(LAYERS) | tac)
LAYER_LIBS := $(LINK_ORDER:%=$(BUILD)/layers/lib%.a)
LAYER_OKS  := $(LAYERS:%=$(BUILD)/layers/%.ok)
# the archives FOLDER may call, in link order: those deps.rules lists below it
layer_below = $(patsubst %,$(BUILD)/layers/lib%.a,$(filter $(shell awk -F: '$$1 == "$(1)" { print $$2 }' \
                launcher/deps.rules),$(LINK_ORDER)))

$(BUILD)/layers/stub_main.o:
	@mkdir -p $(@D)
	printf 'int main(void) { return 0; }\n' > $(@D)/stub_main.c
	$(CC) $(DDP_CFLAGS) $(CPPFLAGS) $(CFLAGS) -c -o $@ $(@D)/stub_main.c

$(BUILD)/layers/%.ok: $(BUILD)/layers/lib%.a $(BUILD)/layers/stub_main.o $$(call layer_below,$$*) launcher/deps.rules
	@$(CC) $(DDP_LDFLAGS) $(LDFLAGS) -o $(@:.ok=.link) $(BUILD)/layers/stub_main.o -Wl,--whole-archive $< \
	    -Wl,--no-whole-archive $(call layer_below,$*) $(DEP_LIBS) $(LDLIBS) 2>$(@:.ok=.err) || \
	    { grep -m 5 "undefined reference" $(@:.ok=.err) | sed 's/^/$*: /'; \
	      echo "launcher/$*/ calls a folder that deps.rules does not list below it (Makefile: layers)"; exit 1; }
	@rm -f $(@:.ok=.link) $(@:.ok=.err)
	@touch $@

$(BUILD)/layers/lib%.a: $$(filter $(BUILD)/obj/%/$$(PERCENT).o,$(LIB_OBJS))
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/ddplaunch: $(BUILD)/obj/driver/main.o $(LAYER_LIBS) | $(LAYER_OKS)
	$(CC) $(DDP_LDFLAGS) $(LDFLAGS) -o $@ $(BUILD)/obj/driver/main.o $(LAYER_LIBS) $(DEP_LIBS) $(LDLIBS)

# The archives in link order, for tests/integration/17-module-graph.sh (a planted upward call must not link).
print-layers:
	@echo $(LAYER_LIBS)

$(BUILD)/libddp.a: $(LIB_OBJS)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/obj/%.o: launcher/%.c
	@mkdir -p $(@D)
	$(CC) $(DDP_CFLAGS) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# Python built into the binary, so that nothing is read from disk at run time: each launcher/FOLDER/NAME.py (the
# sampler's sitecustomize, the warm-restart standby) becomes $(BUILD)/gen/NAME_py.h, which its one C user includes as
# <NAME_py.h>: NAME_py[] (the file's bytes, then a NUL) and NAME_py_len (the bytes without the NUL). Every object waits
# for them on a first build; the .d files name the one that includes each.
PY_SRCS    := $(sort $(wildcard launcher/*/*.py))
PY_HDRS    := $(foreach p,$(PY_SRCS),$(BUILD)/gen/$(basename $(notdir $(p)))_py.h)

$(BUILD)/gen/%_py.h: $$(wildcard launcher/*/$$*.py) Makefile
	@mkdir -p $(@D)
	{ echo '/* generated from $< by the Makefile */'; echo 'static const unsigned char $*_py[] = {'; \
	  od -An -v -tx1 $< | sed 's/\([0-9a-f][0-9a-f]\)/0x\1,/g'; echo '0x00};'; \
	  echo 'static const size_t $*_py_len = sizeof $*_py - 1;'; } > $@.tmp && mv $@.tmp $@
$(OBJS): | $(PY_HDRS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libddp.a
	@mkdir -p $(@D)
	$(CC) $(DDP_CFLAGS) -Wno-missing-prototypes $(CPPFLAGS) $(CFLAGS) -o $@ $< \
	    $(BUILD)/libddp.a $(CRIT_LIBS) $(DEP_LIBS) $(DDP_LDFLAGS) $(LDFLAGS)

$(BUILD)/helpers/fake_nvml/libnvidia-ml.so.1: tests/helpers/fake_nvml.c
	@mkdir -p $(@D)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden $(CFLAGS) -o $@ $< -lpthread

$(BUILD)/helpers/fake_nvml_old/libnvidia-ml.so.1: tests/helpers/fake_nvml.c
	@mkdir -p $(@D)
	$(CC) -std=c11 -D_GNU_SOURCE -DFAKE_NVML_OLD -O2 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden \
	    $(CFLAGS) -o $@ $< -lpthread

$(FAKE_CUDA): tests/helpers/fake_cuda.c
	@mkdir -p $(@D)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden $(CFLAGS) -o $@ $<

$(BUILD)/helpers/%: tests/helpers/%.c
	@mkdir -p $(@D)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2 -Wall -Wextra -Werror $(CFLAGS) -o $@ $<

# `make static`: build/static/ddplaunch, one executable with libuv, hwloc, inih, jansson, libsodium and libnuma linked
# in; glibc stays dynamic (NVML is loaded with dlopen). hwloc's five libudev calls (block devices' attributes only) are
# answered by packaging/static/noudev.c, so nothing but glibc is needed. Site config: /etc. The recipe checks
# with ldd that nothing else is needed and prints the newest GLIBC_ symbol version the executable requires.
STATIC_DIR  := build/static
STATIC_LIBS := $(STATIC_DIR)/noudev.o -Wl,-Bstatic -luv_a -lhwloc -linih -ljansson -lsodium -lnuma -Wl,-Bdynamic \
               -lpthread -ldl -lrt -lm
STATIC_OK   := linux-vdso libc libm libdl libpthread librt ld-linux-x86-64 ld-linux-aarch64

static: deps-build-check
	@mkdir -p $(STATIC_DIR)
	$(CC) -std=c11 -O2 -Wall -Wextra -Werror $(CFLAGS) -c -o $(STATIC_DIR)/noudev.o packaging/static/noudev.c
	@$(MAKE) --no-print-directory BUILD=$(STATIC_DIR) PREFIX=/usr SANITIZE= 'DEP_LIBS=$(STATIC_LIBS)' \
	    $(STATIC_DIR)/ddplaunch
	@bad=$$(ldd $(STATIC_DIR)/ddplaunch | awk '{ n = $$1; sub(/\.so.*/, "", n); sub(/.*\//, "", n); print n }' | \
	    grep -vxF -e "$$(printf '%s\n' $(STATIC_OK))" || true); \
	    [ -z "$$bad" ] || { echo "make static: $(STATIC_DIR)/ddplaunch needs more than glibc: $$bad" >&2; exit 1; }
	@echo "$(STATIC_DIR)/ddplaunch: ldd: $$(ldd $(STATIC_DIR)/ddplaunch | awk '{print $$1}' | tr '\n' ' ')"
	@echo "$(STATIC_DIR)/ddplaunch: needs glibc >= $$(sh packaging/static/glibc-version.sh $(STATIC_DIR)/ddplaunch)"

# The build dependencies alone (make static, deb, wheel): one line saying what to install when missing.
deps-build-check:
	@$(PKG_CONFIG) --exists $(PKGS) $(PKGS_HDR) 2>/dev/null && [ -e /usr/include/numa.h ] || \
	    { echo "ddplaunch: missing build dependencies; run 'make deps' or apt-get install -y $(DEPS_BUILD)" >&2; \
	      exit 1; }

# `make deb`: build/deb/ddplaunch_VERSION_ARCH.deb, built by Debian's own tools (dpkg-buildpackage, debhelper)
# from a copy of this tree with packaging/debian as debian/: the binary (linked against Debian's libraries),
# both man pages, the site config as a conffile, bash completion, and /run/lock/ddplaunch via systemd-tmpfiles.
DEB_DIR := build/deb

deb: deps-build-check
	@command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null || \
	    { echo "ddplaunch: make deb needs Debian's packaging tools: apt-get install -y $(DEPS_PACKAGE)" >&2; exit 1; }
	rm -rf $(DEB_DIR)
	mkdir -p $(DEB_DIR)/ddplaunch-$(VERSION)
	tar -cf - --exclude=./build --exclude=./.devrt --exclude=./.git . | tar -C $(DEB_DIR)/ddplaunch-$(VERSION) -xf -
	cp -r packaging/debian $(DEB_DIR)/ddplaunch-$(VERSION)/debian
	cd $(DEB_DIR)/ddplaunch-$(VERSION) && dpkg-buildpackage -b -us -uc
	@ls $(DEB_DIR)/*.deb

# `make wheel`: build/wheel/ddplaunch-VERSION-py3-none-manylinux_2_N_ARCH.whl, built offline with Debian's
# python3-build, python3-setuptools and python3-wheel from packaging/python: the static executable as the
# wheel's script (pip puts it on the environment's PATH), the man pages and bash completion under share/.
# N is the newest GLIBC_2.N symbol version the executable references (packaging/static/glibc-version.sh).
WHEEL_DIR := build/wheel
PYTHON3   ?= /usr/bin/python3

wheel: static
	@$(PYTHON3) -c 'import build, setuptools, wheel' 2>/dev/null || \
	    { echo "ddplaunch: make wheel needs apt-get install -y python3-build python3-setuptools python3-wheel" >&2; \
	      exit 1; }
	rm -rf $(WHEEL_DIR)
	mkdir -p $(WHEEL_DIR)/src/completion
	cp packaging/python/pyproject.toml packaging/python/setup.py packaging/python/README.md \
	    man/ddplaunch.1 man/ddplaunch.ini.5 $(WHEEL_DIR)/src/
	cp completion/ddplaunch.bash $(WHEEL_DIR)/src/completion/ddplaunch
	strip -o $(WHEEL_DIR)/src/ddplaunch $(STATIC_DIR)/ddplaunch
	glibc=$$(sh packaging/static/glibc-version.sh $(STATIC_DIR)/ddplaunch) && \
	    plat=manylinux_$$(echo "$$glibc" | tr . _)_$$(uname -m) && \
	    cd $(WHEEL_DIR)/src && DDPLAUNCH_VERSION=$(VERSION) DDPLAUNCH_WHEEL_PLAT=$$plat \
	    $(PYTHON3) -m build --wheel --no-isolation --outdir .. .
	@ls $(WHEEL_DIR)/*.whl

# `make test`: install what is missing (as root), build, run unit then integration tests.
test: deps-check
	@$(MAKE) --no-print-directory unit integration

# The Criterion binaries, then the Python built into the binary (tests/unit/test_*.py, plain unittest).
unit: $(BUILD)/ddplaunch $(UNIT_BINS)
	@fail=0; for t in $(UNIT_BINS); do \
	    echo "== $$t"; DDP_SRCDIR=$(CURDIR) $$t --jobs=2 || fail=1; done; \
	    echo "== tests/unit/test_*.py"; \
	    DDP_SRCDIR=$(CURDIR) $(PYTHON3) -B -m unittest discover -s tests/unit -p 'test_*.py' || fail=1; \
	    [ $$fail = 0 ] || { echo "unit tests FAILED"; exit 1; }

integration: $(BUILD)/ddplaunch $(HELP_BINS)
	@DDP_BUILD=$(CURDIR)/$(BUILD) DDP_SRCDIR=$(CURDIR) bash tests/run-integration.sh

# The restart, signal, output and torchrun-compatibility tests again, every job with warm restart on (DDP_WARM=1:
# lib.sh sets [restart] warm = yes; ddplaunch(1) WARM RESTART). About 80 s on a 2-CPU VM.
WARM_TESTS := 21-output 22-failure-restart 23-signals 24-kill9 31-torchrun-compare 36-torchrun-dropin \
              60-gloo-timeout-downsize
integration-warm: $(BUILD)/ddplaunch $(HELP_BINS)
	@fail=0; for t in $(WARM_TESTS); do DDP_WARM=1 DDP_TESTS=$$t DDP_BUILD=$(CURDIR)/$(BUILD) \
	    DDP_SRCDIR=$(CURDIR) bash tests/run-integration.sh || fail=1; done; exit $$fail

# The integration tests while every CPU is kept busy by stress-ng (as on a shared build host): a test that
# passes only on an idle machine is a flake. LOAD_CPUS=N busy workers (default: one per CPU).
test-load: $(BUILD)/ddplaunch $(HELP_BINS)
	@command -v stress-ng >/dev/null || { echo "test-load: needs stress-ng (make deps)" >&2; exit 1; }
	@stress-ng --cpu $(if $(LOAD_CPUS),$(LOAD_CPUS),$$(nproc)) --timeout 3h >/dev/null 2>&1 & hog=$$!; \
	    DDP_BUILD=$(CURDIR)/$(BUILD) DDP_SRCDIR=$(CURDIR) bash tests/run-integration.sh; rc=$$?; \
	    kill $$hog; wait $$hog 2>/dev/null; exit $$rc

# The tests again, built with sanitizers (default ASan + UBSan) in their own build directory, after lint-py.
check: lint-py
	@$(MAKE) --no-print-directory test SANITIZE=$(if $(SANITIZE),$(SANITIZE),address$(comma)undefined)

# Install Debian packages: as root with apt-get, otherwise through sudo; with neither, one line saying what to
# run as root. $(1): the packages.
define apt_install
if [ "$$(id -u)" = 0 ]; then su=; elif command -v sudo >/dev/null 2>&1; then su=sudo; else \
    echo "ddplaunch: missing Debian packages; as root run: apt-get install -y $(strip $(1))" >&2; exit 1; fi; \
echo "ddplaunch: installing Debian packages$${su:+ with sudo}: $(strip $(1))"; \
$$su env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
$$su env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(1)
endef

# True (0) when the build dependencies and a python3 with torch are present.
have_build_deps = $(PKG_CONFIG) --exists $(PKGS) $(PKGS_HDR) 2>/dev/null && [ -e /usr/include/numa.h ] && \
    /usr/bin/python3 -c 'import torch' >/dev/null 2>&1

deps:
	@$(call apt_install,$(DEPS_ALL))

deps-check:
	@if ! { $(have_build_deps) && $(PKG_CONFIG) --exists criterion; }; then $(MAKE) --no-print-directory deps; fi

deps-demo:
	@if ! { $(have_build_deps); }; then $(call apt_install,$(DEPS_BUILD) $(DEPS_DEMO)); fi

install: $(BUILD)/ddplaunch
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
	    $(DESTDIR)$(SYSCONFDIR)/ddplaunch
	install -m 0755 $(BUILD)/ddplaunch $(DESTDIR)$(BINDIR)/ddplaunch
	install -m 0644 man/ddplaunch.1 $(DESTDIR)$(MANDIR)/man1/ddplaunch.1
	install -m 0644 man/ddplaunch.ini.5 $(DESTDIR)$(MANDIR)/man5/ddplaunch.ini.5
	install -m 0644 config/ddplaunch.ini $(DESTDIR)$(SYSCONFDIR)/ddplaunch/ddplaunch.ini
	install -d $(DESTDIR)$(BASHCOMPDIR)
	install -m 0644 completion/ddplaunch.bash $(DESTDIR)$(BASHCOMPDIR)/ddplaunch
	for f in config/presets/*.ini; do [ -e "$$f" ] || continue; install -d $(DESTDIR)$(DATADIR)/presets; \
	    install -m 0644 "$$f" $(DESTDIR)$(DATADIR)/presets/; done

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/ddplaunch $(DESTDIR)$(MANDIR)/man1/ddplaunch.1 \
	    $(DESTDIR)$(MANDIR)/man5/ddplaunch.ini.5 $(DESTDIR)$(SYSCONFDIR)/ddplaunch/ddplaunch.ini \
	    $(DESTDIR)$(BASHCOMPDIR)/ddplaunch
	rm -rf $(DESTDIR)$(DATADIR)
	-rmdir $(DESTDIR)$(SYSCONFDIR)/ddplaunch 2>/dev/null

# The main job: a real multi-worker DDP training run on this machine's CPUs (or GPUs).
demo: deps-demo
	@$(MAKE) --no-print-directory demo-run

demo-run: $(BUILD)/ddplaunch
	@bash examples/demo.sh $(BUILD)/ddplaunch

lint-man:
	groff -ww -man -z man/ddplaunch.1 man/ddplaunch.ini.5

# The Python built into the binary (PY_SRCS) and its unit tests: each file compiles (py_compile, its cache under
# $(BUILD)) and pyflakes (Debian's pyflakes3) finds nothing in it. Missing pyflakes fails the check, never skips it.
PYFLAKES ?= $(shell command -v pyflakes3 || command -v pyflakes)
PY_LINT  := $(PY_SRCS) $(sort $(wildcard tests/unit/*.py))
lint-py:
	@[ -n "$(PYFLAKES)" ] || { echo "lint-py: pyflakes not found (apt-get install pyflakes3)" >&2; exit 1; }
	@PYTHONPYCACHEPREFIX=$(CURDIR)/$(BUILD)/pycache $(PYTHON3) -m py_compile $(PY_LINT)
	@$(PYFLAKES) $(PY_LINT) && echo "lint-py: $(words $(PY_LINT)) files clean (py_compile, pyflakes)"

# `make fuzz`: every libFuzzer harness of tests/fuzz for FUZZ_TIME seconds each (CI: 20).
FUZZ_TIME ?= 60
fuzz:
	@bash tests/fuzz/run.sh $(FUZZ_TIME)

# One formatting, by a tool: clang-format 14 with .clang-format over the C sources. `make format` rewrites them,
# `make format-check` (run by CI) fails on any file that `make format` would change and names it.
CLANG_FORMAT ?= $(shell command -v clang-format-14 || command -v clang-format)
FORMAT_DIRS  := launcher $(wildcard launcher/*/) tests/unit tests/helpers tests/fuzz packaging/static
FORMAT_FILES  = $(sort $(wildcard $(addsuffix /*.c,$(FORMAT_DIRS:/=)) $(addsuffix /*.h,$(FORMAT_DIRS:/=))))

format:
	$(CLANG_FORMAT) -i $(FORMAT_FILES)

format-check:
	@[ -n "$(CLANG_FORMAT)" ] || { echo "format-check: clang-format not found (apt-get install clang-format)" >&2; \
	    exit 1; }
	@$(CLANG_FORMAT) --version | grep -q 'version 14\.' || \
	    { echo "format-check: $(CLANG_FORMAT) is not clang-format 14: $$($(CLANG_FORMAT) --version)" >&2; exit 1; }
	@$(CLANG_FORMAT) --dry-run -Werror $(FORMAT_FILES) && echo "format-check: $(words $(FORMAT_FILES)) files clean"

bench: $(BUILD)/ddplaunch $(HELP_BINS)
	@bash bench/run.sh $(BUILD)/ddplaunch

clean:
	rm -rf build

-include $(OBJS:.o=.d)
