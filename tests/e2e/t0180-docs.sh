#!/bin/bash
# Documentation is complete and renders cleanly: every option `cbackup
# --help` lists is in cbackup(8); every one that is also a config key is
# documented in cbackup.conf(5) and vzdump.conf.example; every subcommand
# is in cbackup(8); groff -man -ww -z is silent on both pages; the contrib
# files exist and parse.
. "$(dirname "$0")/lib.sh"

MAN8=$TOP/man/cbackup.8
MAN5=$TOP/man/cbackup.conf.5
EXAMPLE=$TOP/vzdump.conf.example

render() {  # MANPAGE: plain text, no hyphenation, no line breaks in paragraphs
	groff -man -Tascii -rLL=5000n -rHY=0 "$1" 2>/dev/null | col -bx
}

test_expect_success 'setup: the options of cbackup --help, config keys among them' '
	"$CBACKUP" --help >help
	sed -nE "s/^  --([a-z0-9-]+).*/\1/p" help | LC_ALL=C sort -u >options
	test "$(wc -l <options)" -ge 30
	# a config key is one that a config file accepts somewhere: "KEY = x"
	# in the global section is either fine, a bad value, or "not allowed
	# here"; only command-line options are "unknown" or "command line only"
	# (a dry run of an ad hoc backup: the job prints the config warnings)
	: >keys
	mkdir -p probe/root probe/tmp probe/dump
	while read -r o; do
		printf "%s = x\n" "$o" >probe.conf
		# any exit status: what matters is the warning it prints, if any
		rc=0
		"$CBACKUP" backup --root probe/root --tmpdir probe/tmp --dumpdir probe/dump --dry-run \
			--config probe.conf >/dev/null 2>probe.err || rc=$?
		grep -qE "unknown key|command line only|cbackup ignores" probe.err || echo "$o" >>keys
	done <options
	# the keys that only exist in a section
	printf "path\n" >>keys
	cat keys
	grep -qx mode keys
	grep -qx root keys
	grep -qx config keys
	test_must_fail grep -qx stdout keys
	test_must_fail grep -qx all keys
'

if command -v groff >/dev/null && command -v col >/dev/null; then
	HAVE_GROFF=1
else
	HAVE_GROFF=0
fi

if [ "$HAVE_GROFF" = 1 ]; then
	test_expect_success 'groff -man -ww -z is silent on cbackup.8 and cbackup.conf.5' '
		for page in "$MAN8" "$MAN5"; do
			groff -man -ww -z "$page" >out 2>&1
			cat out
			test ! -s out
		done
	'

	test_expect_success 'cbackup.8 documents every option of --help' '
		render "$MAN8" >man8.txt
		missing=
		while read -r o; do
			grep -qE -- "--$o([^a-z0-9-]|\$)" man8.txt || missing="$missing --$o"
		done <options
		test -z "$missing" || { echo "not in cbackup.8:$missing"; exit 1; }
	'

	test_expect_success 'cbackup.8 documents every subcommand and the files' '
		render "$MAN8" >man8.txt
		sed -nE "s/^( +usage:)? +cbackup ([a-z]+) .*/\2/p" help | sort -u >commands
		test "$(wc -l <commands)" -ge 6
		while read -r c; do
			grep -qE "^ {1,12}$c( |\$)" man8.txt || { echo "subcommand $c has no entry"; exit 1; }
		done <commands
		for word in CBACKUP_LOCK_DIR cbackup.lock .protected .sha256 .verified \
			    job-init job-start backup-start pre-stop pre-restart post-restart \
			    backup-end backup-abort log-end job-end job-abort \
			    DUMPDIR STOREID VMTYPE HOSTNAME TARGET LOGFILE keep-last keep-weekly; do
			grep -qF -- "$word" man8.txt || { echo "cbackup.8 does not mention $word"; exit 1; }
		done
	'

	test_expect_success 'cbackup.conf.5 has an entry for every config key' '
		render "$MAN5" >man5.txt
		missing=
		while read -r k; do
			grep -qE "^ +$k = " man5.txt || missing="$missing $k"
		done <keys
		test -z "$missing" || { echo "no entry in cbackup.conf.5:$missing"; exit 1; }
	'
else
	test_skip 'groff -man -ww -z is silent on both pages' 'groff not installed (Debian: groff-base)'
	test_skip 'cbackup.8 documents every option of --help' 'groff not installed'
	test_skip 'cbackup.8 documents every subcommand and the files' 'groff not installed'
	test_skip 'cbackup.conf.5 has an entry for every config key' 'groff not installed'
fi

test_expect_success 'vzdump.conf.example shows every config key' '
	missing=
	while read -r k; do
		grep -qE "^#?$k(:|[[:space:]]*=)" "$EXAMPLE" || missing="$missing $k"
	done <keys
	test -z "$missing" || { echo "not in vzdump.conf.example:$missing"; exit 1; }
'

