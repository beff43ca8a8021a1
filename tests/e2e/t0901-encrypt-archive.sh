#!/bin/bash
# Encrypted archives (issue 42): with a key, the dump directory holds only
# NAME.tar.zst.cbenc, its sealed catalog and its .sha256 (no file name,
# no file content, no plain hash of a unit in any of them; notes sealed);
# restore (whole, --path), ls, verify (with the key: every unit; without:
# the stored checksums, saying contents were not checked), list and prune
# work; a wrong key is one clear error, exit 2, nothing written; nights
# under the same key copy unchanged units (the same frames, byte for
# byte), never from an archive under another key; and the reference
# decrypter in contrib/ with stock zstd and GNU tar gives the tree back.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
DUMP=$SCRATCH/dump
KEY=$SCRATCH/key
KEY2=$SCRATCH/key2
DECRYPT=$TOP/contrib/cbackup-decrypt.py
MARK=zqxv-marker-name
CONTENT=zqxv-marker-content-line

night() {
	sleep 1.1   # archive names go by the second
	cbackup_run 0 backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$DUMP" --keep-staging 1 --unit-size 1 "$@"
}
newest() { ls -1 "$DUMP"/vzdump-lxc-101-*.tar.zst.cbenc | tail -n 1; }
view_gone() { test -z "$(ls -A "$SCRATCH/vtmp")"; }
oldest() { ls -1 "$DUMP"/vzdump-lxc-101-*.tar.zst.cbenc | head -n 1; }

test_expect_success ROOT 'setup: a full tree with a marked file, two keys, one encrypted night' '
	make_full_tree "$SRC"
	mkdir -p "$SRC/usr/share" "$DUMP" "$SCRATCH/tmp"
	for i in $(seq 1 150); do seq $i 7 $((i * 900)) | head -c 20000 >"$SRC/usr/share/f$i.txt"; done
	printf "%s\n" "$CONTENT" >"$SRC/$MARK"
	cbackup_run 0 key create "$KEY"
	cbackup_run 0 key create "$KEY2"
	night --encryption-key "$KEY" --notes-template "guest {{vmid}} $MARK"
	test_has "$CB_ERR" "INFO: encrypted with key $("$CBACKUP" key show "$KEY"): [0-9]+ units"
'

test_expect_success ROOT 'only the encrypted archive, its sealed catalog and .sha256 reach the dump dir' '
	a=$(find_archive "$DUMP" ct 101 .zst.cbenc)
	test -f "$a.idx"
	test -f "$a.sha256"
	test -f "$a.notes"
	test -z "$(ls "$DUMP" | grep -v -e "\.cbenc" -e "\.log$" -e "^\.cbackup-ct-101.lock$")"
	(cd "$DUMP" && sha256sum --quiet -c "$(basename "$a").sha256")
	test "$(stat -c %a "$a") $(stat -c %a "$a.idx")" = "640 640"
	# no cleartext: no name, no content, not the notes, in any file there
	test_must_fail grep -r -a -l -e "$MARK" -e "$CONTENT" -e usr/share/f1.txt -e xattrs.txt "$DUMP"
	test_lacks "$a.notes" "guest 101"
	# nothing of the plain archive is left on the tmpdir either
	test -z "$(ls "$SCRATCH/tmp" | grep -v "^cbackup$")"
'

test_expect_success ROOT 'the log names no file of the guest in the dump dir: it stays on the host' '
	# a hook that prints a file name of the guest: what a warning about a
	# file does too. The log of an encrypted night is kept on the host
	# (TMPDIR/cbackup/ct-ID.log, replaced by the next run), not beside it
	printf "#!/bin/sh\necho \"the hook saw $MARK\"\n" >"$SCRATCH/hook-mark"
	chmod +x "$SCRATCH/hook-mark"
	night --encryption-key "$KEY" --script "$SCRATCH/hook-mark"
	test_must_fail grep -r -a -l -e "$MARK" "$DUMP"
	test -z "$(ls "$DUMP" | grep "\.log$")"
	test_has "$SCRATCH/tmp/cbackup/ct-101.log" "the hook saw $MARK"
	test_has "$SCRATCH/tmp/cbackup/ct-101.log" "Finished Backup of VM 101"
