#!/bin/bash
# tests/mutants/run.sh [PATTERN]: the mutation check (`make mutants`).
#
# Each tests/mutants/*.mut breaks one promise of the code on purpose and
# names the tests that must notice. For each (whose name contains PATTERN)
# the runner, in a scratch copy of the tree (never the working tree):
# applies the mutant, rebuilds, runs the named tests, restores the file, and
# prints one line:
#   killed    a named test failed: the promise is tested
#   SURVIVED  every named test passed: a test is missing
#   STALE     the mutant no longer changes its file (the code moved on):
#             refresh it, or it would report a kill it cannot make
#   BROKEN    the mutant does not build: fix the mutant
# then a total. Exit 0 only if every mutant was killed.
#
# A .mut file (blank lines and # comments ignored):
#   file  src/job/backup.c         the file the mutant changes
#   sed   s/a/b/                   a sed -E expression (one or more lines)
#   patch name.patch               or a patch (-p1) in tests/mutants/
#   tests test_prune t0130         unit binaries (test_*) and e2e scripts
#                                  (tNNNN); any failure kills the mutant
#   why   one line on what it breaks (shown on survival)
#
# --stale-only: apply each mutant and report STALE ones, without building or
# testing (seconds: run it after changing the code a mutant names).
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
MUTDIR=$TOP/tests/mutants
STALE_ONLY=0
[ "${1:-}" = --stale-only ] && { STALE_ONLY=1; shift; }
PATTERN=${1:-}
TEST_TIMEOUT=${MUTANT_TIMEOUT:-600}
JOBS=${JOBS:-2}

SCR=$(mktemp -d /tmp/cbackup-mutants.XXXXXX) || exit 2
trap 'rm -rf "$SCR"' EXIT
trap 'exit 130' INT TERM
COPY=$SCR/tree
LOG=$SCR/log

# The scratch copy: sources and the release build's objects (so a mutant
# recompiles one file), not the git metadata nor the other builds.
copy_tree() {
	mkdir -p "$COPY"
	tar -C "$TOP" --exclude=./.git --exclude=./build/san --exclude=./build/fuzz \
		--exclude=./build/mutants -cf - . | tar -C "$COPY" -xf -
}

build() {
	make -C "$COPY" --no-print-directory -j"$JOBS" DEVELOPER=1 all helpers unit-bins >"$LOG" 2>&1
}

# run_tests NAMES...: 0 if all pass, 1 if one fails (output in $LOG)
run_tests() {
	local t f
	: >"$LOG"
	for t in "$@"; do
		case $t in
		test_*) f=$COPY/build/rel/tests/$t
			timeout "$TEST_TIMEOUT" "$f" >>"$LOG" 2>&1 || return 1 ;;
		t[0-9]*) f=$(ls "$COPY"/tests/e2e/"$t"-*.sh 2>/dev/null | head -n 1)
			[ -n "$f" ] || { echo "no e2e script $t" >>"$LOG"; return 2; }
			timeout "$TEST_TIMEOUT" bash "$f" >>"$LOG" 2>&1 || return 1 ;;
		*) echo "unknown test '$t'" >>"$LOG"; return 2 ;;
		esac
	done
	return 0
}

# first_failure: what failed in $LOG (a TAP "not ok", a cmocka FAILED, or
# the last line), so that a kill can be checked for the right reason
first_failure() {
	grep -m 1 -E "^not ok|^\[  (FAILED|ERROR) +\] [a-z]" "$LOG" ||
		tail -n 1 "$LOG"
}

# parse FILE: sets M_FILE, M_SEDS (array), M_PATCH, M_TESTS, M_WHY
parse() {
	local key rest
	M_FILE= M_SEDS=() M_PATCH= M_TESTS= M_WHY=
	while IFS= read -r line; do
		case $line in ''|'#'*) continue ;; esac
		key=${line%% *} rest=${line#"$key"}
		rest=${rest#"${rest%%[! ]*}"}   # the blanks after the key
		case $key in
		file)  M_FILE=$rest ;;
		sed)   M_SEDS+=("$rest") ;;
		patch) M_PATCH=$MUTDIR/$rest ;;
		tests) M_TESTS=$rest ;;
		why)   M_WHY=$rest ;;
		*) echo "$1: unknown line '$line'" >&2; return 1 ;;
		esac
	done <"$1"
	[ -n "$M_FILE" ] && [ -n "$M_TESTS" ] && { [ ${#M_SEDS[@]} -gt 0 ] || [ -n "$M_PATCH" ]; }
}

# mutate: apply the mutant to the copy; 0 if the file changed, 1 if STALE
mutate() {
	local f=$COPY/$M_FILE e args=()
	cp -p "$f" "$SCR/orig"
	if [ -n "$M_PATCH" ]; then
		patch -s -p1 -d "$COPY" <"$M_PATCH" >/dev/null 2>&1 || return 1
	else
		for e in "${M_SEDS[@]}"; do args+=(-e "$e"); done
		sed -E -i "${args[@]}" "$f" || return 1
	fi
	! cmp -s "$f" "$SCR/orig"
}

# restore: the original text with a new mtime, so make rebuilds it back
restore() {
	cp "$SCR/orig" "$COPY/$M_FILE"
	touch "$COPY/$M_FILE"
}

echo "mutants: a scratch copy of the tree in $COPY"
copy_tree
if [ "$STALE_ONLY" = 0 ]; then
	build || { cat "$LOG"; echo "mutants: the unmutated tree does not build"; exit 2; }
fi

killed=0 survived=0 stale=0 broken=0 total=0
for m in "$MUTDIR"/*.mut; do
	name=$(basename "$m" .mut)
	case $name in *"$PATTERN"*) ;; *) continue ;; esac
	total=$((total + 1))
	if ! parse "$m"; then
		echo "BROKEN   $name (needs file, tests, and sed or patch)"; broken=$((broken + 1)); continue
	fi
	if ! mutate; then
		echo "STALE    $name ($M_FILE unchanged: refresh the mutant)"; stale=$((stale + 1))
		restore; continue
	fi
	if [ "$STALE_ONLY" = 1 ]; then
		echo "applies  $name"; killed=$((killed + 1))
		[ -n "${MUTANT_DIFF:-}" ] && diff -U0 "$SCR/orig" "$COPY/$M_FILE" | sed -n '/^[-+][^-+]/s/^/         /p'
		restore; continue
	fi
	if ! build; then
		echo "BROKEN   $name (does not build)"; tail -n 5 "$LOG" | sed 's/^/         /'
		broken=$((broken + 1)); restore; continue
	fi
	t0=$SECONDS
	run_tests $M_TESTS
	rc=$?
	case $rc in
	1) echo "killed   $name by $M_TESTS ($((SECONDS - t0)) s): $(first_failure)"
	   killed=$((killed + 1)) ;;
	0) echo "SURVIVED $name: $M_TESTS all pass - ${M_WHY:-no test notices}"; survived=$((survived + 1)) ;;
	*) echo "BROKEN   $name: $(tail -n 1 "$LOG")"; broken=$((broken + 1)) ;;
	esac
	restore
done
if [ "$STALE_ONLY" = 1 ]; then
	echo "mutants: $total, applied $killed, stale $stale, broken $broken"
else
	echo "mutants: $total, killed $killed, survived $survived, stale $stale, broken $broken"
fi
[ "$killed" = "$total" ]
