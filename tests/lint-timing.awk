# Timing thresholds: a measured duration held under a bound. Tests check
# mechanisms; under load any such bound fails (issue 29). A duration is a
# variable assigned from a clock (now_s, elapsed_since, seconds_between,
# EPOCHREALTIME, date +%s) or from a time the log printed ("N seconds",
# "N ms"), or from another duration, or named as one (took, ms, x_s, x_ms).
# Flagged: such a value, or a clock read inline, on the small side of a
# comparison (at_most, -lt, -le, awk's < or <=, or the second argument of
# at_least); and awk that subtracts two values and compares the difference
# with a number (times read from files: t - k > 2000). Loop conditions
# (while/until) are timeouts, not assertions, and lower bounds (at_least
# DURATION MIN: bwlimit, lockwait) only grow under load: both are allowed.
function clock(s) {
	return s ~ /(elapsed_since|seconds_between|EPOCHREALTIME|now_s|date \+%s|[0-9.*\\)\]]+ ?(seconds|ms)([^A-Za-z]|$)|online again after)/
}
function uses_dur(s,   v) {
	if (clock(s)) return 1
	for (v in dur) if (s ~ ("\\$\\{?" v "([^A-Za-z0-9_]|$)")) return 1
	return 0
}

{ line[++nl] = $0 }
match($0, /(^|[ \t;(])(local[ \t]+)?[A-Za-z_][A-Za-z0-9_]*=/) {
	s = substr($0, RSTART, RLENGTH); sub(/^[ \t;(]*(local[ \t]+)?/, "", s); sub(/=$/, "", s)
	rhs[s] = rhs[s] "\n" substr($0, RSTART + RLENGTH)
}
END {
	for (v in rhs)              # named as one: took, elapsed, x_s, x_ms...
		if (v ~ /^(took|elapsed|duration|ms|secs?|seconds|[A-Za-z0-9]+_(s|ms|sec|secs|seconds|took))$/) dur[v] = 1
	do {                        # durations, to a fixed point
		grew = 0
		for (v in rhs) if (!(v in dur) && uses_dur(rhs[v])) { dur[v] = 1; grew = 1 }
	} while (grew)
	for (i = 1; i <= nl; i++) {
		l = line[i]
		if (l ~ /^[ \t]*(while|until)[ \t]/ || l ~ /^[ \t]*#/) continue
		if (l ~ /(^|[ \t;])(local[ \t]+)?[A-Za-z_][A-Za-z0-9_]*=/ && l !~ /(at_most|at_least|exit !\(|-lt|-le)/) continue
		small = 0
		if (l ~ /at_most[ \t]/ && uses_dur(l)) small = 1
		if (l ~ /[ \t](-lt|-le)[ \t]/ && uses_dur(l)) small = 1
		if (l ~ /exit !?\(?[^)]*<=?/ && uses_dur(l)) small = 1
		# awk that subtracts two times and bounds the difference
		# (t - k > 2000, d = t - f ... d < 2.5): a clock read from a file
		if (l ~ /[A-Za-z_][A-Za-z0-9_]* - [A-Za-z_][A-Za-z0-9_]*/ && l ~ /[<>]=? *[0-9]/ && l !~ /at_least/) small = 1
		if (match(l, /at_least[ \t]+("[^"]*"|[^ \t]+)[ \t]+/)) {
			rest = substr(l, RSTART + RLENGTH)
			if (uses_dur(rest)) small = 1
		}
		if (small) printf "%s:%d: a timing threshold (a duration held under a bound): check the mechanism instead; bench/ measures time\n", FILENAME, i
		if (small) bad = 1
	}
	exit bad
}

