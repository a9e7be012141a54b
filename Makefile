# ddplaunch: a job launcher and process supervisor for multi-GPU PyTorch training.
# Plain GNU make. Project flags first, user CFLAGS last.

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
DATADIR    ?= $(PREFIX)/share/ddplaunch
DESTDIR    ?=
VERSION    := 0.1.0

CC         ?= cc
PKG_CONFIG ?= pkg-config
SANITIZE   ?=

comma      := ,
ifeq ($(SANITIZE),)
BUILD      ?= build
SANFLAGS   :=
else
BUILD      ?= build/san-$(subst $(comma),-,$(SANITIZE))
SANFLAGS   := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

PKGS       := libuv hwloc inih
DEP_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
DEP_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null) -lnuma -ldl -lm
CRIT_LIBS  := $(shell $(PKG_CONFIG) --libs criterion 2>/dev/null)

WARN       := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
              -Wformat=2 -Wno-format-nonliteral
DDP_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g $(WARN) -MMD -MP $(SANFLAGS) $(DEP_CFLAGS) \
              -DDDP_VERSION='"$(VERSION)"' -DDDP_SYSCONFDIR='"$(SYSCONFDIR)"' \
              -DDDP_DATADIR='"$(DATADIR)"'
DDP_LDFLAGS := $(SANFLAGS)

SRCS       := $(sort $(wildcard launcher/*.c))
LIB_SRCS   := $(filter-out launcher/main.c,$(SRCS))
OBJS       := $(SRCS:launcher/%.c=$(BUILD)/obj/%.o)
LIB_OBJS   := $(LIB_SRCS:launcher/%.c=$(BUILD)/obj/%.o)
UNIT_SRCS  := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
HELP_SRCS  := $(sort $(wildcard tests/helpers/*.c))
HELP_BINS  := $(HELP_SRCS:tests/helpers/%.c=$(BUILD)/helpers/%)

# Debian packages for building, testing and the demo.
DEPS_BUILD := build-essential pkg-config libuv1-dev libhwloc-dev libnuma-dev libinih-dev
DEPS_TEST  := libcriterion-dev python3 python3-torch hwloc-nox numactl iproute2 procps \
              groff-base mandoc valgrind clang libclang-rt-14-dev jq \
              slurmctld slurmd slurm-client munge
DEPS_ALL   := $(DEPS_BUILD) $(DEPS_TEST)

.PHONY: all test unit integration check deps deps-check install uninstall demo fuzz bench clean lint-man

all: $(BUILD)/ddplaunch

$(BUILD)/ddplaunch: $(OBJS)
	$(CC) $(DDP_LDFLAGS) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) $(LDLIBS)

$(BUILD)/libddp.a: $(LIB_OBJS)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/obj/%.o: launcher/%.c
	@mkdir -p $(@D)
	$(CC) $(DDP_CFLAGS) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libddp.a
	@mkdir -p $(@D)
	$(CC) $(DDP_CFLAGS) -Ilauncher -Wno-missing-prototypes $(CPPFLAGS) $(CFLAGS) -o $@ $< \
	    $(BUILD)/libddp.a $(CRIT_LIBS) $(DEP_LIBS) $(DDP_LDFLAGS) $(LDFLAGS)

$(BUILD)/helpers/%: tests/helpers/%.c
	@mkdir -p $(@D)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror $(CFLAGS) -o $@ $<

# `make test`: install what is missing (as root), build, run unit then integration tests.
test: deps-check
	@$(MAKE) --no-print-directory unit integration

unit: $(BUILD)/ddplaunch $(UNIT_BINS)
	@fail=0; for t in $(UNIT_BINS); do \
	    echo "== $$t"; DDP_SRCDIR=$(CURDIR) $$t --jobs=2 || fail=1; done; \
	    [ $$fail = 0 ] || { echo "unit tests FAILED"; exit 1; }

integration: $(BUILD)/ddplaunch $(HELP_BINS)
	@DDP_BUILD=$(CURDIR)/$(BUILD) DDP_SRCDIR=$(CURDIR) bash tests/run-integration.sh

# The tests again, built with sanitizers (default ASan + UBSan) in their own build directory.
check:
	@$(MAKE) --no-print-directory test SANITIZE=$(if $(SANITIZE),$(SANITIZE),address$(comma)undefined)

deps:
	@if [ "$$(id -u)" = 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEPS_ALL); \
	else \
	    echo "ddplaunch: missing build or test dependencies; install them with:"; \
	    echo "  sudo apt-get install -y $(DEPS_ALL)"; exit 1; \
	fi

deps-check:
	@if ! $(PKG_CONFIG) --exists $(PKGS) criterion 2>/dev/null || [ ! -e /usr/include/numa.h ] || \
	    ! /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then $(MAKE) --no-print-directory deps; fi

install: $(BUILD)/ddplaunch
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
	    $(DESTDIR)$(SYSCONFDIR)/ddplaunch $(DESTDIR)$(DATADIR)/presets
	install -m 0755 $(BUILD)/ddplaunch $(DESTDIR)$(BINDIR)/ddplaunch
	install -m 0644 man/ddplaunch.1 $(DESTDIR)$(MANDIR)/man1/ddplaunch.1
	install -m 0644 man/ddplaunch.ini.5 $(DESTDIR)$(MANDIR)/man5/ddplaunch.ini.5
	install -m 0644 config/ddplaunch.ini $(DESTDIR)$(SYSCONFDIR)/ddplaunch/ddplaunch.ini
	for f in config/presets/*.ini; do [ -e "$$f" ] && install -m 0644 "$$f" $(DESTDIR)$(DATADIR)/presets/; done; true

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/ddplaunch $(DESTDIR)$(MANDIR)/man1/ddplaunch.1 \
	    $(DESTDIR)$(MANDIR)/man5/ddplaunch.ini.5 $(DESTDIR)$(SYSCONFDIR)/ddplaunch/ddplaunch.ini
	rm -rf $(DESTDIR)$(DATADIR)
	-rmdir $(DESTDIR)$(SYSCONFDIR)/ddplaunch 2>/dev/null

# The main job: a real multi-worker DDP training run on this machine's CPUs (or GPUs).
demo: deps-check $(BUILD)/ddplaunch
	@bash examples/demo.sh $(BUILD)/ddplaunch

lint-man:
	groff -ww -man -z man/ddplaunch.1 man/ddplaunch.ini.5

FUZZ_TIME ?= 60
fuzz:
	@bash tests/fuzz/run.sh $(FUZZ_TIME)

bench: $(BUILD)/ddplaunch $(HELP_BINS)
	@bash bench/run.sh $(BUILD)/ddplaunch

clean:
	rm -rf build

-include $(OBJS:.o=.d)
