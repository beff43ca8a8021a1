#!/bin/bash
# Encryption keys (issue 42): `cbackup key create FILE` makes a random key
# (mode 0600, never over an existing file) and says plainly that losing it
# loses the backups; `key show` prints its fingerprint, a keyed derivation
# (not a plain hash of the secret); encryption-key in the config (global,
# storage, guest) or --encryption-key turns encryption on; a key file that
# group or others can read, an empty, short or damaged one, a directory:
# refused with a clear error, exit 2, nothing written.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
DUMP=$SCRATCH/dump
KEY=$SCRATCH/key

backup_with() {
	cbackup_run "$1" backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$DUMP" "${@:2}"
}

test_expect_success 'setup: a small tree' '
	make_small_tree "$SRC"
	mkdir -p "$DUMP" "$SCRATCH/tmp"
'

test_expect_success 'key create: mode 0600, a fingerprint, the plain warning' '
	cbackup_run 0 key create "$KEY"
	test "$(stat -c %a "$KEY")" = 600
	test_has "$CB_OUT" "created, fingerprint [0-9a-f]{16}$"
	test_has "$CB_OUT" "losing this key loses every backup encrypted with it"
	head -c 14 "$KEY" | grep -q "^cbackup-key 1"
'

test_expect_success 'key show: the fingerprint key create printed, not a hash of the secret' '
	fp=$(sed -n "s/.*fingerprint //p" "$CB_OUT")
	cbackup_run 0 key show "$KEY"
	test "$(cat "$CB_OUT")" = "$fp"
	secret=$(sed -n "s/^secret //p" "$KEY")
	for h in "$(printf %s "$secret" | sha256sum)" "$(printf %s "$secret" | xxd -r -p | sha256sum)" \
		 "$(sha256sum <"$KEY")"; do
		case "$h" in "$fp"*) echo "fingerprint is a plain hash: $h"; false ;; esac
	done
'

test_expect_success 'key create never replaces a file: exit 2, the key unchanged' '
	cp "$KEY" "$SCRATCH/key.before"
	cbackup_run 2 key create "$KEY"
	test_has "$CB_ERR" "cannot create key file .*File exists"
	cmp "$KEY" "$SCRATCH/key.before"
	cbackup_run 2 key create "$SCRATCH/no/such/dir/key"
	test_has "$CB_ERR" "cannot create key file"
'

test_expect_success 'key protect: a passphrase-protected copy; key recover gives the key back' '
	echo "correct horse battery" | "$CBACKUP" key protect "$KEY" "$SCRATCH/key.safe" >out
	test_has out "protected copy .* of key $("$CBACKUP" key show "$KEY") written"
	test "$(stat -c %a "$SCRATCH/key.safe")" = 600
	test_lacks "$SCRATCH/key.safe" "$(sed -n "s/^secret //p" "$KEY")"
	echo "correct horse battery" | "$CBACKUP" key recover "$SCRATCH/key.safe" "$SCRATCH/key.back"
	cmp "$KEY" "$SCRATCH/key.back"
	test "$(stat -c %a "$SCRATCH/key.back")" = 600
'

test_expect_success 'key recover: a wrong passphrase or a changed copy is exit 2, no key written' '
	echo "wrong horse" >pass
	cbackup_run 2 key recover "$SCRATCH/key.safe" "$SCRATCH/key.bad" <pass
	test_has "$CB_ERR" "wrong passphrase, or .* is damaged"
	test ! -e "$SCRATCH/key.bad"
	sed "s/^scrypt 65536/scrypt 32768/" "$SCRATCH/key.safe" >"$SCRATCH/key.changed"
	echo "correct horse battery" >pass
	cbackup_run 2 key recover "$SCRATCH/key.changed" "$SCRATCH/key.bad" <pass
	test ! -e "$SCRATCH/key.bad"
	: >empty
	cbackup_run 2 key protect "$KEY" "$SCRATCH/key.safe2" <empty
	test ! -e "$SCRATCH/key.safe2"
'

# bad KEYFILE WHY: backup and restore refuse it, exit 2, nothing written
bad() {
	backup_with 2 --encryption-key "$1"
	test_has "$CB_ERR" "key file '$1' $2"
	test -z "$(ls -A "$DUMP")"
	cbackup_run 2 key show "$1"
	test_has "$CB_ERR" "key file '$1' $2"
}

