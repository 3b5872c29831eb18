#!/usr/bin/env bash
# train --trace-svg FILE.svg: the last step's measured timeline and the prediction in one SVG
# chart (zb_svg_write_overlay). The file is well-formed SVG with a predicted and a measured lane
# per rank and both makespans in the title, next to --trace's four files; it is written at
# --ranks 1 too; an unwritable path fails before training. When chromium is installed, a
# screenshot must show the F, B and W colours (the pixel check of svg_render.sh).
# Usage: cli_trace_overlay.sh <zbpp-binary> <source-dir>
set -u
ZBPP=$(readlink -f "$1")
T=$(mktemp -d "${TMPDIR:-/tmp}/zbpp-overlay.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
export OPENBLAS_NUM_THREADS=1
TINY=(--steps 2 --seq 16 --batch 4 --layers 2 --channels 32 --heads 2 --quiet)

svg_check() { # FILE PYTHON-ASSERTION over `texts`, `rects`
  python3 - "$1" "$2" <<'PY' || fail "svg check on $1: $2"
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == ns + "svg", root.tag
texts = ["".join(t.itertext()) for t in root.iter(ns + "text")]
rects = list(root.iter(ns + "rect"))
ok = eval(sys.argv[2])
if not ok:
    print("texts:", texts[:12])
sys.exit(0 if ok else 1)
PY
}

"$ZBPP" train "${TINY[@]}" --ranks 2 --microbatches 4 --schedule zb-h1 --trace run.json \
  --trace-svg overlay.svg >out 2>err || fail "train --trace-svg: $(cat err)"
[ -s overlay.svg ] || fail "no overlay written"
for f in run.json run.predicted.json run.svg run.predicted.svg; do
  [ -s "$f" ] || fail "--trace file $f missing next to --trace-svg"
done
svg_check overlay.svg '"measured makespan" in texts[0] and "zb-h1 P=2 M=4" in texts[0] and all(("rank %d %s" % (r, l)) in texts for r in (0, 1) for l in ("predicted", "measured"))'
# every compute action twice (predicted and measured): 2 ranks x 4 microbatches x (F, B, W)
svg_check overlay.svg 'sum(1 for r in rects if r.get("fill") in ("#4e79a7", "#f28e2b", "#59a14f")) >= 2 * 24'

# --ranks 1: the run goes through the pipeline trainer, and the FLOP model is scaled
"$ZBPP" train "${TINY[@]}" --partition flops --trace-svg one.svg >out 2>err ||
  fail "--ranks 1 --trace-svg: $(cat err)"
svg_check one.svg '"rank 0 measured" in texts and "FLOP model scaled" in texts[0]'

# an unwritable path: one line naming the flag, before any training, no file
"$ZBPP" train "${TINY[@]}" --ranks 2 --trace-svg nodir/o.svg >out 2>err && fail "bad --trace-svg accepted"
grep -q "^zbpp train: .*--trace-svg" err || fail "bad --trace-svg message: $(cat err)"
[ -e nodir ] && fail "bad --trace-svg created something"

CHROME=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$CHROME" ]; then
  HOME="$T" timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$T/profile" --window-size=900,300 --screenshot="$T/o.png" \
    "file://$T/overlay.svg" >chrome.log 2>&1
  if [ -s o.png ]; then
    python3 - o.png 4e79a7 f28e2b 59a14f <<'PY' || fail "overlay colours not rendered"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
pos, idat = 8, b""
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
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
print("missing colours", missing) if missing else None
sys.exit(1 if missing else 0)
PY
  else
    fail "chromium wrote no screenshot: $(tail -3 chrome.log)"
  fi
else
  echo "cli_trace_overlay: chromium not installed, rendering not checked"
fi

[ "$fails" -eq 0 ] || { echo "cli_trace_overlay: $fails failure(s)"; exit 1; }
echo "cli_trace_overlay: PASS"
