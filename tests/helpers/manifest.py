#!/usr/bin/env python3
"""manifest.py [--ignore FIELD,...] [--skip-root] [--descend N] DIR: one line per entry
of the tree under DIR (sorted by path, sockets left out), with what
`rsync -naHAXc` cannot see:

  path type mode uid:gid size target rdev group alloc mtime_ns xattrs acls fflags

- path: bytes, non-printables escaped (\\ooo), relative to DIR
- group: the first path (sorted) sharing the inode, for every type ("-" alone)
- alloc: "sparse" when fewer blocks are allocated than the size needs,
  "dense" otherwise, "-" for non-regular files
- xattrs: name=hexvalue (names as raw bytes, escaped), POSIX ACLs apart
- acls: system.posix_acl_access/default decoded as tag:perm:id entries
- fflags: immutable/append/nodump/noatime... (chattr flags)

Fields listed in --ignore print as "*" (e.g. mtime of directories a test
cannot control: --ignore dir-mtime).
"""
import fcntl
import hashlib
import os
import stat
import struct
import sys

FS_IOC_GETFLAGS = 0x80086601
# chattr flags worth keeping (a: append, i: immutable, d: nodump, A: noatime,
# s/u/S/c/D...): the file-system bookkeeping bits (extents, inline data,
# huge file) are left out
FLAG_NAMES = [(0x10, "i"), (0x20, "a"), (0x40, "d"), (0x80, "A"), (0x8, "S"),
              (0x1, "s"), (0x2, "u"), (0x4, "c"), (0x10000, "D"), (0x4000, "j"),
              (0x8000, "t"), (0x800000, "C"), (0x20000000, "P")]
ACL_TAGS = {1: "user_obj", 2: "user", 4: "group_obj", 8: "group", 0x10: "mask", 0x20: "other"}


def esc(b):
    out = []
    for c in b:
        if c == 0x5C:
            out.append("\\\\")
        elif 0x20 < c < 0x7F and c != 0x3D:
            out.append(chr(c))
        else:
            out.append("\\%03o" % c)
    return "".join(out)


def ftype(m):
    for test, name in ((stat.S_ISREG, "f"), (stat.S_ISDIR, "d"), (stat.S_ISLNK, "l"),
                       (stat.S_ISCHR, "c"), (stat.S_ISBLK, "b"), (stat.S_ISFIFO, "p")):
        if test(m):
            return name
    return "s"


def acl_decode(v):
    if len(v) < 4 or (len(v) - 4) % 8:
        return "bad-acl:" + v.hex()
    ents = []
    for off in range(4, len(v), 8):
        tag, perm, uid = struct.unpack_from("<HHI", v, off)
        name = ACL_TAGS.get(tag, str(tag))
        ents.append("%s:%o:%s" % (name, perm, uid if tag in (2, 8) else ""))
    return ",".join(ents)


def xattrs(dfd, name):
    # through the open directory: paths longer than PATH_MAX work too
    path = "/proc/self/fd/%d/%s" % (dfd, os.fsdecode(name)) if name else "/proc/self/fd/%d" % dfd
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return "-", "-"
    plain, acls = [], []
    for n in sorted(names, key=os.fsencode):
        try:
            v = os.getxattr(path, n, follow_symlinks=False)
        except OSError as e:
            v = ("error-%d" % e.errno).encode()
        if n.startswith("system.posix_acl_"):
            acls.append("%s=%s" % (n[len("system.posix_acl_"):], acl_decode(v)))
        else:
            val = v.hex() if len(v) <= 32 else "sha256:%s:%d" % (
                hashlib.sha256(v).hexdigest()[:16], len(v))
            plain.append("%s=%s" % (esc(os.fsencode(n)), val))
    return ";".join(plain) or "-", ";".join(acls) or "-"


def fflags(dfd, name, st):
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return "-"
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW
    try:
        fd = os.open(name or ".", flags | os.O_NOATIME, dir_fd=dfd)
    except OSError:
        fd = os.open(name or ".", flags, dir_fd=dfd)
    try:
        buf = fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 8)
        flags = struct.unpack("<i", buf[:4])[0]
    except OSError:
        return "-"
    finally:
        os.close(fd)
    return "".join(c for bit, c in FLAG_NAMES if flags & bit) or "-"


def alloc(st):
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
        return "-"
    need = st.st_size // 4096 * 4096
    return "dense" if st.st_blocks * 512 >= need else "sparse"


def describe(dfd, name, rel, groups, ignore):
    """One line for the entry name below the open directory dfd."""
    st = os.lstat(name, dir_fd=dfd) if name else os.fstat(dfd)
    t = ftype(st.st_mode)
    g = groups[(st.st_dev, st.st_ino)]
    xa, acl = xattrs(dfd, name)
    f = {
        "path": esc(rel), "type": t, "mode": "%04o" % stat.S_IMODE(st.st_mode),
        "owner": "%d:%d" % (st.st_uid, st.st_gid),
        "size": str(st.st_size) if t in "fl" else "-",
        "target": esc(os.readlink(name, dir_fd=dfd)) if t == "l" else "-",
        "rdev": "%d,%d" % (os.major(st.st_rdev), os.minor(st.st_rdev)) if t in "cb" else "-",
        "group": esc(g[0]) if len(g) > 1 else "-",
        "alloc": alloc(st), "mtime": str(st.st_mtime_ns),
        "xattrs": xa, "acls": acl, "fflags": fflags(dfd, name, st),
    }
    if t == "d" and "dir-mtime" in ignore:
        f["mtime"] = "*"
    if t == "l" and "link-mtime" in ignore:
        f["mtime"] = "*"
    for k in f:
        if k in ignore:
            f[k] = "*"
    return " ".join(f[k] for k in ("path", "type", "mode", "owner", "size", "target", "rdev",
                                     "group", "alloc", "mtime", "xattrs", "acls", "fflags"))


def walk(dfd, rel, out):
    """(rel, parent fd, name) of every entry below dfd, depth first, by fds."""
    for name in sorted(os.listdir(dfd)):
        name = os.fsencode(name)
        crel = rel + b"/" + name if rel else name
        st = os.lstat(name, dir_fd=dfd)
        out.append((crel, dfd, name, st))
        if stat.S_ISDIR(st.st_mode):
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
            walk(sub, crel, out)


def main():
    args = sys.argv[1:]
    ignore = set()
    skip_root = False
    descend = 0
    while len(args) > 1:
        if args[0] == "--ignore":
            ignore |= set(args[1].split(","))
            args = args[2:]
        elif args[0] == "--skip-root":
            skip_root = True
            args = args[1:]
        elif args[0] == "--descend":  # N levels down the only subdirectory
            descend = int(args[1])
            args = args[2:]
        else:
            break
    sys.setrecursionlimit(100000)
    root = os.open(args[0], os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(descend):
        sub = [n for n in os.listdir(root) if stat.S_ISDIR(os.lstat(n, dir_fd=root).st_mode)]
        root = os.open(sub[0], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root)
    ents = [(b".", root, b"", os.fstat(root))]
    walk(root, b"", ents)
    ents = [e for e in ents if not stat.S_ISSOCK(e[3].st_mode)]
    if skip_root:
        ents = ents[1:]
    ents.sort(key=lambda e: e[0])
    groups = {}
    for rel, _, _, st in ents:
        groups.setdefault((st.st_dev, st.st_ino), []).append(rel)
    for rel, dfd, name, _ in ents:
        print(describe(dfd, name, rel, groups, ignore))


if __name__ == "__main__":
    main()
