#!/usr/bin/env python3
"""png_colours.py FILE.png RRGGBB...: for each colour, how many pixels of the screenshot have it (within 8 per
channel), one number per line. A small PNG reader (8-bit RGB/RGBA, non-interlaced: what Chromium writes), so the
test needs nothing beyond Python."""
import struct, sys, zlib

data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        assert depth == 8 and ctype in (2, 6) and interlace == 0, "unsupported PNG"
        bpp = 3 if ctype == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride = w * bpp
rows, prev, i = [], bytearray(stride), 0
for _ in range(h):
    f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
    i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]
        c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line)
    prev = line
for want in sys.argv[2:]:
    r, g, b = (int(want[k:k + 2], 16) for k in (0, 2, 4))
    count = 0
    for line in rows:
        for x in range(0, stride, bpp):
            if abs(line[x] - r) <= 8 and abs(line[x + 1] - g) <= 8 and abs(line[x + 2] - b) <= 8:
                count += 1
    print(count)
