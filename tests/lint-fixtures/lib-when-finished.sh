#!/bin/bash
# Fixture of t0181: test_when_finished runs its commands newest first when
# a body ends, passed or failed; a failing one fails the test. Writes the
# order into $1.
. "$(dirname "$0")/../e2e/lib.sh"
LOG=$1

test_expect_success 'a body that passes' '
	test_when_finished "echo pass-1 >>$LOG"
	test_when_finished "echo pass-2 >>$LOG"
	true
'

test_expect_success 'a body that fails' '
	test_when_finished "echo fail-1 >>$LOG"
	false
	echo never >>$LOG
'

test_expect_success 'a cleanup that fails' '
	test_when_finished "false"
	true
'

test_done
