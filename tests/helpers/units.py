#!/usr/bin/env python3
"""units.py KIND ARCHIVE: check an archive's independent units with the
standard library alone (no cbackup code).

  zstd ARCHIVE   the trailing seek table (zstd seekable format): skippable
                 magic 0x184D2A5E, footer magic 0x8F92EAB1; its frames'
                 compressed sizes add up to the archive before the table,
                 and each frame, decoded alone by `zstd -dc`, gives the
                 decompressed size the table says. Prints the frame count.
  gzip ARCHIVE   counts the concatenated members (zlib, one at a time).
"""
import struct
import subprocess
import sys
import zlib


def zstd(path):
    data = open(path, 'rb').read()
    if len(data) < 17 or struct.unpack('<I', data[-4:])[0] != 0x8F92EAB1:
        sys.exit('no seekable footer magic')
    n = struct.unpack('<I', data[-9:-5])[0]
    desc = data[-5]
    esize = 12 if desc & 0x80 else 8
    table = 8 + n * esize + 9
    start = len(data) - table
    magic, size = struct.unpack('<II', data[start:start + 8])
    if magic != 0x184D2A5E or size != table - 8:
        sys.exit('bad skippable frame header of the seek table')
    off = 0
    for i in range(n):
        c, d = struct.unpack('<II', data[start + 8 + i * esize:start + 16 + i * esize])
        out = subprocess.run(['zstd', '-dcq'], input=data[off:off + c],
                             stdout=subprocess.PIPE, check=True).stdout
        if len(out) != d:
            sys.exit('frame %d: %d bytes decoded, table says %d' % (i, len(out), d))
        off += c
    if off != start:
        sys.exit('frames cover %d bytes, the table starts at %d' % (off, start))
    print(n)


def gzip(path):
    data = open(path, 'rb').read()
    n = 0
    while data:
        d = zlib.decompressobj(16 + 15)
        d.decompress(data)
        if not d.eof:
            sys.exit('truncated member')
        data = d.unused_data
        n += 1
    print(n)


{'zstd': zstd, 'gzip': gzip}[sys.argv[1]](sys.argv[2])
