#!/usr/bin/env python3
"""cbackup-decrypt.py KEYFILE ARCHIVE.cbenc|STORE/nights/NAME OUTPUT|-

Turn an encrypted cbackup archive (NAME.tar.zst.cbenc), or a sealed night
of a unit store (its manifest STORE/nights/NAME, its objects under
STORE/units/), back into the plain archive (NAME.tar.zst) without cbackup,
for stock tools:

    cbackup-decrypt.py key NAME.tar.zst.cbenc - | zstd -d | tar -x

Needs python3-cryptography (Debian). The format is docs/encryption.md.
Every frame's tag and id are checked before its bytes are written; with
the catalog beside the archive (ARCHIVE.idx) its authenticated frame table
is checked too (order, count: swapped, foreign or missing units). Any
failure stops with an error and exit status 1; OUTPUT may then hold the
frames written before it (the stream to a pipe cannot be taken back).
"""
import base64
import hashlib
import hmac
import os
import struct
import sys

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

KEY_MAGIC = "cbackup-key 1\nsecret "
HEAD, ALIGN, FRAME_HDR, IDX_HEAD, REC = 4096, 4096, 48, 72, 96
NONCE0 = bytes(12)


def die(msg):
    sys.exit("cbackup-decrypt: " + msg)


def hkdf(secret, info):
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=b"cbackup", info=info).derive(secret)


def load_key(path):
    with open(path) as f:
        text = f.read()
    if not text.startswith(KEY_MAGIC) or len(text) != len(KEY_MAGIC) + 65:
        die("'%s' is not a cbackup key file" % path)
    return bytes.fromhex(text[len(KEY_MAGIC):-1])


def catalog_ids(path, secret, fp, name):
    """The unit ids of the authenticated frame table, or None without a catalog."""
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        d = f.read()
    if d[:8] != b"CBENCIDX" or d[16:48] != fp:
        die("'%s' is not this archive's catalog under this key" % path)
    n = struct.unpack("<Q", d[48:56])[0]
    table = IDX_HEAD + n * REC
    blob = d[table + 8:]
    try:
        recs = AESGCM(hkdf(secret, b"cbackup v1 catalog")).decrypt(blob[:12], blob[12:], d[:table + 8])
    except InvalidTag:
        die("catalog '%s' failed authentication (damaged)" % path)
    at = 0
    while at + 12 <= len(recs):
        t, ln = struct.unpack("<IQ", recs[at:at + 12])
        if t == 1 and recs[at + 12:at + 12 + ln] != name.encode():
            die("catalog '%s' belongs to another archive" % path)
        at += 12 + ln
    return [d[IDX_HEAD + i * REC + 32:IDX_HEAD + i * REC + 64] for i in range(n)]


def frames(f, secret, k_id):
    """Each frame's plain bytes, checked (tag, then id against the bytes)."""
    n = 0
    while True:
        h = f.read(FRAME_HDR)
        if not h:
            return
        if len(h) < FRAME_HDR or h[:4] != b"CBUF":
            die("unit %d: truncated or damaged frame header" % (n + 1))
        ct_len, uid = struct.unpack("<Q", h[8:16])[0], h[16:48]
        body = f.read(ct_len + 16)
        if len(body) != ct_len + 16:
            die("unit %d: truncated" % (n + 1))
        try:
            plain = AESGCM(hkdf(secret, b"cbackup v1 unit key" + uid)).decrypt(NONCE0, body, h)
        except InvalidTag:
            die("unit %d failed authentication (damaged)" % (n + 1))
        if hmac.new(k_id, hashlib.sha256(plain).digest(), "sha256").digest() != uid:
            die("unit %d is not the unit its header names" % (n + 1))
        pad = -(FRAME_HDR + ct_len + 16) % ALIGN
        if len(f.read(pad)) != pad:
            die("unit %d: truncated" % (n + 1))
        n += 1
        yield uid, plain


def store_night(path, secret, fp, k_id, output):
    """A sealed night of a unit store: its units in its manifest's order."""
    with open(path, "rb") as f:
        text = f.read()
    head, sep, rest = text.partition(b"\nsealed ")
    clear = dict(l.split(b" ", 1) for l in head.split(b"\n")[1:] if b" " in l)
    if not sep or bytes.fromhex(clear.get(b"fingerprint", b"").decode()) != fp:
        die("archive was encrypted with key %s, this key is %s"
            % (clear.get(b"fingerprint", b"?")[:16].decode(), fp[:8].hex()))
    blob = base64.b64decode(rest.split(b"\n", 1)[0].split(b" ")[1])
    try:
        inner = AESGCM(hkdf(secret, b"cbackup v1 catalog")).decrypt(blob[:12], blob[12:], head + b"\n")
    except InvalidTag:
        die("manifest '%s' failed authentication (damaged)" % path)
    lines = [l.split(" ") for l in inner.decode().splitlines()]
    if ["name", os.path.basename(path)] not in lines:
        die("manifest '%s' belongs to another night" % path)
    root = os.path.dirname(os.path.dirname(os.path.abspath(path)))
    out = sys.stdout.buffer if output == "-" else open(output, "xb")
    for n, (_, hexd, _) in enumerate(l for l in lines if l[0] == "unit"):
        uid = hmac.new(k_id, bytes.fromhex(hexd), "sha256").digest()
        obj = os.path.join(root, "units", uid.hex()[:2], uid.hex())
        if not os.path.isfile(obj):
            die("unit %d: its object '%s' is missing" % (n + 1, obj))
        with open(obj, "rb") as u:
            got = list(frames(u, secret, k_id))
        if len(got) != 1 or got[0][0] != uid:
            die("unit %d (%s) is not the unit the manifest names" % (n + 1, uid.hex()))
        out.write(got[0][1])
    out.flush()


def main():
    if len(sys.argv) != 4:
        die("usage: cbackup-decrypt.py KEYFILE ARCHIVE.cbenc|STORE/nights/NAME OUTPUT|-")
    keyfile, archive, output = sys.argv[1:]
    secret = load_key(keyfile)
    fp = hkdf(secret, b"cbackup v1 fingerprint")
    k_id = hkdf(secret, b"cbackup v1 unit id")
    with open(archive, "rb") as f:
        head = f.read(HEAD)
        if head.startswith(b"cbackup-manifest-sealed 1\n"):
            return store_night(archive, secret, fp, k_id, output)
        if head[:8] != b"CBENC\0\0\1" or struct.unpack("<II", head[8:16]) != (1, 1):
            die("'%s' is not an encrypted cbackup archive (version 1)" % archive)
        if head[16:48] != fp:
            die("archive was encrypted with key %s, this key is %s" % (head[16:24].hex(), fp[:8].hex()))
        ids = catalog_ids(archive + ".idx", secret, fp, os.path.basename(archive))
        out = sys.stdout.buffer if output == "-" else open(output, "xb")
        n = 0
        for uid, plain in frames(f, secret, k_id):
            if ids is not None and (n >= len(ids) or ids[n] != uid):
                die("unit %d is not the unit the catalog names there (swapped or foreign)" % (n + 1))
            out.write(plain)
            n += 1
        if ids is not None and n != len(ids):
            die("the archive has %d units, its catalog %d: truncated" % (n, len(ids)))
        out.flush()


if __name__ == "__main__":
    main()
