#!/usr/bin/env bash
# End-to-end test of the planner CLI: zbpp schedule | simulate | validate.
# Usage: cli_planner.sh <zbpp-binary> <source-dir>
set -u
ZBPP=$(readlink -f "$1")
SRC=${2:-.}
T=$(mktemp -d "${TMPDIR:-/tmp}/zbpp-cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fails=0
checks=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { checks=$((checks + 1)); }

# run NAME CMD... : must succeed.
run() {
  local name=$1; shift
  if "$@" >"$T/out" 2>"$T/err"; then ok; else fail "$name: exit $? ($(head -c 300 "$T/err"))"; fi
}

# bad NAME PATTERN CMD... : must fail with exactly one stderr line "zbpp <cmd>: ..." matching
# PATTERN, print nothing on stdout, and leave no file named "out.file" (nor its temp files).
bad() {
  local name=$1 pat=$2; shift 2
  rm -f "$T"/out.file*
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$T/err")
  if [ "$rc" -eq 0 ]; then fail "$name: exit 0, expected failure"; return; fi
  if [ "$rc" -ge 128 ]; then fail "$name: crashed (exit $rc)"; return; fi
  if [ "$lines" -ne 1 ]; then fail "$name: $lines stderr lines: $(cat "$T/err")"; return; fi
  if ! grep -Eq "^zbpp [a-z]+: .*$pat" "$T/err"; then fail "$name: stderr '$(cat "$T/err")' !~ $pat"; return; fi
  if [ -s "$T/out" ]; then fail "$name: wrote to stdout"; return; fi
  if ls "$T"/out.file* >/dev/null 2>&1; then fail "$name: left an output file"; return; fi
  ok
}

# ---- help ----
for cmd in schedule simulate validate; do
  run "$cmd --help" "$ZBPP" "$cmd" --help
  grep -q -- "--mem-limit" "$T/out" || fail "$cmd --help lacks --mem-limit"
done
run "schedule --help families" "$ZBPP" schedule --help
for fam in gpipe 1f1b zb-h1 zb-h2; do
  grep -q "^  $fam " "$T/out" || fail "schedule --help does not list $fam"
done
for flag in -s -p -m -v --cost --cost-file --mem --format --width -o; do
  grep -q -- "$flag" "$T/out" || fail "schedule --help lacks $flag"
done

# ---- schedule: every format ----
run "ascii" "$ZBPP" schedule -s zb-h1 -p 4 -m 8
grep -q "^r3 |" "$T/out" || fail "ascii: no rank 3 row"
grep -Eq "^makespan [0-9.]+, span [0-9.]+, bubble rate [0-9.]+%, peak memory" "$T/out" || fail "ascii: no summary"
run "csv" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --format csv
[ "$(wc -l <"$T/out")" -eq 4 ] || fail "csv: expected 4 rows"
head -1 "$T/out" | grep -q "^0F0,0F1," || fail "csv: row 0 does not start with 0F0,0F1"
run "csv-comms" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --format csv-comms
grep -q "SEND_F" "$T/out" && grep -q "RECV_B" "$T/out" || fail "csv-comms: no SEND/RECV"
run "json" "$ZBPP" schedule -s zb-h2 -p 4 -m 8 --cost 1,1,1,0.1 --format json -o s.json
python3 - s.json <<'EOF' || fail "json: invalid or fields missing"
import json, sys
d = json.load(open(sys.argv[1]))
need = ["schedule", "ranks", "chunks", "placement", "microbatches", "stages", "makespan", "span",
        "spans", "bubble_rate", "peak_memory", "peak_memory_time", "busy", "costs"]
missing = [k for k in need if k not in d]
assert not missing, missing
assert d["schedule"] == "zb-h2" and d["ranks"] == 4 and d["microbatches"] == 8
assert len(d["spans"]) == 4 and len(d["peak_memory"]) == 4 and len(d["busy"]) == 4
assert d["costs"]["comm"] == [0.1] * 4
assert 0 <= d["bubble_rate"] < 1 and d["makespan"] > 0
EOF
run "trace" "$ZBPP" schedule -s zb-h1 -p 3 -m 4 --format trace -o s.trace.json
python3 - s.trace.json <<'EOF' || fail "trace: invalid"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
assert len(x) == 3 * 4 * 3, len(x)  # P * M * (F, B, W)
assert {e["tid"] for e in x} == {0, 1, 2}
assert all(e["dur"] > 0 and e["ts"] >= 0 and "cname" in e for e in x)
names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
assert names == {"rank 0", "rank 1", "rank 2"}, names
EOF
run "svg" "$ZBPP" schedule -s 1f1b -p 4 -m 6 --format svg -o s.svg
python3 -c "import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])" s.svg || fail "svg: not XML"
[ "$(grep -c "<title>" s.svg)" -eq 48 ] || fail "svg: expected 48 action rects"
run "-v" "$ZBPP" schedule -s interleaved-1f1b -p 2 -m 4 -v 2 --format csv
grep -q "3F0" "$T/out" || fail "-v 2: no stage 3"
printf 'stage,F,B,W,C\n# per-stage costs\n0,1,1,1,0\n1,2,2,1,0.5\n' >costs.csv
run "cost-file" "$ZBPP" schedule -s zb-h1 -p 2 -m 4 --cost-file costs.csv --format json
python3 -c "import json,sys; d=json.load(sys.stdin); assert d['costs']['f']==[1,2], d" <"$T/out" \
  || fail "cost-file: per-stage costs not used"
run "mem-limit ok" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --mem-limit 4

# ---- CSV round trip through the CLI ----
for fam in 1f1b zb-h1 zb-h2 gpipe; do
  run "$fam export" "$ZBPP" schedule -s "$fam" -p 4 -m 6 --format csv -o a.csv
  run "$fam simulate csv" "$ZBPP" simulate a.csv --format csv -o b.csv
  cmp -s a.csv b.csv || fail "$fam: csv round trip differs"
  run "$fam validate" "$ZBPP" validate a.csv
  grep -q "^valid: " "$T/out" || fail "$fam validate: no 'valid:' line"
  # The simulation of the re-read file matches the generator's.
  "$ZBPP" schedule -s "$fam" -p 4 -m 6 --format json -o g.json
  "$ZBPP" simulate a.csv --format json -o r.json
  python3 - g.json r.json <<'EOF' || fail "$fam: simulate of exported csv differs"
import json, sys
g, r = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("makespan", "bubble_rate", "peak_memory", "spans"):
    assert g[k] == r[k], (k, g[k], r[k])
EOF
done
run "csv-comms export" "$ZBPP" schedule -s zb-h1 -p 3 -m 5 --format csv-comms -o c.csv
run "csv-comms validate" "$ZBPP" validate c.csv
grep -q "with comms" "$T/out" || fail "validate c.csv: not seen as lowered"
run "csv-comms simulate" "$ZBPP" simulate c.csv --format csv -o d.csv
cmp -s c.csv d.csv || fail "csv-comms round trip differs"
for fmt in ascii json trace svg csv-comms; do
  run "simulate $fmt" "$ZBPP" simulate a.csv --format "$fmt"
done
# CRLF file (what Python's csv.writer writes) is accepted.
sed 's/$/\r/' a.csv >crlf.csv
run "crlf" "$ZBPP" validate crlf.csv

# ---- errors: one line, non-zero exit, no partial output ----
O=(-o "$T/out.file")
bad "unknown schedule" "unknown schedule family 'nope' \(known: .*zb-h1" "$ZBPP" schedule -s nope -p 4 -m 8 "${O[@]}"
bad "missing -s" "missing -s" "$ZBPP" schedule -p 4 -m 8
bad "missing -m" "missing -m" "$ZBPP" schedule -s 1f1b -p 4
bad "P=0" "ranks" "$ZBPP" schedule -s 1f1b -p 0 -m 8 "${O[@]}"
bad "P=abc" "not an integer" "$ZBPP" schedule -s 1f1b -p abc -m 8
bad "M=-3" "out of range" "$ZBPP" schedule -s 1f1b -p 2 -m -3
bad "impossible v" "chunks" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 -v 3 "${O[@]}"
bad "negative cost" "negative" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --cost 1,-1,1 "${O[@]}"
bad "nan cost" "not a finite number" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --cost 1,nan,1
bad "inf cost" "not a finite number" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --cost inf,1,1
bad "text cost" "not a finite number" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --cost 1,x,1
bad "short cost" "need 3" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --cost 1,1
bad "long cost" "more than 4" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --cost 1,1,1,1,1
bad "mem not zero" "sum to 0" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --mem 1,0,0 "${O[@]}"
bad "mem-limit negative" "negative" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --mem-limit -1
bad "mem-limit unmet" "limit" "$ZBPP" schedule -s zb-h2 -p 4 -m 8 --mem-limit 3 "${O[@]}"
bad "unknown format" "unknown format 'png'" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --format png "${O[@]}"
bad "unknown option" "unknown option --bogus" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --bogus
bad "missing value" "needs a value" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --cost
bad "extra argument" "unexpected argument" "$ZBPP" schedule -s zb-h1 -p 4 -m 8 extra
bad "cost and cost-file" "cannot be used together" "$ZBPP" schedule -s zb-h1 -p 2 -m 4 --cost 1,1,1 --cost-file costs.csv
printf '0,1,1,1\n0,1,1,1\n' >dup.csv
bad "cost-file duplicate" "given twice" "$ZBPP" schedule -s zb-h1 -p 2 -m 4 --cost-file dup.csv
printf '0,1,1,1\n2,1,1,1\n' >gap.csv
bad "cost-file gap" "stage 1 missing" "$ZBPP" schedule -s zb-h1 -p 2 -m 4 --cost-file gap.csv
bad "cost-file stages" "has 2 stages" "$ZBPP" schedule -s zb-h1 -p 2 -m 4 -v 2 --cost-file costs.csv
bad "cost-file missing" "cannot open" "$ZBPP" schedule -s zb-h1 -p 2 -m 4 --cost-file nope.csv
bad "simulate no file" "missing FILE" "$ZBPP" simulate
bad "simulate unreadable" "cannot open" "$ZBPP" simulate nope.csv "${O[@]}"
bad "validate dir" "not a regular file" "$ZBPP" validate "$T"
printf '0F0,0X1\n1F0\n' >junk.csv
bad "malformed csv" "line 1, cell 2" "$ZBPP" validate junk.csv
bad "malformed csv simulate" "line 1, cell 2" "$ZBPP" simulate junk.csv "${O[@]}"
printf '0F0,0I0\n1F0,1I0,1W0\n' >incomplete.csv
bad "incomplete schedule" "W" "$ZBPP" validate incomplete.csv
printf '0F0,0B0\n1B0,1F0\n' >deadlock.csv
bad "deadlock or order" "." "$ZBPP" validate deadlock.csv
bad "validate mem-limit" "limit" "$ZBPP" validate a.csv --mem-limit 1
bad "simulate mem-limit" "limit" "$ZBPP" simulate a.csv --mem-limit 1 "${O[@]}"
bad "cost-file wrong S" "stages" "$ZBPP" simulate a.csv --cost-file costs.csv

# An existing output file is left untouched by a failing run.
echo "precious" >keep.txt
"$ZBPP" schedule -s zb-h2 -p 4 -m 8 --mem-limit 3 -o keep.txt 2>/dev/null
[ "$(cat keep.txt)" = "precious" ] || fail "existing output overwritten on error"
"$ZBPP" simulate junk.csv -o keep.txt 2>/dev/null
[ "$(cat keep.txt)" = "precious" ] || fail "existing output overwritten on error (simulate)"
ls keep.txt.tmp.* >/dev/null 2>&1 && fail "temp file left behind"
# ... and replaced by a successful one.
run "overwrite" "$ZBPP" schedule -s 1f1b -p 2 -m 2 --format csv -o keep.txt
grep -q "^0F0" keep.txt || fail "successful run did not replace the output"

# --cost means one rank's share of the model everywhere: schedule, simulate and plan give a
# v-chunk family the same makespan, and a chunk gets 1/v of F, B, W (issue 10)
"$ZBPP" plan -p 4 -m 8 --cost 1,1.2,0.6,0.05 --format json >plan.json 2>/dev/null ||
  fail "plan --format json"
for fam in zb-v interleaved-zb 1f1b; do
  "$ZBPP" schedule -s "$fam" -p 4 -m 8 --cost 1,1.2,0.6,0.05 --format json >s.json 2>/dev/null ||
    fail "schedule $fam"
  # the same --cost: zb-v's order depends on the costs
  "$ZBPP" schedule -s "$fam" -p 4 -m 8 --cost 1,1.2,0.6,0.05 --format csv -o s.csv 2>/dev/null
  "$ZBPP" simulate s.csv --cost 1,1.2,0.6,0.05 --format json >sim.json 2>/dev/null ||
    fail "simulate $fam"
  python3 - "$fam" <<'PY' && ok || fail "--cost meaning differs between schedule/simulate/plan for $fam"
import json, sys
fam = sys.argv[1]
s, sim, plan = (json.load(open(f)) for f in ("s.json", "sim.json", "plan.json"))
row = [r for r in plan["families"] if r["family"] == fam][0]
v = s["chunks"]
assert abs(s["makespan"] - row["makespan"]) < 1e-9, (s["makespan"], row["makespan"])
assert abs(sim["makespan"] - s["makespan"]) < 1e-9
assert all(abs(f - 1.0 / v) < 1e-12 for f in s["costs"]["f"]), s["costs"]["f"]
PY
done

echo "cli_planner: $checks checks passed, $fails failed"
[ "$fails" -eq 0 ]
