# bench/guest.sh (sourced): the benchmarks' guest, a copy of the Debian root
# at $DISTROOT plus a 24 MiB database, into $SRC (make_guest), and one
# night's seeded change of ~1 % (change NIGHT); see bench/nights.sh's first
# comment for what a night changes. Used by nights.sh and s3-nights.sh.

make_guest() {
	rm -rf "$SRC"
	cp -a "$DISTROOT" "$SRC"
	rm -f "$SRC/.ready"
	mkdir -p "$SRC/var/lib/benchdb" "$SRC/var/cache/bench"
	python3 - "$SRC" <<'PY'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(27)
# a database: 4 KiB pages, half random, half text-like (compresses ~2:1)
with open(os.path.join(root, "var/lib/benchdb/db"), "wb") as f:
    for p in range(6144):
        f.write(rnd.randbytes(2048) + (b"row %08d " % p) * 146 + b"\0" * 4)
for i in range(4):
    with open(os.path.join(root, "var/log/bench%d.log" % i), "w") as f:
        for n in range(20000):
            f.write("Dec  1 00:00:%02d host daemon%d[%d]: event %d done\n" % (n % 60, i, n, n))
PY
}

# change NIGHT: the night's changes (seeded by NIGHT)
change() {
	python3 - "$SRC" "$1" <<'PY'
import os, random, shutil, sys
root, night = sys.argv[1], int(sys.argv[2])
rnd = random.Random(night * 1000 + 27)
for i in range(4):                                   # ~200 KB of log lines
    with open(os.path.join(root, "var/log/bench%d.log" % i), "a") as f:
        for n in range(1000):
            f.write("Dec %2d 01:%02d:%02d host daemon%d[%d]: night event %d\n"
                    % (night, n // 60 % 60, n % 60, i, rnd.randrange(99999), n))
status = os.path.join(root, "var/lib/dpkg/status")   # tmp + rename
with open(status) as f:
    text = f.read()
text = text.split("\nPackage: bench-night\n")[0].rstrip("\n") + "\n"
text += "\nPackage: bench-night\nStatus: install ok installed\nVersion: %d\n" % night
with open(status + "-new", "w") as f:
    f.write(text)
os.rename(status + "-new", status)
fd = os.open(os.path.join(root, "var/lib/benchdb/db"), os.O_WRONLY)
for p in rnd.sample(range(6144), 1536):              # pages in place
    os.pwrite(fd, rnd.randbytes(2048) + (b"row %08d " % (p + night)) * 146 + b"\0" * 4, p * 4096)
os.close(fd)
cache = os.path.join(root, "var/cache/bench")        # 300 new, 300 gone
for d in os.listdir(cache):
    shutil.rmtree(os.path.join(cache, d))
os.mkdir(os.path.join(cache, "n%d" % night))
for i in range(300):
    with open(os.path.join(cache, "n%d" % night, "f%d" % i), "w") as f:
        f.write(("night %d file %d %x\n" % (night, i, rnd.getrandbits(64))) * rnd.randrange(5, 60))
# one package reinstalled: its files, same bytes and mtime, new inodes
lists = sorted(x for x in os.listdir(os.path.join(root, "var/lib/dpkg/info")) if x.endswith(".list"))
pkg = lists[rnd.randrange(len(lists))]
n = 0
for line in open(os.path.join(root, "var/lib/dpkg/info", pkg)):
    p = os.path.join(root, line.strip().lstrip("/"))
    if os.path.islink(p) or not os.path.isfile(p):
        continue
    shutil.copy2(p, p + ".dpkg-new")
    st = os.stat(p)
    os.chown(p + ".dpkg-new", st.st_uid, st.st_gid)
    os.rename(p + ".dpkg-new", p)
    n += 1
print("night %d: reinstalled %s (%d files)" % (night, pkg[:-5], n))
PY
}

