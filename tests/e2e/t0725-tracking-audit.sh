#!/bin/bash
# The tracking audit (issue 24): after a tracked final sync and the thaw, a
# stat walk compares the running guest with the staging index. A change
# the tracker missed (ctime settled before the freeze) makes the guest's
# result a warning: WARN lines naming the entries, the JSON status and the
# mail carry it, the job exits 1, the archive is kept, and the guest's next
# run walks the whole tree in its final sync (then tracks again). The
# tracker is blinded honestly: the mutant tests/mutants/track-blind-dir.mut
# (every event of the directory "blind" dropped), built here into a copy
# of cbackup. A blind spot of today's kernel (chattr raises no fanotify
# event) is either archived right or made loud, never silent. A guest that
# keeps writing and making and removing files after the thaw gets no WARN.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
HOOK=$SCRATCH/hook.sh
MANIFEST="python3 $TOP/tests/helpers/manifest.py"
BLIND=$SCRATCH/blind-build
MUT=$TOP/tests/mutants/track-blind-dir.mut

make_guest() {
	rm -rf "$SRC"
	mkdir -p "$SRC"/{blind,seen,churn}
	for f in a b gone; do echo "$f" >"$SRC/blind/$f"; done
	echo seen >"$SRC/seen/s"
	echo flags >"$SRC/seen/flags"
}

# The changes between the passes (pre-stop hook), in "blind" and in
# "seen". The audit counts a change whose ctime is settled before the
# freeze by pass 2's racily-clean rule (20 ms): the hook then waits
# 0.2 s, so that these are, whatever the machine's speed.
cat >"$SCRATCH/changes.sh" <<EOF
set -e
cd "$SRC"
echo more >>blind/a
chmod 600 blind/b
echo new >blind/new
rm blind/gone
echo more >>seen/s
sleep 0.2
EOF

cat >"$HOOK" <<EOF
#!/bin/bash
case \$1 in
pre-stop) [ -z "\${NO_CHANGES:-}" ] && bash "\${CHANGES:-$SCRATCH/changes.sh}" ;;
pre-restart) $MANIFEST "$SRC" >"$SCRATCH/at-freeze" ;;
esac
exit 0
EOF
chmod +x "$HOOK"

# backup RC ID BINARY ARGS...: a suspend-mode backup of $SRC with the hook,
# by BINARY, exiting RC ("any": its status in $SCRATCH/rc-ID); log in
# $SCRATCH/log-ID, JSON in $SCRATCH/json-ID, the archive in dump-ID,
# restored (GNU tar) and its manifest in $SCRATCH/r-ID.manifest
backup() {
	local rc=$1 id=$2 bin=$3 got=0
	shift 3
	mkdir -p "$SCRATCH/dump-$id" "$SCRATCH/tmp"
	"$bin" backup --root "$SRC" --id 725 --tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump-$id" \
		--script "$HOOK" --output-format json "$@" >"$SCRATCH/json-$id" 2>"$SCRATCH/log-$id" ||
		got=$?
	echo "$got" >"$SCRATCH/rc-$id"
	if [ "$rc" != any ] && [ "$got" != "$rc" ]; then
		echo "cbackup exited with $got, expected $rc"
		cat "$SCRATCH/log-$id"
		return 1
	fi
	find_archive "$SCRATCH/dump-$id" ct 725 .zst >"$SCRATCH/archive-$id"
	rm -rf "$SCRATCH/r-$id"
	mkdir "$SCRATCH/r-$id"
	zstd -dc <"$(cat "$SCRATCH/archive-$id")" | tar --numeric-owner -xpf - -C "$SCRATCH/r-$id"
	$MANIFEST "$SCRATCH/r-$id" >"$SCRATCH/r-$id.manifest"
	cp "$SCRATCH/at-freeze" "$SCRATCH/at-freeze-$id"
}

# json_get ID EXPR: a field of the guest's JSON status (python expression
# on g, the guest's object, and d, the document)
json_get() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); g = d["guests"][0]
print(eval(sys.argv[2]))' "$SCRATCH/json-$1" "$2"
}

