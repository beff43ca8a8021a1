#!/bin/bash
# --dry-run changes nothing, for every command (issue 25, item 3): a hash
# of the trees involved (names, types, modes, owners, sizes, mtimes, link
# targets, contents) is the same before and after. restore --dry-run says
# what it would restore and checks the space (with --force too, and into a
# DESTDIR it would create); verify checks and writes no .verified; index
# builds and checks the catalog and writes nothing; ls, list and prune
# change nothing; mount and probe cannot do a dry run and refuse the
# option (exit 2). The backup command's dry run is tested in t0180/t0651.
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/dump
DEST=$SCRATCH/dest

# tree_hash DIR...: one hash of everything a command could change in DIRs
tree_hash() {
	{
		find "$@" -printf '%p %y %m %U:%G %s %T@ %l\n' | LC_ALL=C sort
		find "$@" -type f -exec sha256sum {} + | LC_ALL=C sort
	} | sha256sum | cut -d" " -f1
}

# unchanged CMD...: CMD leaves $D and $DEST as they were
unchanged() {
	local before after
	before=$(tree_hash "$D" "$DEST")
	"$@"
	after=$(tree_hash "$D" "$DEST")
	[ "$before" = "$after" ] && return 0
	echo "the trees changed under: $*"
	return 1
}

test_expect_success 'setup: two backups, a non-empty destination' '
	make_small_tree "$SCRATCH/src"
	mkdir -p "$D" "$SCRATCH/tmp" "$DEST"
	cbackup_run 0 backup --root "$SCRATCH/src" --id 485 --dumpdir "$D" --tmpdir "$SCRATCH/tmp"
	sleep 1
	cbackup_run 0 backup --root "$SCRATCH/src" --id 485 --dumpdir "$D" --tmpdir "$SCRATCH/tmp"
	echo live >"$DEST/live-file"
	: >"$SCRATCH/empty.conf"
	chmod 600 "$SCRATCH/empty.conf"
'

archive() { ls "$D"/vzdump-lxc-485-*.tar.zst | tail -n 1; }

test_expect_success 'restore --dry-run into a new directory: says what, checks space, creates nothing' '
	unchanged cbackup_run 0 restore "$(archive)" "$DEST/new/sub" --dry-run
	test_has "$CB_ERR" "^INFO: dry run: would create .*dest/new/sub"
	test_has "$CB_ERR" "^INFO: dry run: would restore [0-9]+ entries, .* on disk into .*dest/new/sub. \(.* available\); nothing written"
	test ! -e "$DEST/new"
'

test_expect_success 'restore --dry-run --force over a live tree writes nothing' '
	unchanged cbackup_run 0 restore "$(archive)" "$DEST" --dry-run --force
	test_has "$CB_ERR" "^INFO: dry run: would restore"
	test_lacks "$CB_ERR" "^INFO: restored"
	test ! -e "$DEST/etc"
'

test_expect_success 'restore --dry-run without --force: refused as the restore would be' '
	unchanged cbackup_run 1 restore "$(archive)" "$DEST" --dry-run
	test_has "$CB_ERR" "not empty \(use --force\)"
'

test_expect_success 'restore --dry-run --path writes nothing' '
	unchanged cbackup_run 0 restore "$(archive)" "$DEST" --dry-run --force --path ./etc
	test_has "$CB_ERR" "^INFO: dry run: would restore [0-9]+ entries"
	test ! -e "$DEST/etc"
'

test_expect_success TMPFS 'restore --dry-run into too small a file system fails the space check' '
	mount_tmpfs "$SCRATCH/small" 64k
	head -c 1M /dev/urandom >"$SCRATCH/src/big.bin"
	mkdir "$SCRATCH/dump2"
	cbackup_run 0 backup --root "$SCRATCH/src" --id 486 --dumpdir "$SCRATCH/dump2" --tmpdir "$SCRATCH/tmp"
	cbackup_run 1 restore "$SCRATCH"/dump2/vzdump-lxc-486-*.tar.zst "$SCRATCH/small/d" --dry-run
	test_has "$CB_ERR" "not enough space in"
	test ! -e "$SCRATCH/small/d"
'

test_expect_success 'verify --dry-run checks and writes no .verified' '
	unchanged cbackup_run 0 verify "$(archive)" --dry-run
	test_has "$CB_ERR" "^INFO: archive .* is good"
	test ! -e "$(archive).verified"
'

test_expect_success 'index --dry-run builds the catalog and writes nothing' '
	unchanged cbackup_run 0 index "$(archive)" --dry-run
	test_has "$CB_ERR" "^INFO: dry run: would write catalog"
'

test_expect_success 'ls, list and prune --dry-run change nothing' '
	unchanged cbackup_run 0 ls "$(archive)" --dry-run
	unchanged cbackup_run 0 list --dumpdir "$D" --dry-run --config "$SCRATCH/empty.conf"
	unchanged cbackup_run 0 prune 485 --dumpdir "$D" --prune-backups keep-last=1 --dry-run \
		--config "$SCRATCH/empty.conf"
	test "$(ls "$D"/vzdump-lxc-485-*.tar.zst | wc -l)" = 2
'

test_expect_success 'mount and probe cannot do a dry run: exit 2, nothing changed' '
	mkdir "$SCRATCH/mnt"
	rc=0
	unchanged cbackup_run 2 mount "$(archive)" "$SCRATCH/mnt" --dry-run || rc=$?
	# (a mount that did happen is undone before the verdict)
	if mountpoint -q "$SCRATCH/mnt"; then umount "$SCRATCH/mnt"; fi
	test "$rc" = 0
	test_has "$CB_ERR" "^ERROR: .mount. cannot do a dry run: option .--dry-run. refused"
	unchanged cbackup_run 2 probe --dumpdir "$D" --tmpdir "$SCRATCH/tmp" --dry-run \
		--config "$SCRATCH/empty.conf"
	test_has "$CB_ERR" "^ERROR: .probe. cannot do a dry run"
'

test_done