'

test_expect_success ROOT 'no plain SHA-256 of a unit is visible: the ids are keyed' '
	a=$(newest)
	mkdir "$SCRATCH/plain"
	cbackup_run 0 restore "$a" "$SCRATCH/plain-tree" --encryption-key "$KEY"
	python3 "$DECRYPT" "$KEY" "$a" "$SCRATCH/plain/a.tar.zst"
	# the plain SHA-256 of each unit (frame) and of the whole plain archive is in no file
	python3 -c "import hashlib, struct, sys
d = open(sys.argv[1], \"rb\").read()
x = open(sys.argv[2] + \".idx\", \"rb\").read()
n = struct.unpack(\"<Q\", x[48:56])[0]
hs = [hashlib.sha256(d).digest()]
for i in range(n):
    p_off, p_len = struct.unpack(\"<QQ\", x[72 + 96 * i:88 + 96 * i])
    hs.append(hashlib.sha256(d[p_off:p_off + p_len]).digest())
assert n > 3, n
for f in sys.argv[2:]:
    blob = open(f, \"rb\").read()
    if any(h in blob or h.hex().encode() in blob for h in hs):
        sys.exit(\"plain hash in \" + f)" "$SCRATCH/plain/a.tar.zst" "$a" "$a.idx" "$a.sha256"
'

test_expect_success ROOT 'restore with the key gives the identical tree; --path one file, few units decrypted' '
	cbackup_run 0 restore "$(newest)" "$SCRATCH/r1" --encryption-key "$KEY"
	compare_trees "$SRC" "$SCRATCH/r1"
	cbackup_run 0 restore "$(newest)" "$SCRATCH/r2" --encryption-key "$KEY" --path "./$MARK"
	test "$(ls -A "$SCRATCH/r2")" = "$MARK"
	cmp "$SRC/$MARK" "$SCRATCH/r2/$MARK"
	# one file: only the units that hold it (and the first and last) decrypted
	set -- $(sed -nE "s/.*: ([0-9]+) of ([0-9]+) units decrypted/\1 \2/p" "$CB_ERR")
	test "$1" -lt "$2"
	test "$1" -le 4
	rm -rf "$SCRATCH/r1" "$SCRATCH/plain-tree"
'

test_expect_success ROOT 'without the key: restore and ls refuse with a clear error, exit 2' '
	cbackup_run 2 restore "$(newest)" "$SCRATCH/r3"
	test_has "$CB_ERR" "is encrypted: give its key with --encryption-key FILE"
	test ! -e "$SCRATCH/r3"
	cbackup_run 2 ls "$(newest)"
	test_has "$CB_ERR" "is encrypted: give its key"
'

test_expect_success ROOT 'a wrong key: one error naming both fingerprints, exit 2, nothing written' '
	fp1=$("$CBACKUP" key show "$KEY")
	fp2=$("$CBACKUP" key show "$KEY2")
	cbackup_run 2 restore "$(newest)" "$SCRATCH/r4" --encryption-key "$KEY2"
	test "$(cat "$CB_ERR")" = "ERROR: archive was encrypted with key $fp1, this key is $fp2"
	test ! -e "$SCRATCH/r4"
	cbackup_run 2 ls "$(newest)" --encryption-key "$KEY2"
	test_has "$CB_ERR" "archive was encrypted with key $fp1, this key is $fp2"
	cbackup_run 2 verify "$(newest)" --encryption-key "$KEY2"
	test ! -e "$(newest).verified"
'

test_expect_success ROOT 'a restore stopped by SIGTERM while decrypting leaves no plain copy' '
	build_helpers
	mkdir "$SCRATCH/vt"
	with_fault "write:SIGTERM:cbackup-view:after=4096" \
		cbackup_run 143 restore "$(newest)" "$SCRATCH/r8" --encryption-key "$KEY" --tmpdir "$SCRATCH/vt"
	fault_fired "^write .*cbackup-view"
	test_has "$CB_ERR" "interrupted by signal TERM"
	test -z "$(ls -A "$SCRATCH/vt")"
	test ! -e "$SCRATCH/r8"
'

test_expect_success ROOT 'a reader killed (SIGKILL) leaves its view: the next reader removes it' '
	mkdir "$SCRATCH/vk"
	with_fault "write:SIGKILL:cbackup-view:after=4096" \
		cbackup_run 137 restore "$(newest)" "$SCRATCH/r10" --encryption-key "$KEY" --tmpdir "$SCRATCH/vk"
	fault_fired "^write .*cbackup-view"
	stale=$(ls -d "$SCRATCH"/vk/cbackup-view.*)
	test -n "$(ls -A "$stale")"
	cbackup_run 0 restore "$(newest)" "$SCRATCH/r11" --encryption-key "$KEY" --tmpdir "$SCRATCH/vk" \
		--path "./$MARK"
	test_has "$CB_ERR" "INFO: removing .*/vk/cbackup-view\.[^/]*., left by a reader that was killed"
	test ! -e "$stale"
	test -z "$(ls -A "$SCRATCH/vk")"
	cmp "$SRC/$MARK" "$SCRATCH/r11/$MARK"
	rm -rf "$SCRATCH/r10" "$SCRATCH/r11"
'

test_expect_success ROOT 'a live reader'\''s view is left alone by the next reader' '
	mkdir "$SCRATCH/vl"
	rm -f "$FAULT_LOG"
	# held (SIGSTOP) while it fills its view
	with_fault_bg "write:SIGSTOP:cbackup-view:after=4096" \
		"$CBACKUP" restore "$(newest)" "$SCRATCH/r12" --encryption-key "$KEY" --tmpdir "$SCRATCH/vl" \
		>"$SCRATCH/held.out" 2>"$SCRATCH/held.err"
	pid=$FAULT_PID
	cleanup_pid "$pid"
	wait_for 30 grep -q "^State:.*stopped" /proc/$pid/status || { kill -KILL "$pid"; false; }
	live=$(ls -d "$SCRATCH"/vl/cbackup-view.*)
	cbackup_run 0 restore "$(newest)" "$SCRATCH/r13" --encryption-key "$KEY" --tmpdir "$SCRATCH/vl" \
		--path "./$MARK"
	test_lacks "$CB_ERR" "left by a reader"
	test -d "$live"
	kill -CONT "$pid"
	rc=0
	wait "$pid" || rc=$?
	test "$rc" = 0 || { cat "$SCRATCH/held.err"; false; }
	compare_trees "$SRC" "$SCRATCH/r12"
	test -z "$(ls -A "$SCRATCH/vl")"
	rm -rf "$SCRATCH/r12" "$SCRATCH/r13"
'

test_expect_success ROOT 'a backup stopped by SIGTERM while writing leaves nothing: no part, no plain copy' '
	mkdir "$SCRATCH/d9" "$SCRATCH/t9"
	with_fault "write:SIGTERM:.cbenc.tmp:after=8192" \
		cbackup_run 143 backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/t9" \
		--dumpdir "$SCRATCH/d9" --encryption-key "$KEY"
	fault_fired "^write .*\.cbenc\.tmp"
	test_has "$CB_ERR" "ERROR: Backup of VM 101 failed - archive: interrupted by signal TERM"
	test -z "$(ls -A "$SCRATCH/d9" | grep -v -e "^\.cbackup-ct-101\.lock$")"
	# no plain copy: only the log, which an encrypted archive keeps on the host
	(cd "$SCRATCH/t9" && find . -mindepth 1 | LC_ALL=C sort) >"$SCRATCH/t9.left"
	printf "./cbackup\n./cbackup/ct-101.log\n" >"$SCRATCH/t9.want"
	test_cmp "$SCRATCH/t9.want" "$SCRATCH/t9.left"
'

test_expect_success ROOT 'ls with the key lists from the sealed catalog' '
	cbackup_run 0 ls "$(newest)" --encryption-key "$KEY"
	test_has "$CB_OUT" " \./$MARK$"
	test_has "$CB_OUT" " \./usr/share/f17\.txt$"
'

test_expect_success ROOT 'verify without the key: stored checksums only, and it says so' '
	cbackup_run 0 verify "$(newest)"
	test_has "$CB_ERR" "WARN: .*[0-9]+ units and the \.sha256 checked; contents were not checked"
	test ! -e "$(newest).verified"
'

test_expect_success ROOT 'verify with the key: every unit and the contents; .verified written' '
	cbackup_run 0 verify "$(newest)" --encryption-key "$KEY"
	test_has "$CB_ERR" "[0-9]+ units authenticated"
	test_has "$CB_ERR" "is good: [0-9]+ entries"
	test -f "$(newest).verified"
'

if [ -c /dev/fuse ] && command -v fusermount3 >/dev/null; then
	test_expect_success ROOT 'mount with the key reads files back; the view goes at the unmount' '
		mkdir "$SCRATCH/mnt" "$SCRATCH/vtmp"
		cleanup_mount "$SCRATCH/mnt"
		cbackup_run 0 mount "$(newest)" "$SCRATCH/mnt" --encryption-key "$KEY" \
			--tmpdir "$SCRATCH/vtmp"
		cmp "$SRC/$MARK" "$SCRATCH/mnt/$MARK"
		cmp "$SRC/usr/share/f9.txt" "$SCRATCH/mnt/usr/share/f9.txt"
		test -n "$(ls "$SCRATCH/vtmp")"
		fusermount3 -u "$SCRATCH/mnt"
		wait_for 10 test_must_fail mountpoint -q "$SCRATCH/mnt"
		wait_for 10 view_gone
	'
else
	test_skip 'mount with the key' 'no /dev/fuse or no fusermount3'
fi

test_expect_success ROOT 'list shows the encrypted archive, its notes sealed' '
	cbackup_run 0 list --dumpdir "$DUMP"
	test_has "$CB_OUT" "vzdump-lxc-101-.*\.tar\.zst\.cbenc +\(encrypted\)$"
'

test_expect_success ROOT 'next night, nothing changed: every unit copied, the same frames byte for byte' '
	night --encryption-key "$KEY"
	test_has "$CB_ERR" "INFO: reused [1-9][0-9]* units .* compressed 0 units"
	n=$(sed -nE "s/.*encrypted with key [0-9a-f]+: ([0-9]+) units \(([0-9]+) copied.*/\1 \2/p" "$CB_ERR")
	set -- $n
	test "$1" = "$2"
	cmp "$(oldest)" "$(newest)"
	# the stored checksums of the copied frames hold (taken from the previous table)
	cbackup_run 0 verify "$(newest)"
	test_has "$CB_ERR" "units and the \.sha256 checked"
'

# A night copies the previous archive's frames themselves: no plain
# archive is written (NAME.tar.zst.tmp) nor the previous one decrypted
# into a view (cbackup-view.*): either open fails here. The encrypted
# file's SHA-256 resumes from the states kept with the staging copy; the
# plain stream has none of its own (a view makes it as it decrypts).
test_expect_success ROOT 'a night clones frames straight: no plain archive, no decrypted copy' '
	sleep 1.1
	: >"$FAULT_LOG"
	with_fault "open:EIO:.tar.zst.tmp;open:EIO:cbackup-view." \
		cbackup_run 0 backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$DUMP" --keep-staging 1 --unit-size 1 --encryption-key "$KEY" --verbose
	test ! -s "$FAULT_LOG"
	n=$(sed -nE "s/.*encrypted with key [0-9a-f]+: ([0-9]+) units \(([0-9]+) copied.*/\1 \2/p" "$CB_ERR")
	set -- $n
	test "$1" = "$2"
	test_has "$CB_ERR" "INFO: encrypted archive SHA-256: the first [0-9]+ bytes \(copied unchanged\) taken"
	cmp "$(oldest)" "$(newest)"
	a=$(newest)
	(cd "$DUMP" && sha256sum --quiet -c "${a##*/}.sha256")
	cbackup_run 0 verify "$(newest)" --encryption-key "$KEY"
	test_has "$CB_ERR" "is good: [0-9]+ entries, .*checksum matches"
'

test_expect_success ROOT 'a damaged frame of the previous archive is never copied: sealed anew' '
	a=$(newest)
	b=$(od -An -tu1 -j $((4096 + 60)) -N1 "$a")
	printf "\\$(printf %o $((255 - b)))" | dd of="$a" bs=1 seek=$((4096 + 60)) conv=notrunc status=none
	night --encryption-key "$KEY"
	n=$(sed -nE "s/.*encrypted with key [0-9a-f]+: ([0-9]+) units \(([0-9]+) copied.*/\1 \2/p" "$CB_ERR")
	set -- $n
	test "$2" = $(($1 - 1))
	cbackup_run 0 verify "$(newest)" --encryption-key "$KEY"
	test_has "$CB_ERR" "is good: [0-9]+ entries, .*checksum matches"
	cbackup_run 1 verify "$a" --encryption-key "$KEY"
'

test_expect_success ROOT 'a killed run'\''s private directory is removed, not another guest'\''s' '
	mkdir -m 700 "$SCRATCH/tmp/cbackup-enc-101.AbC123" "$SCRATCH/tmp/cbackup-enc-101.1.XyZ789"
	echo plain >"$SCRATCH/tmp/cbackup-enc-101.AbC123/left.tar.zst"
	night --encryption-key "$KEY"
	test_has "$CB_ERR" "removing .*cbackup-enc-101\.AbC123., left by an interrupted backup"
	test ! -e "$SCRATCH/tmp/cbackup-enc-101.AbC123"
	test -d "$SCRATCH/tmp/cbackup-enc-101.1.XyZ789"
	rmdir "$SCRATCH/tmp/cbackup-enc-101.1.XyZ789"
'

test_expect_success ROOT 'a file changed: its units sealed anew, the rest copied' '
	echo changed >>"$SRC/usr/share/f40.txt"
	night --encryption-key "$KEY"
	test_has "$CB_ERR" "INFO: reused [1-9][0-9]* units .* compressed [1-9][0-9]* units"
	test_has "$CB_ERR" "encrypted with key [0-9a-f]+: [0-9]+ units \([1-9][0-9]* copied"
	cbackup_run 0 verify "$(newest)"
	cbackup_run 0 restore "$(newest)" "$SCRATCH/r5" --encryption-key "$KEY" --path ./usr/share/f40.txt
	cmp "$SRC/usr/share/f40.txt" "$SCRATCH/r5/usr/share/f40.txt"
'

test_expect_success ROOT 'under another key nothing of the previous archive is reused' '
	night --encryption-key "$KEY2"
	test_has "$CB_ERR" "no units reused from .*archive was encrypted with key"
	test_has "$CB_ERR" "reused 0 units"
	test_has "$CB_ERR" "encrypted with key $("$CBACKUP" key show "$KEY2"): [0-9]+ units \(0 copied"
	cbackup_run 0 restore "$(newest)" "$SCRATCH/r6" --encryption-key "$KEY2"
	compare_trees "$SRC" "$SCRATCH/r6"
	rm -rf "$SCRATCH/r6"
'

test_expect_success ROOT 'a plain night after encrypted ones reuses nothing of them' '
	night
	a=$(find_archive "$DUMP" ct 101 .zst)
	test_has "$CB_ERR" "reused 0 units"
	cbackup_run 0 verify "$a"
'

test_expect_success ROOT 'index with the key makes a lost catalog again; without it, no' '
	a=$(newest)
	mv "$a.idx" "$SCRATCH/saved.idx"
	cbackup_run 2 index "$a"
	test ! -e "$a.idx"
	cbackup_run 2 index "$a" --encryption-key "$KEY"
	test_has "$CB_ERR" "archive was encrypted with key"
	test ! -e "$a.idx"
	cbackup_run 0 index "$a" --encryption-key "$KEY2"
	test_has "$CB_ERR" "wrote catalog .* from [0-9]+ units"
	(cd "$DUMP" && sha256sum --quiet -c "$(basename "$a").sha256")
	cbackup_run 0 verify "$a" --encryption-key "$KEY2"
	cbackup_run 0 restore "$a" "$SCRATCH/r7" --encryption-key "$KEY2" --path "./$MARK"
	cmp "$SRC/$MARK" "$SCRATCH/r7/$MARK"
'

test_expect_success ROOT 'index killed (SIGKILL) leaves its plain copy: the next reader removes it' '
	a=$(newest)
	mkdir "$SCRATCH/vi"
	mv "$a.idx" "$SCRATCH/saved-vi.idx"
	with_fault "write:SIGKILL:$SCRATCH/vi/cbackup-:after=4096" \
		cbackup_run 137 index "$a" --encryption-key "$KEY2" --tmpdir "$SCRATCH/vi"
	fault_fired "^write .*/vi/cbackup-"
	test -n "$(ls -A "$SCRATCH/vi")"
	mv "$SCRATCH/saved-vi.idx" "$a.idx"
	cbackup_run 0 restore "$a" "$SCRATCH/r12" --encryption-key "$KEY2" --tmpdir "$SCRATCH/vi" \
		--path "./$MARK"
	test_has "$CB_ERR" "INFO: removing .*/vi/cbackup-view\.[^/]*., left by a reader that was killed"
	test -z "$(ls -A "$SCRATCH/vi")"
	cmp "$SRC/$MARK" "$SCRATCH/r12/$MARK"
	rm -rf "$SCRATCH/r12"
'

test_expect_success ROOT 'prune keeps the newest and removes the rest with their side files' '
	cbackup_run 0 prune 101 --dumpdir "$DUMP" --prune-backups keep-last=2
	test "$(ls "$DUMP"/*.cbenc | wc -l)" = 1
	test -z "$(ls "$DUMP" | grep -e "\.cbenc\.idx$" -e "\.cbenc\.sha256$" -e "\.notes$" | \
		grep -v "$(basename "$(newest)")")"
'

test_expect_success ROOT 'contrib/cbackup-decrypt.py + stock zstd + GNU tar give the tree back' '
	a=$(newest)
	mkdir "$SCRATCH/r-gnu"
	python3 "$DECRYPT" "$KEY2" "$a" - | zstd -dc | tar --xattrs --xattrs-include="*" --acls \
		--numeric-owner -xpf - -C "$SCRATCH/r-gnu"
	compare_trees "$SRC" "$SCRATCH/r-gnu"
	rm -rf "$SCRATCH/r-gnu"
	test_must_fail python3 "$DECRYPT" "$KEY" "$a" "$SCRATCH/wrong.tar.zst" 2>err
	test_has err "archive was encrypted with key $("$CBACKUP" key show "$KEY2"), this key is"
'

for c in gzip lzo 0; do
	test_expect_success ROOT "codec $c: restore and the reference decrypter with stock tools" "
		d=\$SCRATCH/dump-$c
		mkdir \"\$d\"
		cbackup_run 0 backup --root \"\$SRC/usr\" --id 102 --type ct --tmpdir \"\$SCRATCH/tmp\" \
			--dumpdir \"\$d\" --unit-size 1 --compress $c --encryption-key \"\$KEY\"
		a=\$(ls \"\$d\"/*.cbenc)
		cbackup_run 0 restore \"\$a\" \"\$SCRATCH/rc-$c\" --encryption-key \"\$KEY\"
		compare_trees --no-xattr --no-acl \"\$SRC/usr\" \"\$SCRATCH/rc-$c\"
		mkdir \"\$SCRATCH/xc-$c\"
		case $c in gzip) dec='gzip -dc' ;; lzo) dec='lzop -dc' ;; 0) dec=cat ;; esac
		python3 \"\$DECRYPT\" \"\$KEY\" \"\$a\" - | \$dec | tar --numeric-owner -xpf - -C \"\$SCRATCH/xc-$c\"
		compare_trees --no-xattr --no-acl \"\$SRC/usr\" \"\$SCRATCH/xc-$c\"
	"
done

test_done
