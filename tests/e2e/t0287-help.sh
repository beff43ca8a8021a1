#!/bin/bash
# Help (issue 28, item 7): `cbackup help COMMAND` and `cbackup COMMAND
# --help` show that command's usage and only its options, wrapped to the
# terminal's width; `cbackup help` is the whole help; an unknown command
# says so, with the nearest command (exit 2), instead of "guest ... is not
# defined".
. "$(dirname "$0")/lib.sh"

test_expect_success 'cbackup restore --help: restore'"'"'s usage and options only' '
	cbackup_run 0 restore --help
	test_has "$CB_OUT" "^usage: cbackup restore ARCHIVE DESTDIR"
	test_has "$CB_OUT" "^  --force "
	test_has "$CB_OUT" "^  --path PATH "
	test_lacks "$CB_OUT" "^  --(mode|compress|bwlimit|all) "
	test_lacks "$CB_OUT" "cbackup prune"
'

test_expect_success 'cbackup help COMMAND is the same as COMMAND --help, for every command' '
	for c in backup restore ls index mount verify list prune probe guests; do
		cbackup_run 0 help "$c"
		cp "$CB_OUT" "help-$c"
		cbackup_run 0 "$c" --help
		test_cmp "help-$c" "$CB_OUT"
		test_has "help-$c" "^usage: cbackup \\[?$c"
	done
	test_has help-prune "^  --prune-backups "
	test_lacks help-prune "^  --(mode|json|force) "
	test_has help-list "^  --output-format "
	test_has help-backup "^  --mode "
	test_lacks help-backup "^  --(force|path|json|staging) "
'

test_expect_success 'wrapped to the terminal: no line wider than COLUMNS, continuation indented' '
	for w in 60 100; do
		COLUMNS=$w cbackup_run 0 help prune
		# the option lines (the usage lines are as written)
		awk -v w=$w "/^  [- ]/ && !/^ +cbackup/ && length(\$0) > w { print \"too long: \" \$0; bad = 1 } END { exit bad }" "$CB_OUT"
		COLUMNS=$w cbackup_run 0 --help
		awk -v w=$w "/^  [- ]/ && !/^ +cbackup/ && length(\$0) > w { print \"too long: \" \$0; bad = 1 } END { exit bad }" "$CB_OUT"
	done
	COLUMNS=60 cbackup_run 0 help backup
	test_has "$CB_OUT" "^ {24}[a-z(]"
'

test_expect_success 'cbackup help: the whole help, which names help itself' '
	cbackup_run 0 help
	test_has "$CB_OUT" "^       cbackup help \\[COMMAND\\]"
	test_has "$CB_OUT" "^  --mode "
	test_has "$CB_OUT" "130/143 SIGINT/SIGTERM"
'

test_expect_success 'an unknown command says so, with the nearest (exit 2)' '
	: >empty.conf
	cbackup_run 2 prnue --config empty.conf
	test_has "$CB_ERR" "^ERROR: unknown command .prnue. \\(did you mean .prune.\\? see cbackup help\\)\$"
	cbackup_run 2 frobnicate --config empty.conf
	test_has "$CB_ERR" "^ERROR: unknown command .frobnicate. \\(commands: backup, restore"
	test_lacks "$CB_ERR" "is not defined"
	cbackup_run 2 help frobnicate
	test_has "$CB_ERR" "unknown command .frobnicate."
	# a numeric ID that is not defined is still a guest
	cbackup_run 2 4711 --config empty.conf
	test_has "$CB_ERR" "guest .4711. is not defined"
'

test_expect_success 'the --stopwait help is mode stop'"'"'s time limit, not a 30 s freeze wait (freeze-wait is 10 s)' '
	cbackup_run 0 backup --help
	tr -s " \n" "  " <"$CB_OUT" >flat
	test_has flat "--stopwait MINUTES maximal time to wait until a guest is stopped \(mode stop: the stop command.s time limit\)"
	test_lacks flat "30 seconds"
	cbackup_run 0 help guests
	test_has "$CB_OUT" "^usage: cbackup guests"
	test_has "$CB_OUT" "^  --config "
	test_lacks "$CB_OUT" "^  --(mode|force|json) "
'

test_done
