#!/bin/sh
# make demo: a sample container tree with a live writer process in its own
# cgroup, backed up in suspend mode to ./demo/dump, restored, compared, and
# the backup log shown. Everything lives under ./demo (removed first).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
demo="$top/demo"
cb="$top/cbackup"
cg=""
writer=""

cleanup() {
	[ -n "$writer" ] && kill "$writer" 2>/dev/null || true
	if [ -n "$cg" ] && [ -d "$cg" ]; then
		[ -e "$cg/cgroup.freeze" ] && echo 0 >"$cg/cgroup.freeze" 2>/dev/null || true
		[ -e "$cg/freezer.state" ] && echo THAWED >"$cg/freezer.state" 2>/dev/null || true
		sleep 0.2; rmdir "$cg" 2>/dev/null || true
	fi
}
trap cleanup EXIT INT TERM

rm -rf "$demo"
mkdir -p "$demo/rootfs" "$demo/tmp" "$demo/dump" "$demo/restore"
root="$demo/rootfs"

echo "== building a sample container tree in $root"
mkdir -p "$root/etc" "$root/usr/bin" "$root/var/log" "$root/var/lib/app" "$root/tmp" "$root/home/user"
cp -a /etc/os-release /etc/services "$root/etc/"
for b in ls cat sh tar; do cp -L "$(command -v $b)" "$root/usr/bin/"; done
ln -s usr/bin "$root/bin"
ln "$root/usr/bin/cat" "$root/usr/bin/cat.hardlink"
seq 1 200000 >"$root/var/lib/app/data.txt"
head -c 4M /dev/urandom >"$root/var/lib/app/random.bin"
truncate -s 64M "$root/var/lib/app/sparse.img"
printf 'data in the middle of a hole\n' | dd of="$root/var/lib/app/sparse.img" bs=1 seek=33554432 conv=notrunc 2>/dev/null
mkfifo "$root/var/lib/app/fifo"
echo "scratch" >"$root/tmp/scratch-file"
chmod 1777 "$root/tmp"
chown -R 1000:1000 "$root/home/user" 2>/dev/null || true
setfattr -n user.demo -v hello "$root/etc/os-release" 2>/dev/null || true
setfacl -m u:1000:r "$root/etc/services" 2>/dev/null || true
printf 'arch: amd64\nhostname: demo101\nrootfs: %s\n' "$root" >"$demo/101.conf"

echo "== starting a live writer process (appends a numbered line every 2 ms)"
( i=0; while :; do i=$((i+1)); echo "line $i" >>"$root/var/log/app.log"; sleep 0.002; done ) &
writer=$!
freeze="--freeze-pid $writer"
if [ "$(id -u)" = 0 ]; then
	cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
	cg1=$(awk '$3 == "cgroup" && $4 ~ /freezer/ { print $2; exit }' /proc/self/mounts)
	if [ -n "$cg2" ] && mkdir "$cg2/cbackup-demo-$$" 2>/dev/null && [ -e "$cg2/cbackup-demo-$$/cgroup.freeze" ]; then
		cg="$cg2/cbackup-demo-$$"
	elif [ -n "$cg1" ] && mkdir "$cg1/cbackup-demo-$$" 2>/dev/null; then
		cg="$cg1/cbackup-demo-$$"
	fi
	if [ -n "$cg" ] && echo "$writer" >"$cg/cgroup.procs" 2>/dev/null; then
		freeze="--freeze-cgroup $cg"
	fi
fi
sleep 1

echo "== backing up (suspend mode, zstd): ./cbackup backup --root $root --id 101 ... $freeze"
"$cb" backup --root "$root" --id 101 --guest-config "$demo/101.conf" \
	--tmpdir "$demo/tmp" --dumpdir "$demo/dump" --mode suspend --compress zstd $freeze
archive=$(ls "$demo"/dump/cbackup-ct-101-*.tar.zst)

kill "$writer"; wait "$writer" 2>/dev/null || true; writer=""
echo "== restoring into $demo/restore"
"$cb" restore "$archive" "$demo/restore"

echo "== comparing source and restored tree (the live log: the archived copy must be a prefix)"
# tmp/scratch-file is left out on purpose (stdexcludes: /tmp/?*); etc/cbackup
# holds the stored guest config.
diff -r --no-dereference -x app.log -x cbackup -x fifo -x scratch-file "$root" "$demo/restore"
test ! -e "$demo/restore/tmp/scratch-file"
test -p "$demo/restore/var/lib/app/fifo"
[ "$(stat -c %b "$demo/restore/var/lib/app/sparse.img")" -lt 1024 ]
cmp -s "$demo/101.conf" "$demo/restore/etc/cbackup/guest.conf"
n=$(wc -l <"$demo/restore/var/log/app.log")
head -n "$n" "$root/var/log/app.log" | cmp -s - "$demo/restore/var/log/app.log"
echo "identical (app.log: $n lines archived, a consistent prefix of the live file)"
echo "== the backup log ($(ls "$demo"/dump/*.log))"
cat "$demo"/dump/*.log
echo "== GNU tar lists the archive too:"
zstd -dc "$archive" | tar -tvf - | head -n 8