# The blinded tracker: the mutant applied to a copy of the tree, the
# release build's objects copied with it so that one file is compiled.
build_blind() {
	local file sed
	file=$(sed -n "s/^file  *//p" "$MUT")
	sed=$(sed -n "s/^sed  *//p" "$MUT")
	mkdir -p "$BLIND"
	tar -C "$TOP" --exclude=build/rel/tests -cf - Makefile src include build/rel | tar -C "$BLIND" -xf -
	sed -E -i -e "$sed" "$BLIND/$file"
	grep -q 'strcmp(rels\[i\], "blind")' "$BLIND/$file" ||
		{ echo "the mutant $MUT no longer applies: refresh it"; return 1; }
	make -C "$BLIND" --no-print-directory -s cbackup >"$SCRATCH/blind-make.log" 2>&1 ||
		{ cat "$SCRATCH/blind-make.log"; return 1; }
	test -x "$BLIND/cbackup"
}

test_expect_success ROOT 'setup: a guest, tracking available here' '
	make_guest
	NO_CHANGES=1 backup 0 0 "$CBACKUP" --freeze-cmd true --thaw-cmd true
	grep -E "pass 2: |change tracking" "$SCRATCH/log-0"
	test_has "$SCRATCH/log-0" "^INFO: pass 2: tracked"
'
if ! grep -q "^INFO: pass 2: tracked" "$SCRATCH/log-0" 2>/dev/null; then
	test_skip "the tracking audit" "change tracking (fanotify) is not available here: the audit runs only after a tracked final sync"
	test_done
fi

test_expect_success ROOT 'changes the tracker saw: archived exactly, the audit ran and found nothing' '
	make_guest
	backup 0 1 "$CBACKUP" --freeze-cmd true --thaw-cmd true
	test_has "$SCRATCH/log-1" "^INFO: pass 2: tracked"
	test_has "$SCRATCH/log-1" "^INFO: tracking audit: [0-9]+ entries checked in [0-9.]+ s, 0 missed$"
	test_lacks "$SCRATCH/log-1" "^WARN"
	test_cmp "$SCRATCH/at-freeze-1" "$SCRATCH/r-1.manifest"
	test "$(json_get 1 "g[\"status\"]")" = ok
	test "$(json_get 1 "g[\"tracking_audit\"][\"missed\"]")" = 0
	test "$(json_get 1 "g[\"tracking_audit\"][\"checked\"] > 5")" = True
'

test_expect_success ROOT 'build a cbackup whose tracker drops the events of "blind" (the mutant)' '
	build_blind
'

test_expect_success ROOT 'a blinded tracker: WARN naming the entries, status warning, exit 1, the archive kept' '
	make_guest
	backup 1 2 "$BLIND/cbackup" --freeze-cmd true --thaw-cmd true
	test_has "$SCRATCH/log-2" "^INFO: pass 2: tracked"
	# the tracker was blind: the archive lacks the changes in blind/ ...
	test_has "$SCRATCH/r-2.manifest" "^blind/gone "
	# ... but has the ones it saw
	grep "^seen/s " "$SCRATCH/at-freeze-2" >"$SCRATCH/seen-want"
	grep "^seen/s " "$SCRATCH/r-2.manifest" >"$SCRATCH/seen-got"
	test_cmp "$SCRATCH/seen-want" "$SCRATCH/seen-got"
	test_has "$SCRATCH/log-2" "^WARN: tracking audit: 5 change\(s\) made before the freeze were missed by change tracking: .*the next backup of CT 725 walks the whole tree"
	test_has "$SCRATCH/log-2" "^WARN: tracking audit: missed .blind/a. \(content\)$"
	test_has "$SCRATCH/log-2" "^WARN: tracking audit: missed .blind/b. \(mode or owner\)$"
	test_has "$SCRATCH/log-2" "^WARN: tracking audit: missed .blind/new. \(not archived\)$"
	test_has "$SCRATCH/log-2" "^WARN: tracking audit: missed .blind/gone. \(gone\)$"
	test_has "$SCRATCH/log-2" "^WARN: tracking audit: missed .blind. \(content\)$"
	test_lacks "$SCRATCH/log-2" "missed .seen"
	test_has "$SCRATCH/log-2" "^INFO: Backup job finished with warnings$"
	test -s "$(cat "$SCRATCH/archive-2")"
	test "$(json_get 2 "g[\"status\"]")" = warning
	test "$(json_get 2 "d[\"status\"]")" = warning
	test "$(json_get 2 "d[\"exit_status\"]")" = 1
	test "$(json_get 2 "g[\"archive\"] is not None")" = True
	test "$(json_get 2 "g[\"tracking_audit\"][\"missed\"]")" = 5
	test "$(json_get 2 "\",\".join(sorted(e[\"path\"] for e in g[\"tracking_audit\"][\"missed_entries\"]))")" = \
		blind,blind/a,blind/b,blind/gone,blind/new
	# the flag for the next run, in the root-only private directory
	test -f "$SCRATCH/tmp/cbackup/cbackup-725.full-sync"
	test "$(stat -c %a "$SCRATCH/tmp/cbackup")" = 700
