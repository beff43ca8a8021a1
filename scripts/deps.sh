#!/bin/sh
# Install every Debian package cbackup needs to build and test.
# Idempotent and quiet when everything is already there.
# libisal-dev (Intel ISA-L) is there for one function, its CRC-32: lzop
# blocks and gzip members checksum every byte, stored ones too, and zlib's
# CRC-32 (5.8 GB/s here) was 14% of a gzip backup's CPU; ISA-L's runs at
# 14 GB/s (its PCLMULQDQ variant) on the same machine, with the same values.
# libfuse3-dev and fuse3 (fusermount3): `cbackup mount`, a read-only FUSE view of
# an archive.
# btrfs-progs and xfsprogs are for the tests only: they make the btrfs and
# xfs (reflink=1) file systems on loop devices that snapshot mode and reflink
# staging are tested on (cbackup itself talks to btrfs through ioctls).
# lxc and busybox-static are for the tests only: t0284 finds, freezes, stops
# and restarts a real busybox container (lxc-create -t busybox) under its
# own lxc path (cbackup reads LXC's configuration files, it runs no lxc tool
# but lxc-stop/lxc-start in mode stop, and lxc-info -p to find a running
# container's init when its rootfs is a disk image). t0291 makes ext4 images
# with mkfs.ext4 -d (e2fsprogs) and runs a guest with unshare (util-linux).
# lvm2 is not installed: no test makes a volume group (one would be seen by
# every LVM command on the host, and the test VMs' kernel has no
# device-mapper); /dev/VG/LV names are unit-tested, a block-device root is
# tested with a loop device.
# libcurl4-openssl-dev: the S3 client's transport (cbackup signs its
# requests itself, src/sink/s3_sign.c). ceph-mon, ceph-osd, ceph-mgr,
# radosgw, ceph-common and uuid-runtime are for the tests only: a throwaway
# one-node Ceph with a RADOS Gateway on 127.0.0.1 (scripts/rgw.sh) is the
# object store the S3 tests run against.
# python3-cryptography: contrib/cbackup-decrypt.py, the reference decrypter
# of encrypted archives that t0901 runs (cbackup itself uses libcrypto).
set -e
PKGS="build-essential pkg-config libarchive-dev libzstd-dev liblzo2-dev zlib1g-dev
      libiniparser-dev libssl-dev libcmocka-dev libisal-dev libfuse3-dev fuse3
      tar gzip zstd lzop pigz libarchive-tools acl attr rsync e2fsprogs util-linux procps
      qemu-utils qemu-system-x86 groff-base python3 btrfs-progs xfsprogs libnbd-dev
      lxc busybox-static libcurl4-openssl-dev python3-cryptography
      ceph-mon ceph-osd ceph-mgr radosgw ceph-common uuid-runtime"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing:$missing"
if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
