#!/bin/bash
# Install and first steps (issue 28, item 9): `make install` puts the man
# pages, the systemd unit and timer (ExecStart following PREFIX), the cron
# file (its job commented out: timer or cron, not both), the completion and
# the default dumpdir (0750) under DESTDIR; docs/scheduling.md's unit is the shipped
# one (KillMode=process); `cbackup mount` refuses a directory that is
# already a mount point; a non-root backup says first that it needs root.
. "$(dirname "$0")/lib.sh"

test_expect_success 'make install PREFIX=/usr: every file where Debian expects it' '
	make --no-print-directory -s -C "$TOP" install DESTDIR="$SCRATCH/root" PREFIX=/usr >make.out 2>&1 ||
		{ cat make.out; exit 1; }
	r=$SCRATCH/root
	test -x "$r/usr/sbin/cbackup"
	test -s "$r/usr/share/man/man8/cbackup.8"
	test -s "$r/usr/share/man/man5/cbackup.conf.5"
	test_has "$r/usr/lib/systemd/system/cbackup.service" "^ExecStart=/usr/sbin/cbackup --all --quiet\$"
	test_has "$r/usr/lib/systemd/system/cbackup.service" "^KillMode=process\$"
	test_has "$r/usr/lib/systemd/system/cbackup.timer" "^OnCalendar="
	test_has "$r/etc/cron.d/cbackup" "^#0 3 \\* \\* \\*	root	/usr/sbin/cbackup --all --quiet\$"
	test_lacks "$r/etc/cron.d/cbackup" "^[0-9]"
	test -s "$r/usr/share/bash-completion/completions/cbackup"
	test "$(stat -c %a "$r/var/lib/cbackup/dump")" = 750
'

test_expect_success 'the default PREFIX: /usr/local in the unit; an existing cron file is kept' '
	mkdir -p "$SCRATCH/root2/etc/cron.d"
	echo "# mine" >"$SCRATCH/root2/etc/cron.d/cbackup"
	make --no-print-directory -s -C "$TOP" install DESTDIR="$SCRATCH/root2" >make.out 2>&1 ||
		{ cat make.out; exit 1; }
	test_has "$SCRATCH/root2/usr/local/lib/systemd/system/cbackup.service" "^ExecStart=/usr/local/sbin/cbackup "
	test "$(cat "$SCRATCH/root2/etc/cron.d/cbackup")" = "# mine"
'

test_expect_success 'SBINDIR and MANDIR are honoured; make uninstall removes what install put, keeps an edited cron file and the dump dir' '
	r=$SCRATCH/root3
	make --no-print-directory -s -C "$TOP" install DESTDIR="$r" PREFIX=/opt/cb SBINDIR=/opt/cb/bin \
		MANDIR=/opt/cb/man >make.out 2>&1 || { cat make.out; exit 1; }
	test -x "$r/opt/cb/bin/cbackup"
	test -s "$r/opt/cb/man/man8/cbackup.8"
	test_has "$r/opt/cb/lib/systemd/system/cbackup.service" "^ExecStart=/opt/cb/bin/cbackup "
	test_has "$r/etc/cron.d/cbackup" "root	/opt/cb/bin/cbackup --all"
	make --no-print-directory -s -C "$TOP" uninstall DESTDIR="$r" PREFIX=/opt/cb SBINDIR=/opt/cb/bin \
		MANDIR=/opt/cb/man >make.out 2>&1 || { cat make.out; exit 1; }
	find "$r" -type f >left
	test_lacks left .
	test -d "$r/var/lib/cbackup/dump"
	make --no-print-directory -s -C "$TOP" install DESTDIR="$r" PREFIX=/opt/cb >make.out 2>&1 || { cat make.out; exit 1; }
	echo "0 4 * * * root /opt/cb/sbin/cbackup --all" >>"$r/etc/cron.d/cbackup"
	make --no-print-directory -s -C "$TOP" uninstall DESTDIR="$r" PREFIX=/opt/cb >make.out 2>&1 || { cat make.out; exit 1; }
	test_has make.out "kept .*/etc/cron.d/cbackup \\(edited since install\\)"
	test_has "$r/etc/cron.d/cbackup" "^0 4 "
	test ! -e "$r/opt/cb/sbin/cbackup"
'

test_expect_success 'a user'"'"'s CFLAGS come after the project'"'"'s, -Werror only with DEVELOPER=1 (make check, CI)' '
	# as a user runs it: CI exports DEVELOPER=1 and make check its MAKEFLAGS
	env -u DEVELOPER -u MAKEFLAGS -u MAKELEVEL -u MFLAGS \
		make --no-print-directory -s -C "$TOP" -n -B CFLAGS="-O0 -Wno-error" build/rel/core/util.o >cc.out
	test_has cc.out " -Iinclude .* -O0 -Wno-error -MMD"
	test_lacks cc.out "Werror"
	make --no-print-directory -s -C "$TOP" -n -B DEVELOPER=1 build/rel/core/util.o >cc.out
	test_has cc.out " -Werror .* -O2 -g -MMD"
	test_has "$TOP/.ci/run" "^export DEVELOPER=1"
'

test_expect_success 'docs/scheduling.md shows the shipped unit and timer, not another one' '
	sed -n "/^# cbackup.service\$/,/^# cbackup.timer\$/p" "$TOP/docs/scheduling.md" | sed "1d;\$d" | sed "/^\$/d" >readme.service
	grep -v "^#" "$TOP/contrib/cbackup.service" | sed "/^\$/d" >shipped.service
	test_cmp shipped.service readme.service
	sed -n "/^# cbackup.timer\$/,/^\`\`\`\$/p" "$TOP/docs/scheduling.md" | sed "1d;\$d" | sed "/^\$/d" >readme.timer
	grep -v "^#" "$TOP/contrib/cbackup.timer" | sed "/^\$/d" >shipped.timer
	test_cmp shipped.timer readme.timer
	test_lacks "$TOP/docs/scheduling.md" "^KillMode=mixed"
'

test_expect_success ROOT,TMPFS 'cbackup mount on a directory that is already a mount point: refused' '
	make_small_tree "$SCRATCH/src" m
	mkdir "$SCRATCH/tmp" "$SCRATCH/dump"
	cbackup_run 0 backup --root "$SCRATCH/src" --id 1 --tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump"
	mount_tmpfs "$SCRATCH/mnt" 1m
	echo mine >"$SCRATCH/mnt/file"
	cbackup_run 1 mount "$(find_archive "$SCRATCH/dump" ct 1 .zst)" "$SCRATCH/mnt"
	test_has "$CB_ERR" "is already a mount point: unmount it first"
	test "$(cat "$SCRATCH/mnt/file")" = mine
	test "$(grep -c " $SCRATCH/mnt " /proc/self/mounts)" = 1
'

test_expect_success ROOT 'a non-root backup says first that it needs root (exit 2)' '
	rc=0
	env -u CBACKUP_LOCK_DIR setpriv --reuid=65534 --regid=65534 --clear-groups -- \
		"$CBACKUP" backup --root /nonexistent --id 1 >out 2>err || rc=$?
	cat err
	test "$rc" = 2
	test "$(head -n 1 err)" = "ERROR: cbackup backup must run as root: it freezes guests, reads every file of them and locks in /run/cbackup (for trees of your own, set CBACKUP_LOCK_DIR to a directory of yours)"
'

test_done
