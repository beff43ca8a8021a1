#!/usr/bin/env python3
"""flip.py ARCHIVE SOURCE OFFSET [N]: flip (xor 0xff) N bytes (default 4)
of ARCHIVE where it holds SOURCE's 64 bytes at OFFSET verbatim, i.e. in a
stored unit (zstd raw blocks, lzop stored blocks, deflate stored blocks all
copy the data as it is). Prints the archive offset; fails if the bytes are
not found exactly once (then the data was compressed, not stored)."""
import sys

path, src, off = sys.argv[1], sys.argv[2], int(sys.argv[3])
n = int(sys.argv[4]) if len(sys.argv) > 4 else 4
with open(src, 'rb') as f:
    f.seek(off)
    needle = f.read(64)
data = bytearray(open(path, 'rb').read())
at = data.find(needle)
if at < 0 or data.find(needle, at + 1) >= 0:
    sys.exit('flip.py: the 64 bytes at %d of %s are not stored once in %s' % (off, src, path))
for i in range(n):
    data[at + 16 + i] ^= 0xff
open(path, 'wb').write(data)
print(at + 16)
