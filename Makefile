# cbackup — see README.md. `make deps`, `make`, `make check`, `make demo`.
PREFIX  ?= /usr/local
DESTDIR ?=
SBINDIR ?= $(PREFIX)/sbin
MANDIR  ?= $(PREFIX)/share/man
DOCDIR  ?= $(PREFIX)/share/doc/cbackup
SYSCONFDIR    ?= /etc
LOCALSTATEDIR ?= /var
UNITDIR       ?= $(PREFIX)/lib/systemd/system
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
CC      ?= cc
PKGS    := libarchive libzstd lzo2 zlib libcrypto libisal fuse3 libnbd libcurl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# libnbd and libcurl are opened when a run needs them (include/cb_dynlib.h):
# their headers at build time, not their thirty libraries in every run
DLOPEN_PKGS := libnbd libcurl
PKG_LIBS   := $(shell pkg-config --libs $(filter-out $(DLOPEN_PKGS),$(PKGS)) 2>/dev/null) -ldl
# iniparser: its pkg-config file where the distribution ships one (Debian 12
# does not), the Debian path otherwise
INI_CFLAGS := $(or $(shell pkg-config --cflags iniparser 2>/dev/null),-I/usr/include/iniparser)
INI_LIBS   := $(or $(shell pkg-config --libs iniparser 2>/dev/null),-liniparser)
INI_HEADER := $(or $(wildcard $(patsubst -I%,%,$(filter -I%,$(INI_CFLAGS)))/iniparser.h),$(wildcard /usr/include/iniparser.h))
# the number of cores, for the sub-makes of check and demo
NPROC := $(shell nproc 2>/dev/null || echo 2)
VERSION := 0.1.0

# Without the libraries every compile fails with a missing header: say so once,
# before anything runs (goals that install or need no compiler go on).
NOLIB_GOALS := deps clean lint check demo fuzz-deps print-libflags
ifneq ($(or $(MAKECMDGOALS),all),$(filter $(NOLIB_GOALS),$(or $(MAKECMDGOALS),all)))
MISSING := $(foreach p,$(PKGS),$(if $(shell pkg-config --exists $(p) 2>/dev/null && echo y),,$(p))) \
           $(if $(INI_HEADER),,iniparser)
ifneq ($(strip $(MISSING)),)
$(error missing libraries: $(strip $(MISSING)) (pkg-config, headers): run make deps)
endif
endif

# The flags every build shares (release, SAN=1, fuzzing); each adds its own.
# A user's CFLAGS come last, so that they can override any of these.
# DEVELOPER=1 (make check and CI set it) turns warnings into errors; a user
# building a release with another compiler is not stopped by a new warning.
DEVELOPER ?= 0
COMMON_CFLAGS := -std=gnu11 -Wall -Wextra $(if $(filter 1,$(DEVELOPER)),-Werror) \
                 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
                 -DCB_VERSION='"$(VERSION)"' -Iinclude $(INI_CFLAGS) $(PKG_CFLAGS)
# UBSan findings stop the program (exit non-zero) like ASan's, or a test
# that triggers one would still pass
SAN_FLAGS     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

CFLAGS  ?= -O2 -g
LDLIBS  += $(PKG_LIBS) $(INI_LIBS) -lpthread
ifeq ($(SAN),1)
ALL_CFLAGS = $(COMMON_CFLAGS) $(CFLAGS) $(SAN_FLAGS) -O1
LDFLAGS += -fsanitize=address,undefined
BUILD   := build/san
else
ALL_CFLAGS = $(COMMON_CFLAGS) $(CFLAGS)
BUILD   := build/rel
endif

