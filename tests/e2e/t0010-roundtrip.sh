#!/bin/bash
# Round trip: a tree with every file type -> cbackup backup with each codec
# -> restored by cbackup restore, by GNU tar + the stock decompressor and by
# bsdtar -> identical to the source. Also the guest config from [ct ID].
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src

test_expect_success ROOT 'setup: a tree with every file type' '
	make_full_tree "$SRC"
	mkdir "$SCRATCH/tmp"
'

codec_ext()  { case $1 in zstd) echo .zst ;; lzo) echo .lzo ;; gzip) echo .gz ;; 0) echo ;; esac; }
codec_cat()  { case $1 in zstd) echo "zstd -dc" ;; lzo) echo "lzop -dc" ;; gzip) echo "gzip -dc" ;; 0) echo cat ;; esac; }

for codec in zstd lzo gzip 0; do
	ext=$(codec_ext $codec)
	dec=$(codec_cat $codec)
	dump=$SCRATCH/dump-$codec

	test_expect_success ROOT "backup --compress $codec" '
		mkdir "$dump"
		cbackup_run 0 backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
			--dumpdir "$dump" --compress $codec --mode suspend --keep-staging 0
		archive=$(find_archive "$dump" ct 101 "$ext")
		$dec <"$archive" >/dev/null
		log=${archive%.tar$ext}.log
		test -s "$log"
		grep "INFO: starting first sync" "$log"
		grep "INFO: first sync finished" "$log"
		grep "INFO: Backup job finished successfully" "$CB_ERR"
		no_tmp_files "$dump"
		test -z "$(ls -A "$SCRATCH/tmp")" || { echo "staging left in tmpdir:"; ls -la "$SCRATCH/tmp"; false; }
	'

	test_expect_success ROOT "$codec: .sha256 beside the archive checks out" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		cd "$dump"
		sha256sum -c "${archive%.tar$ext}.sha256" || sha256sum -c "$archive.sha256"
	'

	test_expect_success ROOT "$codec: the archive has no socket, all else" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		$dec <"$archive" | tar -tvf - >"$SCRATCH/list-$codec"
		test_must_fail grep -E " \./socket$" "$SCRATCH/list-$codec"
		grep -E " \./sparse\.img$" "$SCRATCH/list-$codec"
		grep -E " \./fifo$" "$SCRATCH/list-$codec"
	'

	test_expect_success ROOT "$codec: cbackup restore gives the identical tree" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		cbackup_run 0 restore "$archive" "$SCRATCH/r-cb-$codec"
		compare_trees "$SRC" "$SCRATCH/r-cb-$codec"
	'

	test_expect_success ROOT "$codec: GNU tar + $dec restore the identical tree" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		mkdir "$SCRATCH/r-gnu-$codec"
		$dec <"$archive" | tar --xattrs --xattrs-include="*" --acls --numeric-owner \
			-xpf - -C "$SCRATCH/r-gnu-$codec"
		compare_trees "$SRC" "$SCRATCH/r-gnu-$codec"
	'

	test_expect_success ROOT,BSDTAR "$codec: bsdtar restores the identical tree" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		mkdir "$SCRATCH/r-bsd-$codec"
		if [ $codec = lzo ]; then
			$dec <"$archive" | bsdtar --numeric-owner -xpf - -C "$SCRATCH/r-bsd-$codec"
		else
			bsdtar --numeric-owner -xpf "$archive" -C "$SCRATCH/r-bsd-$codec"
		fi
		# bsdtar leaves the extraction directory itself alone
		compare_trees --no-root-mtime "$SRC" "$SCRATCH/r-bsd-$codec"
	'
	# the restored copies are large (sparse files restored dense would be
	# 64 MiB each): drop them as we go
	rm -rf "$SCRATCH"/r-*-$codec
done

test_expect_success ROOT 'cbackup ID --config: guest.conf at ./etc/cbackup/guest.conf' '
	mkdir "$SCRATCH/dump-conf"
	printf "lxc.uts.name = ct102\nlxc.arch = amd64\n" >"$SCRATCH/guest.conf"
	cat >"$SCRATCH/cbackup.conf" <<-CONF
	tmpdir = $SCRATCH/tmp
	dumpdir = $SCRATCH/dump-conf
	compress = zstd
	mode = suspend

	[ct 102]
	root = $SRC
	config = $SCRATCH/guest.conf
	CONF
	cbackup_run 0 102 --config "$SCRATCH/cbackup.conf"
	archive=$(find_archive "$SCRATCH/dump-conf" ct 102 .zst)
	zstd -dc <"$archive" | tar -tf - >"$SCRATCH/list-conf"
	grep -E "^(\./)?etc/cbackup/guest\.conf$" "$SCRATCH/list-conf"
	zstd -dc <"$archive" | tar -xOf - --wildcards "*etc/cbackup/guest.conf" >"$SCRATCH/got.conf"
	cmp "$SCRATCH/guest.conf" "$SCRATCH/got.conf"
	grep -E "^(\./)?regular\.txt$" "$SCRATCH/list-conf"
'

test_done
