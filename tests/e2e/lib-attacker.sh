# tests/e2e/lib-attacker.sh: sourced after lib.sh by the security tests
# (t04NN): an unprivileged local user as the attacker, and the assertion
# helpers (defined here only when lib.sh does not have them yet; same
# names and meaning: test_has FILE ERE = grep -Eq, test_lacks FILE ERE =
# not grep -Eq, printing the matching lines on failure, test_cmp A B =
# diff -u).

if ! declare -F test_has >/dev/null; then
	test_has() {
		grep -Eq -- "$2" "$1" && return 0
		echo "'$1' has no line matching '$2':"; cat "$1"
		return 1
	}
fi
if ! declare -F test_lacks >/dev/null; then
	test_lacks() {
		grep -E -- "$2" "$1" || return 0
		echo "'$1' has the lines above, matching '$2'"
		return 1
	}
fi
if ! declare -F test_cmp >/dev/null; then
	test_cmp() { diff -u "$1" "$2"; }
fi

# as_nobody CMD...: run CMD as uid/gid 65534 with no supplementary groups
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }

# the attacker must reach $SCRATCH to plant anything in it
chmod 755 "$SCRATCH"

# mode_of FILE: octal permission bits ("640")
mode_of() { stat -c %a "$1"; }