'

test_expect_success ROOT 'the next run (blind tracker still) walks the whole tree: exact; then it tracks again' '
	NO_CHANGES=1 backup 0 3 "$BLIND/cbackup" --freeze-cmd true --thaw-cmd true
	test_has "$SCRATCH/log-3" "^INFO: the last tracking audit found changes tracking missed: this final sync walks the whole tree$"
	test_has "$SCRATCH/log-3" "^INFO: pass 2: full walk"
	test_lacks "$SCRATCH/log-3" "tracking audit: [0-9]+ entries checked"
	test_cmp "$SCRATCH/at-freeze-3" "$SCRATCH/r-3.manifest"
	test "$(json_get 3 "g[\"status\"]")" = ok
	test "$(json_get 3 "g[\"tracking_audit\"]")" = None
	test_must_fail test -e "$SCRATCH/tmp/cbackup/cbackup-725.full-sync"
	NO_CHANGES=1 backup 0 4 "$BLIND/cbackup" --freeze-cmd true --thaw-cmd true
	test_has "$SCRATCH/log-4" "^INFO: pass 2: tracked"
	test_has "$SCRATCH/log-4" "^INFO: tracking audit: [0-9]+ entries checked in [0-9.]+ s, 0 missed$"
'

test_expect_success ROOT 'the mail of a warned guest says so (mailnotification failure sends it)' '
	make_guest
	mkdir -p "$SCRATCH/bin" "$SCRATCH/mail"
	cat >"$SCRATCH/bin/sendmail" <<-EOF
	#!/bin/sh
	cat >"$SCRATCH/mail/msg"
	EOF
	chmod +x "$SCRATCH/bin/sendmail"
	backup 1 5 "$BLIND/cbackup" --freeze-cmd true --thaw-cmd true \
		--mailto root@example.com --mailnotification failure --sendmail "$SCRATCH/bin/sendmail"
	test_has "$SCRATCH/mail/msg" "^Subject: cbackup backup status \(.*\): backup with warnings$"
	test_has "$SCRATCH/mail/msg" "^725 .* warning "
	test_has "$SCRATCH/mail/msg" "^725: ([0-9-]+ [0-9:]+ )?WARN: tracking audit: missed .blind/a. \(content\)$"
	rm -f "$SCRATCH/tmp/cbackup/cbackup-725.full-sync"
'

test_expect_success ROOT 'tracking-audit 0: no audit, a blind tracker stays silent (what the audit is for)' '
	make_guest
	backup 0 6 "$BLIND/cbackup" --freeze-cmd true --thaw-cmd true --tracking-audit 0
	test_has "$SCRATCH/log-6" "^INFO: pass 2: tracked"
	test_lacks "$SCRATCH/log-6" "tracking audit"
	test "$(json_get 6 "g[\"tracking_audit\"]")" = None
	test_must_fail test -e "$SCRATCH/tmp/cbackup/cbackup-725.full-sync"
'

