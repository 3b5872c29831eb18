#!/usr/bin/env python3
"""png_colours.py PNG HEX...: exit 0 when each colour (RRGGBB) covers at least 20 pixels of the
PNG (8-bit RGB or RGBA, as headless Chromium writes screenshots), else print the missing ones and
exit 1. Shared by the tests that check a rendered SVG (svg_render.sh, cli_trace_overlay.sh)."""
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        assert depth == 8 and ctype in (2, 6), "unexpected PNG type"
        bpp = 3 if ctype == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw, stride = zlib.decompress(idat), w * bpp
prev, counts = bytearray(stride), {}
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        k = bytes(line[x:x + 3])
        counts[k] = counts.get(k, 0) + 1
    prev = line
missing = [hx for hx in sys.argv[2:] if counts.get(bytes.fromhex(hx), 0) < 20]
if missing:
    print("missing colours", missing)
sys.exit(1 if missing else 0)
