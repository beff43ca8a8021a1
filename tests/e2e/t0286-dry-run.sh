#!/bin/bash
# --dry-run checks what the real run checks before it touches anything
# (issue 28, items 3 and 11): a hook script that is missing or not
# executable is a configuration error (exit 2) in both; a dump disk with
# less free space than the guest holds is a warning in both; the dry run
# prints the resolved dumpdir, the archive's name, the mode, the excludes
# and the hook.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
D=$SCRATCH/dump

test_expect_success 'setup' '
	make_small_tree "$SRC" dry-ct
	mkdir -p "$SCRATCH/tmp" "$D"
	printf "#!/bin/sh\nexit 0\n" >"$SCRATCH/hook"
	chmod +x "$SCRATCH/hook"
	printf "#!/bin/sh\nexit 0\n" >"$SCRATCH/hook-noexec"
'

# both RC WHAT ARGS...: --dry-run and the real run exit RC, saying WHAT
both() {
	local rc=$1 what=$2
	shift 2
	cbackup_run "$rc" backup --root "$SRC" --id 101 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--freeze-cmd true --thaw-cmd true --dry-run "$@"
	test_has "$CB_ERR" "$what"
	cbackup_run "$rc" backup --root "$SRC" --id 101 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--freeze-cmd true --thaw-cmd true "$@"
	test_has "$CB_ERR" "$what"
}

test_expect_success 'a missing hook script: exit 2 in the dry run as in the real run' '
	both 2 "^ERROR: option --script: hook script .*no-such-hook.: No such file or directory" \
		--script "$SCRATCH/no-such-hook"
	test -z "$(ls -A "$D")"
'

test_expect_success 'a hook script that is not executable: exit 2, both; FILE:LINE from a config' '
	printf "script = %s\n" "$SCRATCH/hook-noexec" >hook.conf
	both 2 "^ERROR: hook.conf:1: key .script.: hook script .*hook-noexec. is not an executable file" \
		--config hook.conf
	test -z "$(ls -A "$D")"
'

test_expect_success 'the dry run prints what the real run would use' '
	cbackup_run 0 backup --root "$SRC" --id 101 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--freeze-cmd true --thaw-cmd true --dry-run --script "$SCRATCH/hook" \
		--exclude-path "/srv/cache/?* *.bak" --compress gzip
	cat "$CB_ERR"
	test_has "$CB_ERR" "^INFO: dry run: mode suspend, as configured\$"
	test_has "$CB_ERR" "^INFO: dry run: dumpdir .$D.\$"
	test_has "$CB_ERR" "^INFO: dry run: archive .$D/vzdump-lxc-101-[0-9]{4}_[0-9]{2}_[0-9]{2}-[0-9]{2}_[0-9]{2}_[0-9]{2}\\.tar\\.gz.\$"
	test_has "$CB_ERR" "^INFO: dry run: exclude ./srv/cache/\\?\\*.\$"
	test_has "$CB_ERR" "^INFO: dry run: exclude .\\*\\.bak.\$"
	test_has "$CB_ERR" "^INFO: dry run: exclude ./tmp/\\?\\*.\$"
	test_has "$CB_ERR" "^INFO: dry run: hook script .$SCRATCH/hook. \\(executable\\)\$"
	test_has "$CB_ERR" "^INFO: dry run: estimate .* to stage; checks passed; nothing copied\$"
	test -z "$(ls "$D")"   # (the storage lock file .cbackup-ct-101.lock only)
'

test_expect_success ROOT,TMPFS 'a dump disk with 2 MiB free for an 8 MiB guest: a warning, dry run and real run' '
	head -c 8M /dev/urandom >"$SRC/srv/data/big.bin"
	mount_tmpfs "$SCRATCH/small-dump" 2m
	cbackup_run 0 backup --root "$SRC" --id 102 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/small-dump" --freeze-cmd true --thaw-cmd true --dry-run
	test_has "$CB_ERR" "^WARN: dumpdir .*small-dump. has [0-9.]+[KM]iB free and the guest holds [0-9.]+MiB before compression: the archive may not fit\$"
	test_has "$CB_ERR" "checks passed with warnings \\(see WARN above\\); nothing copied\$"
	cbackup_run 1 backup --root "$SRC" --id 102 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/small-dump" --freeze-cmd true --thaw-cmd true
	test_has "$CB_ERR" "^WARN: dumpdir .*small-dump. has .* the archive may not fit\$"
	rm "$SRC/srv/data/big.bin"
'

test_done
