#!/usr/bin/env bash
# zbpp plot: a real metrics file from `zbpp train --metrics` (plus val_loss records, as the
# trainer will add them) drawn as SVG; well-formed XML with the panels and legend expected; bad
# input gives one error line and a non-zero exit, and leaves no output file.
# Usage: cli_plot.sh <zbpp-binary> <source-dir>
set -u
ZBPP=$(readlink -f "$1")
T=$(mktemp -d "${TMPDIR:-/tmp}/zbpp-plot.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# svg_check FILE PYTHON-ASSERTIONS: parse FILE as XML and run assertions on `texts`, `polys`.
svg_check() {
  python3 - "$1" "$2" <<'PY' || fail "svg check on $1: $2"
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
texts = ["".join(t.itertext()) for t in root.iter(ns + "text")]
polys = list(root.iter(ns + "polyline"))
ok = eval(sys.argv[2])
if not ok:
    print("texts:", texts[:40], "polylines:", len(polys))
sys.exit(0 if ok else 1)
PY
}

if ! "$ZBPP" train --steps 6 --seq 16 --batch 2 --layers 1 --channels 32 --heads 2 --quiet \
     --metrics m.jsonl >train.out 2>&1; then
  cat train.out; echo "FAIL: train for a metrics file"; exit 1
fi
[ "$(wc -l <m.jsonl)" -eq 6 ] || fail "metrics: expected 6 records"

# train records only: loss, lr and tokens/s panels, no validation legend
"$ZBPP" plot m.jsonl -o loss.svg 2>err || fail "plot: exit $? $(cat err)"
svg_check loss.svg '"train loss" in texts and "validation loss" not in texts and "learning rate" in texts and "throughput (tokens/s)" in texts and "step (optimizer steps)" in texts and len(polys) == 3'
# the loss polyline goes through one point per record
svg_check loss.svg 'len(polys[0].get("points").split()) == 6'

# with val_loss records in between (own lines with step + val_loss)
python3 - <<'PY'
import json
recs = [json.loads(l) for l in open("m.jsonl")]
with open("mv.jsonl", "w") as f:
    for r in recs:
        f.write(json.dumps(r) + "\n")
        if r["step"] % 2 == 1:
            f.write(json.dumps({"step": r["step"], "val_loss": r["loss"] + 0.1}) + "\n")
PY
"$ZBPP" plot mv.jsonl --title 'run <1>' >stdout.svg 2>err || fail "plot val: exit $? $(cat err)"
svg_check stdout.svg '"validation loss" in texts and len(polys) == 4 and texts[0].startswith("run <1>") and "last val loss" in texts[0]'
svg_check stdout.svg 'len(polys[0].get("points").split()) == 6 and len(polys[1].get("points").split()) == 3'

# bad input: one line "zbpp plot: ...", exit status, no output file
bad() { # NAME EXPECTED-RC PATTERN ARGS...
  local name=$1 want=$2 pat=$3; shift 3
  rm -f out.svg
  "$ZBPP" plot "$@" >out 2>err
  local rc=$?
  [ "$rc" -eq "$want" ] || { fail "$name: exit $rc, expected $want ($(cat err))"; return; }
  [ "$(wc -l <err)" -eq 1 ] || { fail "$name: $(wc -l <err) stderr lines"; return; }
  grep -Eq "^zbpp plot: .*$pat" err || fail "$name: '$(cat err)' !~ $pat"
  [ ! -e out.svg ] || fail "$name: left out.svg"
}
printf '{"step":0,"loss":1}\nnot json\n' >junk.jsonl
printf '{"loss":1}\n' >nostep.jsonl
printf '{"step":0,"lr":1}\n' >noloss.jsonl
printf '{"step":0,"loss":"high"}\n' >strloss.jsonl
printf '{"step":0,"loss":1\n' >cut.jsonl
: >empty.jsonl
bad "no file" 2 "missing METRICS" -o out.svg
bad "two files" 2 "expected one" m.jsonl m.jsonl
bad "missing" 1 "nope.jsonl" nope.jsonl -o out.svg
bad "junk line" 1 "line 2: not a JSON object" junk.jsonl -o out.svg
bad "no step" 1 "line 1: no numeric \"step\"" nostep.jsonl -o out.svg
bad "no loss" 1 "no record has a loss" noloss.jsonl -o out.svg
bad "string loss" 1 "\"loss\" is not a number" strloss.jsonl -o out.svg
bad "cut object" 1 "line 1: expected" cut.jsonl -o out.svg
bad "empty" 1 "no records" empty.jsonl -o out.svg
bad "bad -o" 1 "does not exist" m.jsonl -o nodir/out.svg
bad "unknown flag" 2 "" m.jsonl --bogus

# zbpp schedule --format svg --arrows: one arrow per cross-rank message; only with svg
"$ZBPP" schedule -s 1f1b -p 3 -m 4 --format svg >plain.svg 2>err || fail "svg: $(cat err)"
"$ZBPP" schedule -s 1f1b -p 3 -m 4 --format svg --arrows >arrows.svg 2>err || fail "arrows: $(cat err)"
# 1F1B, P=3, M=4: 2 boundaries x 4 microbatches x (activation + gradient) = 16 messages
svg_check arrows.svg 'sum(len(list(g.iter(ns + "line"))) for g in root.iter(ns + "g") if g.get("marker-end")) == 16 and any(t.startswith("arrows:") for t in texts)'
svg_check plain.svg 'not any(t.startswith("arrows:") for t in texts) and "W weight gradient" not in texts and "BW full backward (B+W)" in texts'
"$ZBPP" schedule -s 1f1b -p 3 -m 4 --arrows >out 2>err
rc=$?
[ "$rc" -eq 2 ] && grep -q "^zbpp schedule: --arrows needs --format svg$" err ||
  fail "--arrows without svg: exit $rc, $(cat err)"

if [ "$fails" -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "cli_plot: ok"
