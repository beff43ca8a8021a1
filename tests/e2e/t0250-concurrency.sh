#!/bin/bash
# Concurrency and load (issue 5, item 6): 8 guests (each a writer in its
# own cgroup) in one configuration; job A backs up all of them, job B (four
# of them) starts at the same time and waits for the global lock, job C
# (all of them) starts while A is half-way. All three finish with exit 0,
# every archive verifies, no lock file is left held, no guest is frozen.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src DUMP=$SCRATCH/dump TMPD=$SCRATCH/tmp CONF=$SCRATCH/cbackup.conf
export CBACKUP_LOCK_DIR=$SCRATCH/locks
IDS="801 802 803 804 805 806 807 808"

test_expect_success ROOT,CGROUP2 'setup: 8 guests, each a writer in its own cgroup' '
	mkdir -p "$DUMP" "$TMPD" "$CBACKUP_LOCK_DIR"
	# each guest takes at least 0.4 s: jobs overlap for real, and the same
	# guest is never backed up twice within one second
	printf "#!/bin/sh\n[ \"\$1\" = backup-start ] && sleep 0.4\nexit 0\n" >"$SCRATCH/hook.sh"
	chmod +x "$SCRATCH/hook.sh"
	{
		echo "tmpdir = $TMPD"
		echo "dumpdir = $DUMP"
		echo "compress = zstd"
		echo "script = $SCRATCH/hook.sh"
	} >"$CONF"
	for id in $IDS; do
		make_many_files "$SRC/$id" 100
		head -c 256K /dev/urandom >"$SRC/$id/blob"
		cg=$(make_cgroup v2)
		echo "$cg" >>"$SCRATCH/cgroups"
		start_writer "$cg" "$SCRATCH/log-$id" "$SCRATCH/side-$id"
		printf "\n[ct %s]\nroot = %s\nfreeze-cgroup = %s\n" "$id" "$SRC/$id" "$cg" >>"$CONF"
	done
'

test_expect_success ROOT,CGROUP2 'three jobs at once: all succeed, one after the other' '
	"$CBACKUP" --all --config "$CONF" >"$SCRATCH/a.out" 2>"$SCRATCH/a.err" &
	a=$!
	wait_for 5 grep -q "Starting Backup of VM 801" "$SCRATCH/a.err"
	"$CBACKUP" 805 806 807 808 --config "$CONF" --lockwait 1 >"$SCRATCH/b.out" 2>"$SCRATCH/b.err" &
	b=$!
	wait_for 10 grep -q "Starting Backup of VM 804" "$SCRATCH/a.err"
	"$CBACKUP" --all --config "$CONF" --lockwait 1 >"$SCRATCH/c.out" 2>"$SCRATCH/c.err" &
	c=$!
	ra=0 rb=0 rc=0
	wait $a || ra=$?
	wait $b || rb=$?
	wait $c || rc=$?
	tail -n 3 "$SCRATCH"/[abc].err
	echo "exit status A $ra, B $rb, C $rc"
	test "$ra" = 0
	test "$rb" = 0
	test "$rc" = 0
	grep "trying to get global lock - waiting" "$SCRATCH/b.err"
	grep "trying to get global lock - waiting" "$SCRATCH/c.err"
	grep -x "INFO: Backup job finished successfully" "$SCRATCH/a.err"
	grep -x "INFO: Backup job finished successfully" "$SCRATCH/b.err"
	grep -x "INFO: Backup job finished successfully" "$SCRATCH/c.err"
'

test_expect_success ROOT,CGROUP2 'every archive verifies (20 of them), nothing left over' '
	n=0
	for a in "$DUMP"/vzdump-lxc-8*.tar.zst; do
		"$CBACKUP" verify "$a" >"$CB_OUT" 2>"$CB_ERR" || { cat "$CB_ERR"; false; }
		grep -q "checksum matches" "$CB_ERR"
		n=$((n + 1))
	done
	echo "$n archives"
	[ "$n" = 20 ]
	no_tmp_files "$DUMP"
	# the copies kept for the next night (keep-staging auto, when the
	# file system of the tmpdir has room), nothing else
	ls -A "$TMPD" | grep -vx cbackup >"$SCRATCH/left" || :
	[ ! -d "$TMPD/cbackup" ] ||
		ls -A "$TMPD/cbackup" | grep -vxE "cbackup-80[1-8]\.stage(\.[a-z0-9]+)?" >>"$SCRATCH/left" || :
	test_cmp /dev/null "$SCRATCH/left"
'

test_expect_success ROOT,CGROUP2 'no lock held, no guest frozen, every writer runs' '
	ls -la "$CBACKUP_LOCK_DIR"
	locks_free "$CBACKUP_LOCK_DIR" "$DUMP"
	i=0
	while read -r cg; do
		i=$((i + 1))
		test_must_fail cg_frozen "$cg"
	done <"$SCRATCH/cgroups"
	[ $i = 8 ]
	for id in $IDS; do counter_advances "$SCRATCH/side-$id"; done
'

test_done
