# tests/e2e/lib-attacker.sh: sourced after lib.sh by the security tests
# (t04NN): an unprivileged local user as the attacker.

# as_nobody CMD...: run CMD as uid/gid 65534 with no supplementary groups
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }

# the attacker must reach $SCRATCH to plant anything in it
chmod 755 "$SCRATCH"

# mode_of FILE: octal permission bits ("640")
mode_of() { stat -c %a "$1"; }
