#!/bin/bash
# Config files are trusted only when they deserve it (issue 25, item 10):
# running as root, a config that is group- or other-writable, or owned by
# another user, or in a directory another user can write (a sticky one as
# /tmp aside), is refused with exit 2, naming the file (or directory), its
# owner and its mode, as sshd's StrictModes; its hook script never runs.
# --config on a FIFO or a device is refused (exit 2) without blocking.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
D=$SCRATCH/dump
MARK=$SCRATCH/script-ran

# conf FILE: a config whose hook script leaves $MARK
conf() {
	cat >"$1" <<-CONF
	tmpdir = $SCRATCH/tmp
	dumpdir = $D
	script = $SCRATCH/hook.sh
	[ct 490]
	root = $SRC
	CONF
}

# refused FILE ERE: backup with config FILE is exit 2, the error matches
# ERE, the hook did not run and no archive was written
refused() {
	cbackup_run 2 490 --config "$1"
	test_has "$CB_ERR" "^ERROR: .*$2"
	test ! -e "$MARK"
	test -z "$(find "$D" -name "*.tar*")"
}

test_expect_success ROOT 'setup: a guest, a hook script' '
	make_small_tree "$SRC"
	mkdir -p "$SCRATCH/tmp" "$D"
	printf "#!/bin/sh\ntouch %s\n" "$MARK" >"$SCRATCH/hook.sh"
	chmod 755 "$SCRATCH/hook.sh"
'

test_expect_success ROOT 'a config writable by others: refused, naming file, owner and mode' '
	conf "$SCRATCH/w.conf"
	chmod 666 "$SCRATCH/w.conf"
	refused "$SCRATCH/w.conf" "config .*/w\.conf. is not trusted: owned by root \(uid 0\), mode 0666"
'

test_expect_success ROOT 'a config writable by its group: refused' '
	conf "$SCRATCH/g.conf"
	chmod 620 "$SCRATCH/g.conf"
	refused "$SCRATCH/g.conf" "g\.conf. is not trusted: owned by root \(uid 0\), mode 0620"
'

test_expect_success ROOT 'a config owned by another user: refused' '
	conf "$SCRATCH/n.conf"
	chown 65534 "$SCRATCH/n.conf"
	refused "$SCRATCH/n.conf" "n\.conf. is not trusted: owned by (nobody \()?uid 65534\)?, mode 0644"
'

test_expect_success ROOT 'a config in a directory others can write, and a symlink to it: refused' '
	mkdir -m 777 "$SCRATCH/open"
	chmod 777 "$SCRATCH/open"
	conf "$SCRATCH/open/c.conf"
	refused "$SCRATCH/open/c.conf" "is not trusted: its directory .*/open. is owned by root \(uid 0\), mode 0777"
	ln -s "$SCRATCH/open/c.conf" "$SCRATCH/link.conf"
	refused "$SCRATCH/link.conf" "link\.conf. is not trusted: its directory .*/open. .*mode 0777"
'

test_expect_success ROOT 'a FIFO or a device as --config: refused, exit 2, nothing blocks' '
	mkfifo "$SCRATCH/fifo.conf"
	rc=0
	timeout 20 "$CBACKUP" 490 --config "$SCRATCH/fifo.conf" >"$CB_OUT" 2>"$CB_ERR" || rc=$?
	test "$rc" = 2
	test_has "$CB_ERR" "^ERROR: config .*fifo\.conf. is not a regular file \(a FIFO\)"
	cbackup_run 2 490 --config /dev/null
	test_has "$CB_ERR" "^ERROR: config ./dev/null. is not a regular file \(a device\)"
	cbackup_run 2 490 --config "$SCRATCH"
	test_has "$CB_ERR" "^ERROR: config .* is not a regular file \(a directory\)"
	test ! -e "$MARK"
'

test_expect_success ROOT 'a root-owned 0600 config (mktemp) in a sticky directory is used' '
	mkdir -m 1777 "$SCRATCH/sticky"
	chmod 1777 "$SCRATCH/sticky"
	f=$(mktemp "$SCRATCH/sticky/cfg.XXXXXX")
	conf "$f"
	cbackup_run 0 490 --config "$f"
	test -e "$MARK"
'

test_done
