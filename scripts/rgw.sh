#!/bin/bash
# scripts/rgw.sh start DIR | stop DIR | env DIR
#
# A throwaway one-node Ceph with a RADOS Gateway on 127.0.0.1, for the
# object-storage tests and benchmarks: one monitor, one manager, one OSD on
# a sparse bluestore file, one radosgw, every daemon started here with its
# own pid file under DIR (no systemd, nothing of the host's Ceph touched),
# and one S3 user. `start` prints the S3 settings as shell assignments and
# writes them to DIR/env (CB_S3_ENDPOINT, AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY); `stop` ends the daemons and removes DIR. A
# start that fails ends the daemons it started and keeps DIR (the logs).
# Exit 0 when the gateway answers; 1 when it cannot start (the reason on
# stderr, the logs in DIR/log); 2 on a usage error.
# Needs the Debian packages ceph-mon ceph-osd ceph-mgr radosgw ceph-common
# and uuid-runtime (scripts/deps.sh installs them).
set -u

usage() { echo "usage: $0 start|stop|env DIR" >&2; exit 2; }
[ $# = 2 ] || usage
cmd=$1 dir=$2

die() { echo "rgw.sh: $*" >&2; exit 1; }

# a TCP port nothing listens on (and the one after it, for the monitor)
free_port() {
	python3 - "$@" <<-'PY'
	import random, socket, sys
	for _ in range(200):
	    p = random.randrange(20000, 60000, 2)
	    ok = True
	    for q in (p, p + 1):
	        s = socket.socket()
	        try:
	            s.bind(("127.0.0.1", q))
	        except OSError:
	            ok = False
	        finally:
	            s.close()
	    if ok:
	        print(p)
	        sys.exit(0)
	sys.exit(1)
	PY
}

daemon_pids() {
	local f
	for f in "$dir"/run/*.pid; do
		[ -s "$f" ] && cat "$f"
	done
	return 0
}

stop_daemons() {
	local p i alive
	for p in $(daemon_pids); do kill -TERM "$p" 2>/dev/null; done
	for i in $(seq 100); do
		alive=0
		for p in $(daemon_pids); do kill -0 "$p" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	for p in $(daemon_pids); do kill -KILL "$p" 2>/dev/null; done
	return 0
}

stop() {
	[ -d "$dir" ] || return 0
	stop_daemons
	rm -rf "$dir"
}

write_conf() {
	cat >"$dir/ceph.conf" <<-EOF
	[global]
	fsid = $fsid
	mon host = [v2:127.0.0.1:$mon_port,v1:127.0.0.1:$((mon_port + 1))]
	public addr = 127.0.0.1
	cluster addr = 127.0.0.1
	ms bind ipv6 = false
	auth cluster required = cephx
	auth service required = cephx
	auth client required = cephx
	run dir = $dir/run
	admin socket = $dir/run/\$name.asok
	pid file = $dir/run/\$name.pid
	log file = $dir/log/\$name.log
	crash dir = $dir/crash
	osd pool default size = 1
	osd pool default min size = 1
	mon allow pool size one = true
	mon allow pool delete = true
	osd crush chooseleaf type = 0
	osd pool default pg num = 8
	osd pool default pgp num = 8
	osd pool default pg autoscale mode = off
	mon max pg per osd = 1000
	mon warn on pool no redundancy = false
	osd memory target = 1073741824
	mon data = $dir/mon/\$cluster-\$id
	mgr data = $dir/mgr/\$cluster-\$id
	osd data = $dir/osd/\$cluster-\$id

	[client.admin]
	keyring = $dir/keyring

	[osd]
	osd objectstore = bluestore
	bluestore block create = true
	bluestore block size = 21474836480

	[client.rgw.cb]
	rgw frontends = beast endpoint=127.0.0.1:$rgw_port
	rgw data = $dir/rgw
	keyring = $dir/rgw.keyring
	EOF
}

ceph_() { ceph -c "$dir/ceph.conf" --connect-timeout 20 "$@"; }

start() {
	local uuid secret key_id key i
	for t in ceph-mon ceph-osd ceph-mgr radosgw radosgw-admin ceph ceph-authtool monmaptool uuidgen; do
		command -v "$t" >/dev/null || die "$t is missing (make deps installs Ceph)"
	done
	[ -e "$dir" ] && die "'$dir' exists: give a new directory"
	mkdir -p -m 700 "$dir" || die "cannot create '$dir'"
	mkdir -p "$dir"/{run,log,crash,rgw,mon/ceph-a,mgr/ceph-x,osd/ceph-0}
	fsid=$(uuidgen)
	mon_port=$(free_port) || die "no free port for the monitor"
	rgw_port=$(free_port) || die "no free port for the gateway"
	write_conf
	ceph-authtool --create-keyring "$dir/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null &&
	ceph-authtool --create-keyring "$dir/keyring" --gen-key -n client.admin \
		--cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null &&
	ceph-authtool "$dir/mon.keyring" --import-keyring "$dir/keyring" >/dev/null &&
	monmaptool --create --addv a "[v2:127.0.0.1:$mon_port,v1:127.0.0.1:$((mon_port + 1))]" \
		--fsid "$fsid" "$dir/monmap" >/dev/null &&
	ceph-mon -c "$dir/ceph.conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/mon.keyring" &&
	ceph-mon -c "$dir/ceph.conf" -i a || die "the monitor did not start (logs in $dir/log)"
	ceph_ auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
		-o "$dir/mgr/ceph-x/keyring" >/dev/null &&
	ceph-mgr -c "$dir/ceph.conf" -i x || die "the manager did not start (logs in $dir/log)"
	uuid=$(uuidgen)
	secret=$(ceph-authtool --gen-print-key)
	echo "{\"cephx_secret\": \"$secret\"}" >"$dir/osd.json"
	ceph_ osd new "$uuid" 0 -i "$dir/osd.json" >/dev/null &&
	ceph-authtool --create-keyring "$dir/osd/ceph-0/keyring" --name osd.0 --add-key "$secret" >/dev/null &&
	ceph-osd -c "$dir/ceph.conf" -i 0 --mkfs --osd-uuid "$uuid" >"$dir/log/osd-mkfs.out" 2>&1 &&
	ceph-osd -c "$dir/ceph.conf" -i 0 >/dev/null 2>&1 || die "the OSD did not start (logs in $dir/log)"
	ceph_ auth get-or-create client.rgw.cb mon 'allow rw' osd 'allow rwx' -o "$dir/rgw.keyring" >/dev/null &&
	radosgw -c "$dir/ceph.conf" -n client.rgw.cb || die "radosgw did not start (logs in $dir/log)"
	# ready: our radosgw alive AND its port answering (another listener
	# on the port would not be ours: radosgw then fails to bind and exits)
	for i in $(seq 600); do
		p=$(cat "$dir/run/client.rgw.cb.pid" 2>/dev/null)
		[ -n "$p" ] && ! kill -0 "$p" 2>/dev/null && die "radosgw exited (logs in $dir/log)"
		[ -n "$p" ] && curl -s -o /dev/null "http://127.0.0.1:$rgw_port/" && break
		sleep 0.1
	done
	[ "$i" = 600 ] && die "radosgw does not answer on 127.0.0.1:$rgw_port after 60 s"
	key_id=CB$(head -c 9 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F)
	key=$(head -c 30 /dev/urandom | base64 | tr -d '/+=\n' | head -c 40)
	radosgw-admin -c "$dir/ceph.conf" -n client.admin user create --uid=cbtest --display-name=cbtest \
		--access-key="$key_id" --secret="$key" >/dev/null 2>"$dir/log/user.err" ||
		die "cannot create the S3 user (see $dir/log/user.err)"
	cat >"$dir/env" <<-EOF
	CB_S3_ENDPOINT=http://127.0.0.1:$rgw_port
	AWS_ACCESS_KEY_ID=$key_id
	AWS_SECRET_ACCESS_KEY=$key
	EOF
	chmod 600 "$dir/env"
	cat "$dir/env"
}

case $cmd in
# a failed start ends what it started and keeps DIR (its logs) to read
start) ( start ) || { [ -d "$dir/run" ] && stop_daemons; exit 1; } ;;
stop)  stop ;;
env)   cat "$dir/env" ;;
*)     usage ;;
esac
