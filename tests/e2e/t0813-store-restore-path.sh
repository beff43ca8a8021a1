#!/bin/bash
# restore --path from a unit store's night (STORAGE:NAME) fetches the
# catalog and only the units that hold the chosen members (and a chosen
# hardlink's target), not the whole night: the other units may be gone
# and the file still comes back byte for byte; a member whose own unit
# is gone fails naming that unit (issue 41: one small file back from S3
# at a fraction of a whole night).
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
STORE=$SCRATCH/store
CONF=$SCRATCH/cbackup.conf

# big FILE TAG: ~6 MiB of distinct text lines (6 units of 1 MiB and more)
big() {
	python3 -c 'import random, sys
r = random.Random(sys.argv[2])
with open(sys.argv[1], "w") as f:
    for i in range(180000):
        f.write("%s line %d %016x\n" % (sys.argv[2], i, r.getrandbits(64)))' "$1" "$2"
}

test_expect_success ROOT 'restore --path fetches only the units of the chosen members and their hardlink targets' '
	mkdir -p "$SRC/a" "$SRC/b" "$SRC/c" "$SRC/d" "$STORE" "$SCRATCH/tmp"
	big "$SRC/a/big" BIGA
	printf "the small file\n" >"$SRC/b/small.txt"
	big "$SRC/c/big" BIGC
	ln "$SRC/b/small.txt" "$SRC/d/link"
	printf "tmpdir = %s\narchive-name = cbackup\n[storage offsite]\npath = %s\nlayout = store\n" \
		"$SCRATCH/tmp" "$STORE" >"$CONF"
	cbackup_run 0 backup --config "$CONF" --storage offsite --root "$SRC" --id 101 --type ct \
		--unit-size 1
	n=$(ls -1 "$STORE/nights/")
	# every unit that holds nothing of small.txt (its header, its data,
	# the link to it) goes, but the first and the last (the codec is
	# known by the first bytes; the last member is read to the end)
	gone=0
	for h in $(grep "^unit " "$STORE/nights/$n" | sed "1d;\$d" | cut -d" " -f2); do
		f=$STORE/units/${h:0:2}/$h
		if ! zstd -dc "$f" | grep -aq "small"; then
			rm "$f"
			gone=$((gone + 1))
		fi
	done
	test "$gone" -ge 8
	cbackup_run 0 restore --config "$CONF" "offsite:$n" "$SCRATCH/r1" --path ./b/small.txt
	cmp "$SRC/b/small.txt" "$SCRATCH/r1/b/small.txt"
	# a hardlink after the gone units, its target before them
	cbackup_run 0 restore --config "$CONF" "offsite:$n" "$SCRATCH/r2" --path ./d/link
	cmp "$SRC/b/small.txt" "$SCRATCH/r2/d/link"
	cbackup_run 1 restore --config "$CONF" "offsite:$n" "$SCRATCH/r3" --path ./c/big
	test_has "$CB_ERR" "ERROR: restore of .offsite:$n. failed - storage .offsite.: unit .units/../[0-9a-f]{64}. is missing"
	test ! -e "$SCRATCH/r3/c/big"
	cbackup_run 1 restore --config "$CONF" "offsite:$n" "$SCRATCH/r4"
	test_has "$CB_ERR" "unit .units/../[0-9a-f]{64}. is missing"
	test_lacks <(ls -A "$SCRATCH/tmp/cbackup") "cbackup-ct-101-"
'

test_done
