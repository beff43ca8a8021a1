#!/bin/bash
# Issue 25 item 7: a forged catalog (ARCHIVE.idx rewritten by someone who
# can write the dump directory, its SHA-256 trailer recomputed so that its
# own digest holds) is bounded by the loader: a member whose size runs past
# the tar stream (or wraps around), a hardlink with data, a unit offset past
# the archive, a file inflated past what its counts say (the mutant
# idx-size-unchecked survived the tests until that one). `ls`, `restore
# --path` and `mount` refuse the catalog, say so, and read the archive
# itself instead: right sizes, right bytes, and a read through the mount
# that returns at once (on main it spun for good, its reader stuck in D
# state).
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
DUMP=$SCRATCH/dump
FORGE=$TOP/tests/helpers/idxforge.py

test_expect_success 'setup: an archive with a catalog, 1 MiB units' '
	make_small_tree "$SRC"
	yes "a line of text for a few units" | head -c 3M >"$SRC/srv/big.txt"
	mkdir -p "$DUMP" "$SCRATCH/tmp"
	cbackup_run 0 backup --root "$SRC" --id 1 --compress zstd --unit-size 1 \
		--dumpdir "$DUMP" --tmpdir "$SCRATCH/tmp"
	A=$(find_archive "$DUMP" ct 1 .zst)
	cp "$A.idx" "$SCRATCH/good.idx"
	cbackup_run 0 ls "$A"
	grep -F "./srv/big.txt" "$CB_OUT" >"$SCRATCH/want-ls"
	tar_size=$(python3 -c "import struct,sys; print(struct.unpack_from(\"<Q\", open(sys.argv[1],\"rb\").read(), 40)[0])" "$A.idx")
	echo "$tar_size" >"$SCRATCH/tar_size"
'

A=$(ls "$DUMP"/cbackup-ct-1-*.tar.zst 2>/dev/null)
forgeries=(
	"size ./srv/big.txt TAR"
	"size ./srv/big.txt 9223372036854775807"
	"size ./srv/big.txt 18446744073709551615"
	"hardlink ./etc/hostname 4096"
	"unit-coff 1 999999999999"
	"grow 4096"
)

n=0
for f in "${forgeries[@]}"; do
	n=$((n + 1))
	test_expect_success "forged ($f): ls refuses the catalog and lists from the archive" "
		cp \"\$SCRATCH/good.idx\" \"\$A.idx\"
		python3 \"\$FORGE\" \"\$A.idx\" \${f//TAR/\$(cat \"\$SCRATCH/tar_size\")}
		cbackup_run 0 ls \"\$A\"
		test_has \"\$CB_ERR\" 'damaged catalog: .*scanning the archive instead'
		grep -F ./srv/big.txt \"\$CB_OUT\" >\"\$SCRATCH/got-ls\"
		test_cmp \"\$SCRATCH/want-ls\" \"\$SCRATCH/got-ls\"
	"
	test_expect_success "forged ($f): restore --path refuses it and restores the right bytes" "
		cp \"\$SCRATCH/good.idx\" \"\$A.idx\"
		python3 \"\$FORGE\" \"\$A.idx\" \${f//TAR/\$(cat \"\$SCRATCH/tar_size\")}
		cbackup_run 0 restore \"\$A\" \"\$SCRATCH/r$n\" --path ./srv --path ./etc
		test_has \"\$CB_ERR\" 'damaged catalog: '
		cmp \"\$SRC/srv/big.txt\" \"\$SCRATCH/r$n/srv/big.txt\"
		cmp \"\$SRC/etc/hostname\" \"\$SCRATCH/r$n/etc/hostname\"
	"
done

if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
	test_skip 'mount with a forged catalog' 'no /dev/fuse or no fusermount3 (apt-get install fuse3)'
	test_done
fi

# read_bounded FILE OUT DAEMON: cat FILE to OUT; a reader still stuck after
# 60 s is released by killing the file system's daemon (a FUSE reader in D
# state ends only with its connection), and that is a failure
read_bounded() {
	local reader
	cat "$1" >"$2" &
	reader=$!
	if wait_for 60 test_must_fail kill -0 "$reader" 2>/dev/null; then
		wait "$reader"
		return
	fi
	echo "read_bounded: '$1' still reading after 60 s"
	kill -KILL "$3"
	wait "$reader" || true
	return 1
}

n=0
for f in "${forgeries[@]}"; do
	n=$((n + 1))
	test_expect_success ROOT "forged ($f): mount reads the right bytes and returns" "
		cp \"\$SCRATCH/good.idx\" \"\$A.idx\"
		python3 \"\$FORGE\" \"\$A.idx\" \${f//TAR/\$(cat \"\$SCRATCH/tar_size\")}
		mnt=\$SCRATCH/mnt$n
		mkdir \"\$mnt\"
		cleanup_mount \"\$mnt\"
		cbackup_run 0 mount \"\$A\" \"\$mnt\"
		# the daemon (setsid: its own group) is killed at cleanup whatever happens
		pid=\$(pgrep -n -f -x -- \".*cbackup mount \$A \$mnt\")
		cleanup_pid \"\$pid\"
		read_bounded \"\$mnt/srv/big.txt\" \"\$SCRATCH/got$n\" \"\$pid\"
		cmp \"\$SRC/srv/big.txt\" \"\$SCRATCH/got$n\"
		test_has \"\$CB_ERR\" 'damaged catalog: '
		read_bounded \"\$mnt/etc/hostname\" \"\$SCRATCH/host$n\" \"\$pid\"
		cmp \"\$SRC/etc/hostname\" \"\$SCRATCH/host$n\"
		fusermount3 -u \"\$mnt\"
	"
done

test_expect_success ROOT 'the catalog cut short under a running mount: the mount goes on answering' '
	cp "$SCRATCH/good.idx" "$A.idx"
	mnt=$SCRATCH/mnt-cut
	mkdir "$mnt"
	cleanup_mount "$mnt"
	cbackup_run 0 mount "$A" "$mnt"
	pid=$(pgrep -n -f -x -- ".*cbackup mount $A $mnt")
	cleanup_pid "$pid"
	# someone who can write the dump directory truncates the catalog the
	# daemon has loaded (nothing looked up yet: no kernel cache answers)
	truncate -s 0 "$A.idx"
	read_bounded "$mnt/srv/big.txt" "$SCRATCH/got-cut" "$pid"
	cmp "$SRC/srv/big.txt" "$SCRATCH/got-cut"
	read_bounded "$mnt/etc/hostname" "$SCRATCH/host-cut" "$pid"
	cmp "$SRC/etc/hostname" "$SCRATCH/host-cut"
	kill -0 "$pid"
	fusermount3 -u "$mnt"
	cp "$SCRATCH/good.idx" "$A.idx"
'

test_done
