#!/usr/bin/env bash
# The SVG charts render in a browser: headless Chromium screenshots of `zbpp plot` and of
# `zbpp schedule --format svg --arrows` must show the series / action colours (pixels decoded from
# the PNG). Skipped (77) with a message when chromium is not installed (scripts/setup.sh adds it).
# Usage: svg_render.sh <zbpp-binary> <source-dir>
set -u
ZBPP=$(readlink -f "$1")
SRC=$(readlink -f "$2")
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
  python3 "$SRC/tests/png_colours.py" "$@" || fail "colours in $1: ${*:2}"
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
