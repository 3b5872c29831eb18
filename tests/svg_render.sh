#!/usr/bin/env bash
# The SVG charts render in a browser: headless Chromium screenshots of `zbpp plot` and of
# `zbpp schedule --format svg --arrows` must show the series / action colours (pixels decoded from
# the PNG). Skipped (77) with a message when chromium is not installed (scripts/setup.sh adds it).
# Usage: svg_render.sh <zbpp-binary> <source-dir>
set -u
ZBPP=$(readlink -f "$1")
CHROME=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROME" ]; then echo "svg_render: chromium not installed, skipped"; exit 77; fi
T=$(mktemp -d "${TMPDIR:-/tmp}/zbpp-render.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

shot() { # SVG PNG WIDTH,HEIGHT (small windows: the pixel check below is pure Python)
  HOME="$T" timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$T/profile" --window-size="$3" --screenshot="$T/$2" "file://$T/$1" \
    >"$T/chrome.log" 2>&1
  [ -s "$T/$2" ] || fail "chromium wrote no screenshot of $1: $(tail -3 "$T/chrome.log")"
}

# has_colors PNG HEX...: each colour covers at least 20 pixels of the screenshot.
has_colors() {
  python3 - "$@" <<'PY' || fail "colours in $1: ${*:2}"
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
PY
}

printf '{"step":%d,"loss":%s,"lr":0.001,"tokens_per_s":1000}\n' 0 5 1 4.5 2 4.2 3 4 >m.jsonl
printf '{"step":3,"val_loss":4.3}\n' >>m.jsonl
"$ZBPP" plot m.jsonl -o loss.svg || fail "plot"
shot loss.svg loss.png 880,780
# loss line, validation loss, lr and tokens/s series colours
has_colors loss.png 4e79a7 e15759 59a14f f28e2b

"$ZBPP" schedule -s zb-v -p 2 -m 4 --format svg --arrows -o sched.svg || fail "schedule svg"
shot sched.svg sched.png 700,240
has_colors sched.png 4e79a7 f28e2b 59a14f

if [ "$fails" -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "svg_render: ok (chromium rendered the metrics plot and the schedule chart)"