test_expect_success 'vzdump.conf.example, uncommented, is a valid config' '
	sed -E "s/^#([a-z[])/\1/" "$EXAMPLE" | grep -v "^#" >example.conf
	# paths in it do not exist here: parse only (list reads the config)
	"$CBACKUP" list --config example.conf --dumpdir "$SCRATCH" >/dev/null 2>err || { cat err; exit 1; }
	test_must_fail grep -E "^(ERROR|WARN)" err
'

test_expect_success 'contrib: systemd units, cron line, bash completion' '
	c=$TOP/contrib
	grep -qx "Type=oneshot" "$c/cbackup.service"
	grep -qE "^ExecStart=/usr/(local/)?sbin/cbackup .*--all" "$c/cbackup.service"
	grep -qE "^OnCalendar=" "$c/cbackup.timer"
	grep -qx "Persistent=true" "$c/cbackup.timer"
	grep -qE "^WantedBy=timers.target" "$c/cbackup.timer"
	if command -v systemd-analyze >/dev/null; then
		# verify wants the ExecStart binary to exist: point it at this build
		sed "s|^ExecStart=[^ ]*|ExecStart=$CBACKUP|" "$c/cbackup.service" >cbackup.service
		cp "$c/cbackup.timer" .
		# it fails with a message on stderr: the message is the assertion
		rc=0
		systemd-analyze verify --man=no ./cbackup.service ./cbackup.timer >verify.out 2>&1 || rc=$?
		echo "systemd-analyze verify: exit $rc"
		cat verify.out
		test ! -s verify.out
	fi
	# a cron.d line: five time fields, a user, the command
	grep -vE "^(#|$|[A-Z_]+=)" "$c/cbackup.cron" >cronlines
	test "$(wc -l <cronlines)" -ge 1
	awk "NF < 7 || \$6 != \"root\" { bad = 1 } END { exit bad }" cronlines
	grep -q "cbackup --all" cronlines
	bash -n "$c/cbackup.bash-completion"
	# the completion knows every option of --help
	(. "$c/cbackup.bash-completion"; printf "%s\n" $_cbackup_options) | sed "s/^--//" | sort -u >completed
	comm -23 options completed >not-completed
	test ! -s not-completed || { echo "not in the completion:"; cat not-completed; exit 1; }
'

test_expect_success 'bash completion completes subcommands, options, IDs and keys' '
	cat >complete.conf <<-CONF
	[storage nas]
	path = /srv
	[ct 101]
	root = /srv/101
	[ct 205]
	root = /srv/205
	CONF
	cat >drive.sh <<-"EOF"
	. "$1"
	comp() {  # WORDS...: print the completions of the last word
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
		COMPREPLY=()
		_cbackup
		printf "%s\n" "${COMPREPLY[@]}"
	}
	EOF
	cat >>drive.sh <<-EOF
	echo "== sub";  comp cbackup ve
	echo "== opt";  comp cbackup --bwl
	echo "== mode"; comp cbackup --mode s
	echo "== comp"; comp cbackup --compress z
	echo "== ids";  comp cbackup --config $SCRATCH/complete.conf 2
	echo "== stor"; comp cbackup --config $SCRATCH/complete.conf --storage n
	echo "== prun"; comp cbackup prune --prune-backups keep-w
	EOF
	bash drive.sh "$TOP/contrib/cbackup.bash-completion" >got 2>&1
	cat got
	block() { awk -v b="== $1" "\$0 == b { on = 1; next } /^== / { on = 0 } on" got; }
	test "$(block sub)" = verify
	test "$(block opt)" = --bwlimit
	test "$(block mode | tr "\n" " ")" = "suspend stop snapshot "
	test "$(block comp)" = zstd
	test "$(block ids)" = 205
	test "$(block stor)" = nas
	test "$(block prun)" = keep-weekly=
'

test_expect_success 'README.md fits on a few screens and every relative link of README, docs/, bench/, tests/ and src/ leads to a file and heading that exist' '
	test "$(wc -l <"$TOP/README.md")" -le 200
	python3 - "$TOP" <<-"PY" >links.out
	import os, re, sys
	top = sys.argv[1]
	def anchors(path):
	    out = set()
	    for line in open(path, encoding="utf-8"):
	        m = re.match(r"^#+ (.*)", line)
	        if m:
	            a = re.sub(r"[^a-z0-9 _-]", "", m.group(1).strip().lower()).replace(" ", "-")
	            out.add(a)
	    return out
	pages = ["README.md", "tests/README.md", "src/README.md", "bench/README.md"]
	pages += ["docs/" + f for f in os.listdir(os.path.join(top, "docs")) if f.endswith(".md")]
	bad = 0
	for page in pages:
	    text = open(os.path.join(top, page), encoding="utf-8").read()
	    for link in re.findall(r"\]\(([^)#:]*)(#[^)]*)?\)", text):
	        target = os.path.normpath(os.path.join(top, os.path.dirname(page), link[0] or os.path.basename(page)))
	        if not os.path.exists(target):
	            print("%s: no file %s" % (page, link[0])); bad += 1
	        elif link[1] and link[1][1:] not in anchors(target):
	            print("%s: no heading %s in %s" % (page, link[1], link[0])); bad += 1
	print("bad", bad)
	PY
	cat links.out
	test_has links.out "^bad 0$"
'

test_done
