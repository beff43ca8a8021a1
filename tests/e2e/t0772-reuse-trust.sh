#!/bin/bash
# Units taken on trust (issue 27): with a kept staging copy, a unit whose
# staged files are unchanged since the previous archive (same token: inode,
# size, mtime, ctime; the same headers and other bytes) is copied from that
# archive without its files' data being read. Shown mechanically: the
# staged copies of the big files fail every read past their first 64 bytes
# (the magic-number look; tests/helpers/faultinject.c), and the backup still
# succeeds. A member changed in any way the staging delta knows (content
# with size and mtime kept, mode, owner, xattr, rename, inode swap; a
# symlink's target, a directory's mtime) is read
# and keyed from its bytes: GNU tar gives back the source. A trust map that
# names another archive than the previous one is not used.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
DUMP=$SCRATCH/dump
STG=$SCRATCH/stg

make_tree() {
	mkdir -p "$DUMP" "$STG"
	make_reuse_tree "$SRC" 300
	setfattr -n user.keep -v one "$SRC/etc/conf"
	ln -s f1.txt "$SRC/usr/share/link"
	mkdir -p "$SRC/usr/lib"
	seq 1 5000 >"$SRC/usr/lib/a.txt"
}

night() {
	sleep 1.1   # archive names go by the second
	cbackup_run 0 backup --root "$SRC" --id 101 --type ct --tmpdir "$STG" \
		--dumpdir "$DUMP" --keep-staging 1 --unit-size 1 --verbose "$@"
}

newest() { ls -1 "$DUMP"/vzdump-lxc-101-*.tar.zst | tail -n 1; }

# the staged copy of a file of the source
staged() { find "$STG" -path "*/usr/share/$1" -type f | head -n 1; }

# "UNITS BYTES-NOT-READ" from the last run's verbose line
trusted() {
	sed -n 's/.*taken on trust: \([0-9]*\) units, \([0-9.]*[KMG]*i*B\) of staged.*/\1 \2/p' "$CB_ERR"
}

same_as_no_reuse() {
	local ref=$SCRATCH/ref-$RANDOM
	mkdir "$ref"
	sleep 1.1
	cbackup_run 0 backup --root "$SRC" --id 101 --type ct --tmpdir "$STG" \
		--dumpdir "$ref" --keep-staging 1 --unit-size 1 --reuse 0
	cmp "$(newest)" "$(ls -1 "$ref"/vzdump-lxc-101-*.tar.zst)"
}

# the newest archive's .sha256 holds (sha256sum reads the archive whole)
sha256_ok() { (cd "$DUMP" && sha256sum --strict -c "$(basename "$(newest)").sha256"); }

# GNU tar gives back the source as it was at the freeze
tar_equals_source() {
	rm -rf "$SCRATCH/out"
	mkdir "$SCRATCH/out"
	zstd -dc "$(newest)" | tar --xattrs --xattrs-include="*" --numeric-owner -xpf - \
		-C "$SCRATCH/out" --exclude=./etc/cbackup
	rm -rf "$SCRATCH/out/etc/cbackup"
	compare_trees --no-acl --no-root-mtime "$SRC" "$SCRATCH/out"
}

test_expect_success ROOT 'night 1: no trust map yet; one is kept beside the staging copy' '
	make_tree
	night
	test_has "$CB_ERR" "nothing taken on trust: (no trust map|there is no previous archive)"
	ls "$STG"/cbackup/*.trust
	test "$(stat -c %a "$(ls "$STG"/cbackup/*.trust)")" = 600
'

test_expect_success ROOT 'night 2, nothing changed: the big files are not read, same bytes as reuse 0' '
	big=$(staged big.bin)
	gz=$(staged data.gz)
	test -n "$big"
	test -n "$gz"
	with_fault "read:EIO:$big:after=64;read:EIO:$gz:after=64" night --output-format json
	read -r units unread <<<"$(trusted)"
	test "$units" -gt 4
	case $unread in *MiB) ;; *) echo "not read: $unread"; false ;; esac
	# the JSON status says the same
	python3 -c "import json, sys; g = json.load(open(sys.argv[1]))[\"guests\"][0]
assert g[\"trusted_units\"] == int(sys.argv[2]) and g[\"trusted_unread_bytes\"] > 3 << 20, g" \
		"$CB_OUT" "$units"
	test_has "$CB_ERR" "INFO: reused [0-9]+ units .*, compressed 0 units"
	# every unit copied at its own offset: the SHA-256 resumes from the
	# state the previous archive had after its last unit (only the seek
	# table after it is hashed)
	size=$(stat -c %s "$(newest)")
	n=$(sed -n "s/.*archive SHA-256: the first \([0-9]*\) bytes (copied unchanged).*/\1/p" "$CB_ERR")
	echo "resumed at $n of $size bytes"
	test "${n:-0}" -gt $((size * 9 / 10))
	sha256_ok
	same_as_no_reuse
	tar_equals_source
