#!/usr/bin/env bash
# zbpp profile: table and JSON outputs, a cost file zbpp schedule reads back, refusals; zbpp train
# with measured costs: --schedule auto and --save-model match --ranks 1 bit for bit, --trace
# writes the measured and predicted files, the report prints both bubbles.
# usage: cli_profile.sh <zbpp binary> <source dir>
set -euo pipefail
ZBPP=$1
SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=(--layers 4 --channels 32 --heads 2 --seq 16 --batch 8 --microbatches 4)

# ---- zbpp profile ----
out=$("$ZBPP" profile "${model[@]}" --ranks 2 --reps 2 --write-costs "$tmp/costs.csv")
# stage 1 on rank 1 ends at block 3; where it starts follows the measured times
for want in "^block 3 " "^embedding " "^head " "message of" "^1     1    [1-3]-3 " "^zb-h2 " "^1f1b "; do
  grep -q "$want" <<<"$out" || { echo "FAIL: profile table lacks '$want'"; echo "$out"; exit 1; }
done
# the cost file has one row per stage and zbpp schedule accepts it
[ "$(grep -c '^[0-9]' "$tmp/costs.csv")" -eq 2 ] || { echo "FAIL: cost file rows"; exit 1; }
"$ZBPP" schedule -s zb-h1 -p 2 -m 4 --cost-file "$tmp/costs.csv" >/dev/null \
  || { echo "FAIL: zbpp schedule rejected the profile's cost file"; exit 1; }

"$ZBPP" profile "${model[@]}" --ranks 2 --chunks 2 --placement v --reps 1 --format json \
  >"$tmp/p.json"
python3 - "$tmp/p.json" <<'EOF' || { echo "FAIL: profile json"; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ranks"] == 2 and d["chunks"] == 2 and d["placement"] == "v"
assert len(d["parts"]) == 6 and all(p["f"] > 0 for p in d["parts"][1:])
st = d["stages"]
assert [s["rank"] for s in st] == [0, 1, 1, 0]
assert st[0]["first_block"] == 0 and st[-1]["end_block"] == 4
for s in st:
    assert abs(s["m_f"] + s["m_b"] + s["m_w"]) < 1e-6 * s["m_f"]
assert any(f["family"] == "zb-v" and f["fits"] for f in d["schedules"])
EOF

expect_refused() { # expected-substring, args...
  local want=$1; shift
  set +e
  err=$("$ZBPP" profile "$@" 2>&1 >/dev/null)
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "FAIL: profile $* exited $rc"; exit 1; }
  grep -q "$want" <<<"$err" || { echo "FAIL: 'profile $*' said: $err"; exit 1; }
}
expect_refused "more stages" --layers 2 --ranks 4
expect_refused "divisible" --batch 6 --microbatches 4
expect_refused "needs --chunks 2" --placement v
expect_refused "not table or json" --format xml
expect_refused "unknown option" --bogus 1
expect_refused "exceeds" --seq 32 --max-seq 16
expect_refused "init-from" --init-from x.bin --layers 3

# ---- zbpp train with measured costs ----
common=(--text "$SRC/data/demo_corpus.txt" --layers 8 --channels 32 --heads 2 --seq 16
        --batch 8 --microbatches 8 --steps 3)
losses() { grep -o '"loss":[^,]*' "$1"; }
"$ZBPP" train "${common[@]}" --quiet --metrics "$tmp/ref.jsonl" --save-model "$tmp/ref.bin"
"$ZBPP" train "${common[@]}" --ranks 2 --schedule auto --metrics "$tmp/auto.jsonl" \
  --save-model "$tmp/auto.bin" --trace "$tmp/run.json" >"$tmp/report.txt" 2>/dev/null
diff <(losses "$tmp/ref.jsonl") <(losses "$tmp/auto.jsonl") \
  || { echo "FAIL: --schedule auto losses differ from --ranks 1"; exit 1; }
cmp "$tmp/ref.bin" "$tmp/auto.bin" || { echo "FAIL: --save-model differs from --ranks 1"; exit 1; }
grep -q "stage costs measured" "$tmp/report.txt" || { echo "FAIL: not profiled"; exit 1; }
grep -q "bubble: measured .* predicted" "$tmp/report.txt" || { echo "FAIL: no bubbles"; exit 1; }
grep -q "saved model" "$tmp/report.txt" || { echo "FAIL: no saved model line"; exit 1; }
for f in run.json run.predicted.json; do
  grep -q '"traceEvents"' "$tmp/$f" || { echo "FAIL: $f is not a trace"; exit 1; }
done
for f in run.svg run.predicted.svg; do
  grep -q '<svg' "$tmp/$f" || { echo "FAIL: $f is not an SVG"; exit 1; }
done
# --partition flops uses the FLOP model; a bad value is refused
"$ZBPP" train "${common[@]}" --steps 1 --ranks 2 --schedule zb-h1 --partition flops 2>/dev/null \
  | grep -q "FLOP model" || { echo "FAIL: --partition flops"; exit 1; }
set +e
err=$("$ZBPP" train "${common[@]}" --ranks 2 --partition guess 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "flops or profile" <<<"$err" || { echo "FAIL: --partition guess"; exit 1; }
echo "cli_profile: ok"
