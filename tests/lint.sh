#!/bin/sh
# tests/lint.sh [FILE...]: rejects e2e test bodies whose assertions cannot
# fail. A body runs under `set -e`, which ignores the status of `! cmd`, of
# every `a && b` but the body's last command, and of anything `|| true`
# hides; so in a body (the quoted text of test_expect_success) a line
#   - may not start with `! `  (use test_must_fail, test_lacks),
#   - may not contain `&& !` or `|| true`,
#   - may not chain commands with `&&` unless it is the body's last line, or
#     the chain is a condition, not an assertion: after if/while/until/elif,
#     inside `( ... )`, before `||` on the same line, or ending in
#     `&& continue|break|return|VAR=...`;
# and a body must hold a command that can fail: not empty, not only
# echo/printf/true/: lines. Here-documents and "..." strings are not code.
# It also rejects timing thresholds anywhere in a test file (a measured
# duration held under a bound: tests/lint-timing.awk says how they are
# recognized): tests check mechanisms, bench/ measures time.
# Prints FILE:LINE: reason for each problem; exits 1 if there is one.
cd "$(dirname "$0")/.." || exit 2
[ $# = 0 ] && set -- tests/e2e/t[0-9]*.sh
bad=0
for f in "$@"; do
	awk -f tests/lint-timing.awk "$f" || bad=1
done
awk '
function problem(n, why) { printf "%s:%d: %s\n", FILENAME, n, why; bad = 1 }
function strip(s) {          # drop "..." strings and a trailing comment
	gsub(/\\"/, "", s); gsub(/"[^"]*"/, "\"\"", s); sub(/[ \t]#.*$/, "", s)
	return s
}
function end_body(   i, l, code, can_fail) {
	can_fail = 0
	for (i = 1; i <= nl; i++) {
		l = lines[i]
		if (l ~ /^[ \t]*! /) problem(nums[i], "`! cmd` cannot fail under set -e: use test_must_fail or test_lacks")
		if (l ~ /&&[ \t]*!/) problem(nums[i], "`&& !` cannot fail under set -e: one assertion per line")
		if (l ~ /\|\|[ \t]*true([ \t;]|$)/) problem(nums[i], "`|| true` hides a failure in a test body")
		if (l ~ /&&/ && i < last && !conditional(l))
			problem(nums[i], "`a && b` is checked only as the last command of a body: one assertion per line")
		code = l; sub(/^[ \t]+/, "", code)
		if (code != "" && code !~ /^(echo|printf|true|:)([ \t]|$)/) can_fail = 1
	}
	if (!can_fail) problem(start, "this test can never fail: its body runs no command that can")
	nl = 0
}
function conditional(l) {
	return l ~ /^[ \t]*(if|while|until|elif)[ \t]/ || l ~ /\([^)]*&&/ || l ~ /&&.*\|\|/ ||
	       l ~ /&&[ \t]*(continue|break|return|[A-Za-z_][A-Za-z0-9_]*=[^ ]*)[ \t;]*$/
}
FNR == 1 { inbody = 0; heredoc = "" }
{
	if (!inbody) {
		if ($0 ~ /test_expect_success/ && $0 ~ /\x27[ \t]*$/) { inbody = 1; start = FNR; nl = 0; last = 0; cont = 0 }
		next
	}
	if (heredoc != "") {
		t = $0; sub(/^\t+/, "", t)
		if (t == heredoc) heredoc = ""
		next
	}
	if ($0 ~ /^[ \t]*\x27[ \t]*$/) { inbody = 0; end_body(); next }
	l = strip($0)
	if (l ~ /^[ \t]*#/) next
	if (match(l, /<<-?[ \t]*\\?[A-Za-z_]+/)) {
		heredoc = substr(l, RSTART, RLENGTH); sub(/^<<-?[ \t]*\\?/, "", heredoc)
	}
	lines[++nl] = l; nums[nl] = FNR
	if (l !~ /[^ \t]/) next
	if (!cont) cmd = nl        # the last command may span lines
	last = cmd
	cont = (l ~ /(\\|&&|\|)[ \t]*$/)
}
END { exit bad }
' "$@" || bad=1
exit $bad