test_expect_success 'a key file group or others can read is refused' '
	cp "$KEY" "$SCRATCH/k-group"
	chmod 640 "$SCRATCH/k-group"
	bad "$SCRATCH/k-group" "is accessible by group or others"
	cp "$KEY" "$SCRATCH/k-other"
	chmod 604 "$SCRATCH/k-other"
	bad "$SCRATCH/k-other" "is accessible by group or others"
'

test_expect_success 'an empty, a short, a damaged key file and a directory are refused' '
	install -m 600 /dev/null "$SCRATCH/k-empty"
	bad "$SCRATCH/k-empty" "is empty"
	head -c 40 "$KEY" >"$SCRATCH/k-short"
	chmod 600 "$SCRATCH/k-short"
	bad "$SCRATCH/k-short" "is not a cbackup key file .*short"
	sed "s/^secret ./secret x/" "$KEY" >"$SCRATCH/k-bad"
	chmod 600 "$SCRATCH/k-bad"
	bad "$SCRATCH/k-bad" "is not a cbackup key file .*damaged"
	mkdir -m 700 "$SCRATCH/k-dir"
	bad "$SCRATCH/k-dir" "is a directory"
	backup_with 2 --encryption-key "$SCRATCH/k-missing"
	test_has "$CB_ERR" "k-missing.*No such file"
'

test_expect_success 'a bad key in the config is exit 2 naming file and line, nothing written' '
	cat >"$SCRATCH/bad.conf" <<-EOF
	[storage enc]
	path = $DUMP
	encryption-key = $SCRATCH/k-group
	EOF
	cbackup_run 2 --config "$SCRATCH/bad.conf" backup --root "$SRC" --id 101 --type ct \
		--tmpdir "$SCRATCH/tmp" --storage enc
	test_has "$CB_ERR" "bad.conf:3.*encryption-key.*accessible by group or others"
	test -z "$(ls -A "$DUMP")"
'

test_expect_success 'a key with --stdout: a usage error before anything is copied' '
	cbackup_run 2 backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" --stdout \
		--encryption-key "$KEY" >/dev/null
	test_has "$CB_ERR" "ERROR: .*--stdout cannot be encrypted"
	test_lacks "$CB_ERR" "first sync"
'

test_expect_success 'a key with a unit store: its night is sealed (every command: t0813)' '
	cbackup_run 0 backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$DUMP" --layout store --encryption-key "$KEY"
	test_has "$CB_ERR" "unit store .* encrypted with key $("$CBACKUP" key show "$KEY")"
	test_has "$DUMP"/nights/* "^cbackup-manifest-sealed 1$"
	rm -rf "$DUMP"
	mkdir "$DUMP"
'

for where in global storage guest; do
	test_expect_success "encryption-key in the $where section encrypts the archive" "
		rm -rf \"\$DUMP\"
		mkdir \"\$DUMP\"
		{
			[ $where = global ] && echo \"encryption-key = \$KEY\"
			echo '[storage enc]'
			echo \"path = \$DUMP\"
			[ $where = storage ] && echo \"encryption-key = \$KEY\"
			echo '[ct 101]'
			echo \"root = \$SRC\"
			[ $where = guest ] && echo \"encryption-key = \$KEY\"
			true
		} >\"\$SCRATCH/$where.conf\"
		cbackup_run 0 --config \"\$SCRATCH/$where.conf\" 101 --tmpdir \"\$SCRATCH/tmp\" --storage enc
		find_archive \"\$DUMP\" ct 101 .zst.cbenc
		test -z \"\$(ls \"\$DUMP\"/*.tar.zst 2>/dev/null)\"
	"
done

test_expect_success 'encryption-key = none in the guest section turns it off' '
	rm -rf "$DUMP"
	mkdir "$DUMP"
	printf "encryption-key = %s\n[storage enc]\npath = %s\n[ct 101]\nroot = %s\nencryption-key = none\n" \
		"$KEY" "$DUMP" "$SRC" >"$SCRATCH/off.conf"
	cbackup_run 0 --config "$SCRATCH/off.conf" 101 --tmpdir "$SCRATCH/tmp" --storage enc
	find_archive "$DUMP" ct 101 .zst
'

test_done