# src/ is laid out by stage of the data flow, one folder a floor (src/README.md:
# core < sink < codec < archive < stage < guest < vm < ops < job < cli).
# Every folder is picked up here. Headers stay flat in include/: they are
# the modules' contracts, included by name from every folder.
SRCS    := $(wildcard src/*/*.c)
OBJS    := $(patsubst src/%.c,$(BUILD)/%.o,$(SRCS))
LIBOBJS := $(filter-out %/main.o,$(OBJS))
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))

.PHONY: all deps lint check unit e2e demo install uninstall clean bench fuzz fuzz-deps fuzz-build fuzz-replay helpers unit-bins mutants docs check-docs print-libflags
# A SAN=1 build's binary is ./cbackup-san, never ./cbackup: `make SAN=1
# unit` (what .ci/run does after make check) used to leave a sanitized
# ./cbackup behind, which the e2e scripts and tests/soak.sh then ran
# (its leak report on a signal's exit failed t0650). The e2e scripts run
# it with CBACKUP=$PWD/cbackup-san.
ifeq ($(SAN),1)
TOP_BIN := cbackup-san
else
TOP_BIN := cbackup
endif
all: $(TOP_BIN)

$(TOP_BIN): $(BUILD)/cbackup
	cp -f $< $@

$(BUILD)/cbackup: $(OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: src/%.c | $(BUILD)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

-include $(OBJS:.o=.d)

$(BUILD)/tests/%: tests/unit/%.c $(LIBOBJS) $(wildcard include/*.h tests/unit/*.h) | $(BUILD)/tests
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJS) $(LDLIBS) -lcmocka

$(BUILD) $(BUILD)/tests:
	mkdir -p $@

deps:
	@sh scripts/deps.sh

# the lint first: a test body whose assertions cannot fail proves nothing;
# and the layers (scripts/layers.py): nothing in src/core/ uses or includes
# a module above it, no two files use each other, directly or in a circle
lint:
	@sh tests/lint.sh
	@python3 scripts/layers.py
	@sh scripts/filesize.sh

check: lint
	@sh scripts/deps.sh
	@$(MAKE) --no-print-directory -j$(NPROC) DEVELOPER=1 all helpers $(UNIT_BINS)
	@$(MAKE) --no-print-directory DEVELOPER=1 check-docs
	@UNIT_BINS="$(UNIT_BINS)" sh tests/run.sh

unit-bins: $(UNIT_BINS)

# the mutation check (tests/mutants/run.sh; long: not part of check)
mutants: all helpers unit-bins
	@bash tests/mutants/run.sh $(M)

unit: all $(UNIT_BINS)
	@UNIT_BINS="$(UNIT_BINS)" E2E=0 sh tests/run.sh

e2e: all helpers
	@UNIT_BINS= sh tests/run.sh $(T)

demo: deps
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@sh scripts/demo.sh

bench: all
	sh bench/stage.sh

# What a program built on the library objects needs (bench/compress.sh's
# driver): the one list of libraries, kept here.
print-libflags:
	@echo $(PKG_CFLAGS) $(INI_CFLAGS) $(LDLIBS)

install: all
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(DOCDIR)
	install -m 755 cbackup $(DESTDIR)$(SBINDIR)/cbackup
	install -m 644 man/cbackup.8 $(DESTDIR)$(MANDIR)/man8/cbackup.8
	install -m 644 man/cbackup.conf.5 $(DESTDIR)$(MANDIR)/man5/cbackup.conf.5
	install -m 644 man/cbackup-idx.5 $(DESTDIR)$(MANDIR)/man5/cbackup-idx.5
	install -m 644 vzdump.conf.example README.md $(DESTDIR)$(DOCDIR)/
	@# the scheduler files name the installed binary; the cron job is
	@# installed commented out (enable it, or the timer: not both)
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(COMPLETIONDIR) $(DESTDIR)$(SYSCONFDIR)/cron.d
	sed 's|/usr/local/sbin/cbackup|$(SBINDIR)/cbackup|' contrib/cbackup.service >build/cbackup.service
	install -m 644 build/cbackup.service $(DESTDIR)$(UNITDIR)/cbackup.service
	install -m 644 contrib/cbackup.timer $(DESTDIR)$(UNITDIR)/cbackup.timer
	$(MAKE) --no-print-directory build/cbackup.cron
	test -e $(DESTDIR)$(SYSCONFDIR)/cron.d/cbackup || \
		install -m 644 build/cbackup.cron $(DESTDIR)$(SYSCONFDIR)/cron.d/cbackup
	install -m 644 contrib/cbackup.bash-completion $(DESTDIR)$(COMPLETIONDIR)/cbackup
	install -d -m 750 $(DESTDIR)$(LOCALSTATEDIR)/lib/cbackup $(DESTDIR)$(LOCALSTATEDIR)/lib/cbackup/dump

.PHONY: build/cbackup.cron uninstall
build/cbackup.cron:
	@mkdir -p build
	sed -e 's|^0 3 \* \* \*\troot\tcbackup |#0 3 * * *\troot\t$(SBINDIR)/cbackup |' \
	    -e 's|^# install -m 644 .*|# Installed by make install with the job commented out: remove the # to enable it.|' \
	    contrib/cbackup.cron >build/cbackup.cron

# Removes what install put there, with the same PREFIX/DESTDIR/SBINDIR/MANDIR.
# Kept: a cron file the admin edited (it differs from the one installed),
# /etc/cbackup.conf (install never writes it) and /var/lib/cbackup with its
# dump directory, which hold backups.
uninstall: build/cbackup.cron
	rm -f $(DESTDIR)$(SBINDIR)/cbackup $(DESTDIR)$(MANDIR)/man8/cbackup.8 \
	      $(DESTDIR)$(MANDIR)/man5/cbackup.conf.5 $(DESTDIR)$(MANDIR)/man5/cbackup-idx.5 \
	      $(DESTDIR)$(DOCDIR)/vzdump.conf.example $(DESTDIR)$(DOCDIR)/README.md \
	      $(DESTDIR)$(UNITDIR)/cbackup.service $(DESTDIR)$(UNITDIR)/cbackup.timer \
	      $(DESTDIR)$(COMPLETIONDIR)/cbackup
	-rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null
	if cmp -s build/cbackup.cron $(DESTDIR)$(SYSCONFDIR)/cron.d/cbackup; then \
		rm -f $(DESTDIR)$(SYSCONFDIR)/cron.d/cbackup; \
	elif [ -e $(DESTDIR)$(SYSCONFDIR)/cron.d/cbackup ]; then \
		echo "uninstall: kept $(DESTDIR)$(SYSCONFDIR)/cron.d/cbackup (edited since install)"; fi

# ---- fuzzing (issue 5): libFuzzer targets in tests/fuzz/ ---------------------
# `make fuzz` builds the library objects with clang + ASan/UBSan into
# build/fuzz/, links each tests/fuzz/fuzz_*.c with libFuzzer, replays the
# kept crashes (tests/fuzz/crashes/TARGET/) as regression inputs, then fuzzes
# each target for FUZZ_SECONDS from tests/fuzz/corpus/TARGET/ (new inputs go
# to build/fuzz/corpus/TARGET/, new crashes to tests/fuzz/crashes/TARGET/).
# clang and libclang-rt-14-dev are installed here only, not by `make deps`.
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS    := $(addprefix build/fuzz/,$(FUZZ_TARGETS))
FUZZ_CFLAGS  := $(COMMON_CFLAGS) -O1 -g $(SAN_FLAGS)
FUZZ_OBJS    := $(patsubst src/%.c,build/fuzz/obj/%.o,$(filter-out %/main.c,$(SRCS)))

fuzz-deps:
	@for p in clang libclang-rt-14-dev; do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then echo "fuzz: installing:$$missing"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi

build/fuzz/obj/%.o: src/%.c $(wildcard include/*.h src/*/*.h) | build/fuzz/obj
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJS) | build/fuzz/obj
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJS) $(LDLIBS)