'

test_expect_success ROOT 'a read of a staged big file is caught by the shim (the proof above is live)' '
	big=$(staged big.bin)
	rm -f "$STG"/cbackup/*.trust
	with_fault "read:EIO:$big:after=64" cbackup_run 1 backup --root "$SRC" --id 101 --type ct \
		--tmpdir "$STG" --dumpdir "$DUMP" --keep-staging 1 --unit-size 1 --verbose
	fault_fired "read .*big.bin"
	night
	ls "$STG"/cbackup/*.trust
'

test_expect_success ROOT 'members changed every way the delta knows: read, keyed, GNU tar gives the source' '
	f=$SRC/usr/share
	# content, same size, mtime put back (touch -r), in the big file
	touch -r "$f/big.bin" "$SCRATCH/ref.m"
	printf "CHANGED!" | dd of="$f/big.bin" bs=1 seek=1500000 conv=notrunc status=none
	touch -r "$SCRATCH/ref.m" "$f/big.bin"
	chmod 600 "$f/f10.txt"
	chown 1234:1234 "$f/f20.txt"
	setfattr -n user.new -v two "$f/f30.txt"
	setfattr -n user.keep -v ONE "$SRC/etc/conf"
	mv "$f/f40.txt" "$f/f40r.txt"
	# no data of their own: only their headers change
	ln -sfn f2.txt "$f/link"
	touch -d "2019-02-03 04:05:06" "$SRC/usr/lib"
	# inode swap: two files of one size and mtime trade places
	head -c 20000 /dev/urandom >"$f/f50.txt"
	head -c 20000 /dev/urandom >"$f/f51.txt"
	touch -d "2020-01-01 00:00:00" "$f/f50.txt" "$f/f51.txt"
	night
	mv "$f/f50.txt" "$f/swap"
	mv "$f/f51.txt" "$f/f50.txt"
	mv "$f/swap" "$f/f51.txt"
	# and one more content change, size and mtime kept, in a small file
	touch -r "$f/f60.txt" "$SCRATCH/ref.m"
	printf "X" | dd of="$f/f60.txt" bs=1 seek=10 conv=notrunc status=none
	touch -r "$SCRATCH/ref.m" "$f/f60.txt"
	night
	read -r units unread <<<"$(trusted)"
	test "$units" -gt 4
	tar_equals_source
	same_as_no_reuse
'

# The .sha256 resumes only from a state of the same bytes: a member added
# in front moves every copy to another offset, and the digest is taken
# from the first byte (a state taken for an offset it was not saved at
# would give a .sha256 that sha256sum rejects).
test_expect_success ROOT 'a member added at the front: copies move, the SHA-256 is hashed from the start' '
	night
	sha256_ok
	head -c 3000 /dev/urandom >"$SRC/0-first"
	night
	test_lacks "$CB_ERR" "archive SHA-256: the first"
	test_has "$CB_ERR" "INFO: reused [1-9][0-9]* units"
	sha256_ok
	rm "$SRC/0-first"
	night
	sha256_ok
	night
	test_has "$CB_ERR" "archive SHA-256: the first [0-9]+ bytes"
	sha256_ok
'

test_expect_success ROOT 'the previous archive pruned: the map names another one, nothing on trust' '
	night
	read -r units unread <<<"$(trusted)"
	test "$units" -gt 4
	last=$(newest)
	rm "$last" "$last.idx" "$last.sha256"
	big=$(staged big.bin)
	# the previous archive is now an older one: the staged data is read
	with_fault "read:EIO:$big:after=64" cbackup_run 1 backup --root "$SRC" --id 101 --type ct \
		--tmpdir "$STG" --dumpdir "$DUMP" --keep-staging 1 --unit-size 1 --verbose
	test_has "$CB_ERR" "nothing taken on trust: it was written for another archive than the previous one"
	night
	test_has "$CB_ERR" "nothing taken on trust: it was written for another archive than the previous one"
	read -r units unread <<<"$(trusted)"
	test "$units" = 0
	tar_equals_source
	same_as_no_reuse
'

test_expect_success ROOT 'the previous archive replaced under its name: nothing on trust' '
	printf "one more line\n" >>"$SRC/var/log/syslog"
	night
	last=$(newest)
	older=$(ls -1 "$DUMP"/vzdump-lxc-101-*.tar.zst | tail -n 2 | head -n 1)
	for s in "" .idx; do cp "$older$s" "$last$s"; done
	# its .sha256 renamed too (one naming the older archive keeps the
	# catalog from being used at all: t0773)
	sed "s/$(basename "$older")/$(basename "$last")/" "$older.sha256" >"$last.sha256"
	night
	test_has "$CB_ERR" "nothing taken on trust: it was written for another archive than the previous one"
	read -r units unread <<<"$(trusted)"
	test "$units" = 0
	tar_equals_source
'

test_expect_success ROOT 'a file rewritten in place by the final sync (same staged inode, size, mtime) is read' '
	f=$SRC/usr/share/f70.txt
	ino=$(stat -c %i "$(staged f70.txt)")
	# the freeze comes between the first sync and the final one: the guest
	# changes the file there, its size and mtime put back, and the final
	# sync rewrites the staged copy in place (O_TRUNC: the same inode)
	printf "%s\n" "#!/bin/sh" "touch -r \"$f\" \"$SCRATCH/ref70\"" \
		"printf ZZ | dd of=\"$f\" bs=1 seek=100 conv=notrunc status=none" \
		"touch -r \"$SCRATCH/ref70\" \"$f\"" >"$SCRATCH/freeze.sh"
	chmod +x "$SCRATCH/freeze.sh"
	night --freeze-cmd "$SCRATCH/freeze.sh" --thaw-cmd true
	test "$(stat -c %i "$(staged f70.txt)")" = "$ino"
	test_has "$CB_ERR" "final sync: .*copied 1 changed file"
	zstd -dc "$(newest)" | tar -xOf - ./usr/share/f70.txt >"$SCRATCH/got70"
	cmp "$f" "$SCRATCH/got70"
	tar_equals_source
'

test_expect_success ROOT 'a deferred read that fails: the backup fails naming the staged file, the previous archive untouched' '
	printf "2\n" >>"$SRC/etc/conf"
	night
	before=$(ls -1 "$DUMP"/*.tar.zst* | sort)
	# big.bin changes: its units are not taken on trust, the data put off is read
	printf "CHANGED!" | dd of="$SRC/usr/share/big.bin" bs=1 seek=2500000 conv=notrunc status=none
	big=$(staged big.bin)
	sleep 1.1
	with_fault "read:EIO:$big:after=64" cbackup_run 1 backup --root "$SRC" --id 101 --type ct \
		--tmpdir "$STG" --dumpdir "$DUMP" --keep-staging 1 --unit-size 1 --verbose
	fault_fired "read .*big.bin"
	test_has "$CB_ERR" "ERROR: .*cannot read staged file .*big.bin.*: Input/output error"
	test "$(ls -1 "$DUMP"/*.tar.zst* | sort)" = "$before"
	night
	tar_equals_source
'

# The archive writer hands a file it deferred pieces of to the codec, which
# closes it when the segment ends (codec_trust.c): none is kept longer, and
# at most a quarter of the open-file limit is held at once. A leak, or a
# segment that holds more, runs out of files under a low limit.
test_expect_success ROOT 'a low open-file limit: files deferred on trust are closed as segments end' '
	for i in $(seq 301 700); do echo "small $i" >"$SRC/usr/share/s$i.txt"; done
	night
	(ulimit -S -n 64 && night)
	read -r units unread <<<"$(trusted)"
	test "$units" -gt 4
	same_as_no_reuse
'

test_expect_success ROOT 'prune --staging removes the trust map with the staging copy' '
	ls "$STG"/cbackup/cbackup-101.stage.trust
	cbackup_run 0 prune 101 --staging --tmpdir "$STG" --dumpdir "$DUMP"
	test ! -e "$STG"/cbackup/cbackup-101.stage.trust
	test ! -e "$STG"/cbackup/cbackup-101.stage
'

test_done
