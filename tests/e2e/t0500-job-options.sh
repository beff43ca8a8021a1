#!/bin/bash
# Job-level options (the job hooks' script, their DUMPDIR and STOREID) come
# from the global section, its storage and the command line, resolved once
# for the job: never from whichever guest happens to be named first, so
# `cbackup 1 2` and `cbackup 2 1` run the same job hooks.
. "$(dirname "$0")/lib.sh"

CONF=$SCRATCH/cbackup.conf
TRACE=$SCRATCH/trace

# hook NAME: a hook script that records "NAME PHASE ID DUMPDIR STOREID"
hook() {
	cat >"$SCRATCH/$1.sh" <<-HOOK
	#!/bin/sh
	echo "$1 \$1 \${3:--} \${DUMPDIR:--} \${STOREID:--}" >>"$TRACE"
	HOOK
	chmod +x "$SCRATCH/$1.sh"
}

test_expect_success 'setup: a global hook, a guest with its own hook and storage' '
	make_small_tree "$SCRATCH/ct1"
	make_small_tree "$SCRATCH/ct2"
	mkdir "$SCRATCH/tmp" "$SCRATCH/nas" "$SCRATCH/other"
	hook global
	hook guest1
	cat >"$CONF" <<-CONF
	tmpdir = $SCRATCH/tmp
	storage = nas
	script = $SCRATCH/global.sh

	[storage nas]
	path = $SCRATCH/nas

	[storage other]
	path = $SCRATCH/other

	[ct 1]
	root = $SCRATCH/ct1
	script = $SCRATCH/guest1.sh
	storage = other

	[ct 2]
	root = $SCRATCH/ct2
	CONF
'

# job_phases ORDER...: the job-level lines of the trace of `cbackup ORDER`
job_phases() {
	rm -f "$TRACE"
	cbackup_run 0 "$@" --config "$CONF"
	grep -E "^[a-z0-9]+ job-" "$TRACE"
}

test_expect_success 'cbackup 1 2 and cbackup 2 1 run the same job hooks: the global script' '
	job_phases 1 2 >one-two
	job_phases 2 1 >two-one
	cat one-two
	test_cmp one-two two-one
	test_has one-two "^global job-init - $SCRATCH/nas nas\$"
	test_has one-two "^global job-start "
	test_has one-two "^global job-end "
	test_lacks one-two "^guest1 "
'

test_expect_success 'the guest phases still run the guest'"'"'s own script with its storage' '
	job_phases 1 2 >/dev/null
	test_has "$TRACE" "^guest1 backup-start 1 $SCRATCH/other other\$"
	test_has "$TRACE" "^global backup-start 2 $SCRATCH/nas nas\$"
	test_lacks "$TRACE" "^global backup-start 1 "
'

test_expect_success '--script on the command line is the job hook' '
	hook cli
	rm -f "$TRACE"
	cbackup_run 0 1 --config "$CONF" --script "$SCRATCH/cli.sh"
	test_has "$TRACE" "^cli job-start "
	test_lacks "$TRACE" "^global "
'

test_expect_success 'mode snapshot: the run and its hooks fall back to suspend (the options stay as resolved)' '
	cat >"$SCRATCH/mode.sh" <<-HOOK
	#!/bin/sh
	echo "\$1 \${2:--}" >>"$TRACE"
	HOOK
	chmod +x "$SCRATCH/mode.sh"
	rm -f "$TRACE"
	cbackup_run 0 2 --config "$CONF" --script "$SCRATCH/mode.sh" --mode snapshot
	test_has "$CB_ERR" "trying .suspend. mode instead"
	test_has "$CB_ERR" "backup mode: suspend"
	test_has "$TRACE" "^backup-start suspend\$"
	test_lacks "$TRACE" "snapshot"
'

test_done