build/fuzz/obj:
	mkdir -p $@

.SECONDARY: $(FUZZ_OBJS)

fuzz-build: fuzz-deps
	@$(MAKE) --no-print-directory $(FUZZ_BINS)

fuzz: fuzz-build
	@failed=; for t in $(FUZZ_TARGETS); do \
		mkdir -p build/fuzz/corpus/$$t tests/fuzz/crashes/$$t; \
		if [ -n "$$(ls -A tests/fuzz/crashes/$$t)" ]; then \
			echo "fuzz: $$t: replaying the kept crash inputs"; \
			build/fuzz/$$t -runs=1 tests/fuzz/crashes/$$t/* >build/fuzz/$$t.replay.log 2>&1 || \
			{ grep -E "^(SUMMARY|Running: )" build/fuzz/$$t.replay.log | tail -n 2; \
			  echo "fuzz: $$t: a kept crash input still fails"; failed="$$failed $$t"; continue; }; \
		fi; \
		echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
		build/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
			-max_len=65536 -print_final_stats=1 -artifact_prefix=tests/fuzz/crashes/$$t/ \
			build/fuzz/corpus/$$t tests/fuzz/corpus/$$t >build/fuzz/$$t.log 2>&1 || \
			{ grep -E "^(SUMMARY|==[0-9]+==ERROR)" build/fuzz/$$t.log | head -n 2; \
			  echo "fuzz: $$t FAILED (input kept in tests/fuzz/crashes/$$t/, log build/fuzz/$$t.log)"; \
			  failed="$$failed $$t"; }; \
		grep -E "^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added)" build/fuzz/$$t.log; \
	done; \
	[ -z "$$failed" ] || { echo "fuzz: failed:$$failed"; exit 1; }

# ---- replaying the kept fuzz inputs without libFuzzer (CI) ------------------
# Each target linked with tests/fuzz/replay.c (a main that feeds it the files
# named on its command line) and the SAN=1 library objects, built by $(CC):
# no clang needed. Replays tests/fuzz/crashes/TARGET/* and corpus/TARGET/*.
REPLAY_BINS := $(addprefix $(BUILD)/fuzz/,$(FUZZ_TARGETS))

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $(LIBOBJS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< tests/fuzz/replay.c $(LIBOBJS) $(LDLIBS)

ifeq ($(SAN),1)
fuzz-replay: $(REPLAY_BINS)
	@for t in $(FUZZ_TARGETS); do \
		set -- $$(ls -d tests/fuzz/crashes/$$t/* tests/fuzz/corpus/$$t/* 2>/dev/null); \
		[ $$# = 0 ] && continue; \
		$(BUILD)/fuzz/$$t "$$@" >$(BUILD)/fuzz/$$t.replay.log 2>&1 || \
			{ tail -n 30 $(BUILD)/fuzz/$$t.replay.log; echo "fuzz-replay: $$t FAILED"; exit 1; }; \
		echo "fuzz-replay: $$t: $$# input(s) replayed under ASan+UBSan, no error"; \
	done
else
fuzz-replay:
	@$(MAKE) --no-print-directory SAN=1 fuzz-replay
endif

# ---- docs: the option lists of the man pages come from cb_opt_table ---------
MANOPTS := $(BUILD)/manopts

$(MANOPTS): scripts/manopts.c $(LIBOBJS)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJS) $(LDLIBS)

docs: $(MANOPTS)
	@sh scripts/gendocs.sh $(MANOPTS)

check-docs: $(MANOPTS)
	@sh scripts/gendocs.sh $(MANOPTS) --check

# ---- e2e helper programs (tests/helpers/*.c) --------------------------------
# Plain builds, never sanitized: faultinject.so is LD_PRELOADed into any
# cbackup, and the others are the guests' stand-ins.
HELPER_DIR  := build/e2e-helpers
HELPER_SRCS := $(wildcard tests/helpers/*.c)
HELPER_BINS := $(patsubst tests/helpers/%.c,$(HELPER_DIR)/%,$(filter-out %/faultinject.c,$(HELPER_SRCS))) \
               $(HELPER_DIR)/faultinject.so
HELPER_CFLAGS := -O2 -Wall -Wextra -Werror

helpers: $(HELPER_BINS)

$(HELPER_DIR)/faultinject.so: tests/helpers/faultinject.c | $(HELPER_DIR)
	cc $(HELPER_CFLAGS) -shared -fPIC -o $@ $< -ldl

$(HELPER_DIR)/%: tests/helpers/%.c | $(HELPER_DIR)
	cc $(HELPER_CFLAGS) -o $@ $<

$(HELPER_DIR):
	mkdir -p $@

clean:
	rm -rf build cbackup cbackup-san