test_expect_success ROOT 'a kernel blind spot (chattr raises no event): archived right, or the audit warns' '
	make_guest
	cat >"$SCRATCH/chattr.sh" <<-EOF
	chattr +d "$SRC/seen/flags"
	sleep 0.2
	EOF
	CHANGES=$SCRATCH/chattr.sh backup any 7 "$CBACKUP" --freeze-cmd true --thaw-cmd true
	grep -E "pass 2|tracking audit" "$SCRATCH/log-7"
	if [ "$(cat "$SCRATCH/rc-7")" = 1 ]; then
		# the tracker missed it: loud, named, the next run walks
		test_has "$SCRATCH/log-7" "^WARN: tracking audit: missed .seen/flags. \(attributes\)$"
		test "$(json_get 7 "g[\"status\"]")" = warning
		test -f "$SCRATCH/tmp/cbackup/cbackup-725.full-sync"
		rm "$SCRATCH/tmp/cbackup/cbackup-725.full-sync"
	else
		# the tracker saw it: the archive has the flag (SCHILY.fflags)
		test "$(cat "$SCRATCH/rc-7")" = 0
		python3 - "$(cat "$SCRATCH/archive-7")" <<-"EOF"
		import subprocess, sys, tarfile, io
		raw = subprocess.run(["zstd", "-dc", sys.argv[1]], capture_output=True, check=True).stdout
		with tarfile.open(fileobj=io.BytesIO(raw)) as t:
		    m = t.getmember("./seen/flags")
		    assert "nodump" in m.pax_headers.get("SCHILY.fflags", ""), m.pax_headers
		EOF
		test_lacks "$SCRATCH/log-7" "^WARN"
	fi
'

# A stat racing a change is not atomic with it: the kernel sets a
# truncated file's size before its times, so the audit can see a new size
# with the old mtime and ctime (t0455's churning guest did, one run in
# three under load). The shim tears the audit's stat of seen/s that way
# once (the third stat of it: two in pass 1, none in pass 2 with nothing
# changed, then the audit's); the second look finds it as archived.
test_expect_success ROOT 'a stat torn by a change in flight is looked at again, not counted as missed' '
	make_guest
	# after=2: the estimate walk, the first sync, then the audit; a kept
	# copy (keep-staging) would leave out the estimate walk
	NO_CHANGES=1 with_fault "stat:TORN:/src/seen/s:after=2" backup 0 9 "$CBACKUP" \
		--freeze-cmd true --thaw-cmd true --keep-staging 0
	fault_fired "^stat TORN .*/src/seen/s$"
	test_has "$SCRATCH/log-9" "^INFO: tracking audit: [0-9]+ entries checked in [0-9.]+ s, 0 missed$"
	test_has "$SCRATCH/log-9" "^INFO: tracking audit: 1 entries looked changed before the freeze but were being changed by the running guest"
	test_lacks "$SCRATCH/log-9" "^WARN"
	test_cmp "$SCRATCH/at-freeze-9" "$SCRATCH/r-9.manifest"
	test "$(json_get 9 "g[\"tracking_audit\"][\"missed\"]")" = 0
'


test_expect_success ROOT,CGROUP2 'a guest that writes, makes and removes files after the thaw: no WARN' '
	make_guest
	cg=$(make_cgroup v2)
	cat >"$SCRATCH/churn.sh" <<-EOF
	i=0
	while :; do
		i=\$((i + 1))
		echo "\$i" >"$SRC/churn/f\$((i % 50))"
		rm -f "$SRC/churn/g\$((i % 7))"
		: >"$SRC/churn/g\$((i % 5))"
		mkdir -p "$SRC/churn/d\$((i % 3))"
		rmdir "$SRC/churn/d\$(((i + 1) % 3))" 2>/dev/null || :
		chmod "6\$((i % 5))4" "$SRC/churn/f1" 2>/dev/null || :
	done
	EOF
	start_writer "$cg" "$SRC/seen/log" "$SCRATCH/side"
	start_guest "$cg" bash "$SCRATCH/churn.sh"
	before=$(side_counter "$SCRATCH/side")
	NO_CHANGES=1 backup 0 8 "$CBACKUP" --freeze-cgroup "$cg"
	test_has "$SCRATCH/log-8" "^INFO: pass 2: tracked"
	test_has "$SCRATCH/log-8" "^INFO: tracking audit: [0-9]+ entries checked in [0-9.]+ s, 0 missed$"
	test_lacks "$SCRATCH/log-8" "^WARN"
	counter_advances "$SCRATCH/side"
	test "$(side_counter "$SCRATCH/side")" -gt "$before"
'

test_done
