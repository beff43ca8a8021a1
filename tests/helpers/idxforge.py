#!/usr/bin/env python3
"""idxforge.py IDX WHAT [ARGS]: forge ARCHIVE.idx as a hostile user would,
with a fresh SHA-256 trailer (the catalog's own digest then holds, so only
the loader's bounds stand in the way). Reads the layout of cbackup-idx(5).

  size PATH VALUE        entry PATH's size field
  hardlink PATH VALUE    entry PATH flagged a hardlink, with size VALUE
  unit-coff N VALUE      unit N's compressed offset
  unit-uoff N VALUE      unit N's uncompressed offset
  tar-size VALUE         the header's tar stream size
  grow N                 N zero bytes inserted before the trailer (an
                         inflated file whose counts no longer add up)
  swap-keys              the keys of the first two segments of the same
                         uncompressed length swapped (each copies as the
                         other: only a check of the catalog against the
                         .sha256, or of the copy's content, finds it)
  rehash                 only the trailer (after a patch made by other means)
"""
import hashlib
import struct
import sys

path, what = sys.argv[1], sys.argv[2]
d = bytearray(open(path, 'rb').read())
version, = struct.unpack_from('<I', d, 8)
n_ent, n_units, str_len, tar_size = struct.unpack_from('<QQQQ', d, 16)
ulen = 24 if version >= 2 else 16
ent = 64
order = ent + 64 * n_ent
units = order + (n_ent * 4 + 7) // 8 * 8
strtab = units + n_units * ulen


def entry(name):
    for i in range(n_ent):
        e = ent + 64 * i
        poff, = struct.unpack_from('<I', d, e + 40)
        plen, = struct.unpack_from('<H', d, e + 52)
        p = d[strtab + poff:strtab + poff + plen].decode('utf-8', 'surrogateescape')
        if p in (name, './' + name.lstrip('./'), name.rstrip('/')):
            return e
    sys.exit('idxforge.py: no entry %r' % name)


if what == 'size':
    struct.pack_into('<Q', d, entry(sys.argv[3]) + 8, int(sys.argv[4]))
elif what == 'hardlink':
    e = entry(sys.argv[3])
    struct.pack_into('<Q', d, e + 8, int(sys.argv[4]))
    struct.pack_into('<I', d, e + 60, 1)
elif what == 'unit-coff':
    struct.pack_into('<Q', d, units + ulen * int(sys.argv[3]) + 8, int(sys.argv[4]))
elif what == 'unit-uoff':
    struct.pack_into('<Q', d, units + ulen * int(sys.argv[3]), int(sys.argv[4]))
elif what == 'tar-size':
    struct.pack_into('<Q', d, 40, int(sys.argv[3]))
elif what == 'grow':
    d[-32:-32] = bytes(int(sys.argv[3]))
elif what == 'swap-keys':
    keys = units + n_units * ulen + struct.unpack_from('<Q', d, 32)[0]
    n_segs, = struct.unpack_from('<Q', d, keys)
    segs = [keys + 8 + 96 * i for i in range(n_segs)]
    by_len = {}
    for g in segs:
        by_len.setdefault(struct.unpack_from('<Q', d, g + 8)[0], []).append(g)
    pair = next((v[:2] for v in by_len.values() if len(v) > 1), None)
    if not pair:
        sys.exit('idxforge.py: no two segments of the same length')
    a, b = pair
    d[a + 32:a + 64], d[b + 32:b + 64] = d[b + 32:b + 64], d[a + 32:a + 64]
elif what == 'rehash':
    pass
else:
    sys.exit('idxforge.py: unknown forgery %r' % what)
d[-32:] = hashlib.sha256(bytes(d[:-32])).digest()
open(path, 'wb').write(d)
