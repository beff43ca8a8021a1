# cbackup — see README.md. `make deps`, `make`, `make check`, `make demo`.
PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
PKGS    := libarchive libzstd lzo2 zlib libcrypto
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
VERSION := 0.1.0

CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
           -DCB_VERSION='"$(VERSION)"' -Iinclude -I/usr/include/iniparser $(PKG_CFLAGS)
LDLIBS  += $(PKG_LIBS) -liniparser -lpthread
ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -O1
LDFLAGS += -fsanitize=address,undefined
BUILD   := build/san
else
BUILD   := build/rel
endif

SRCS    := $(wildcard src/*.c)
OBJS    := $(patsubst src/%.c,$(BUILD)/%.o,$(SRCS))
LIBOBJS := $(filter-out $(BUILD)/main.o,$(OBJS))
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))

.PHONY: all deps check unit e2e demo install clean bench
all: cbackup

cbackup: $(BUILD)/cbackup
	cp -f $< $@

$(BUILD)/cbackup: $(OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: src/%.c $(wildcard include/*.h src/*.h) | $(BUILD)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c $(LIBOBJS) $(wildcard include/*.h) | $(BUILD)/tests
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJS) $(LDLIBS) -lcmocka

$(BUILD) $(BUILD)/tests:
	mkdir -p $@

deps:
	@sh scripts/deps.sh

check: deps
	@$(MAKE) --no-print-directory all $(UNIT_BINS)
	@UNIT_BINS="$(UNIT_BINS)" sh tests/run.sh

unit: all $(UNIT_BINS)
	@UNIT_BINS="$(UNIT_BINS)" E2E=0 sh tests/run.sh

e2e: all
	@UNIT_BINS= sh tests/run.sh $(T)

demo: deps
	@$(MAKE) --no-print-directory all
	@sh scripts/demo.sh

bench: all
	sh bench/stage.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/share/man/man8 $(DESTDIR)$(PREFIX)/share/man/man5 \
	           $(DESTDIR)$(PREFIX)/share/doc/cbackup
	install -m 755 cbackup $(DESTDIR)$(PREFIX)/sbin/cbackup
	install -m 644 man/cbackup.8 $(DESTDIR)$(PREFIX)/share/man/man8/cbackup.8
	install -m 644 man/cbackup.conf.5 $(DESTDIR)$(PREFIX)/share/man/man5/cbackup.conf.5
	install -m 644 vzdump.conf.example README.md $(DESTDIR)$(PREFIX)/share/doc/cbackup/

clean:
	rm -rf build cbackup
