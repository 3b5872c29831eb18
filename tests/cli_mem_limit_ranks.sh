#!/usr/bin/env bash
# --mem-limit-ranks on schedule, plan, validate and simulate: one memory limit per rank, obeyed rank by
# rank, and a wrong count or value refused with one clear line.
# Usage: cli_mem_limit_ranks.sh <zbpp-binary> <source-dir>
set -u
ZBPP=$(readlink -f "$1")
T=$(mktemp -d "${TMPDIR:-/tmp}/zbpp-mlr.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fails=0
checks=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { checks=$((checks + 1)); }

# refused NAME PATTERN CMD...: exit 2, one stderr line matching PATTERN, nothing on stdout.
refused() {
  local name=$1 pat=$2; shift 2
  "$@" >out 2>err
  local rc=$?
  if [ "$rc" -ne 2 ] || [ "$(wc -l <err)" -ne 1 ] || [ -s out ] || ! grep -Eq "$pat" err; then
    fail "$name: rc $rc, stderr '$(cat err)'"
  else
    ok
  fi
}

# peaks_within FILE LIMITS KEY: the JSON (KEY: schedule or plan) gives back the limits it was
# given (mem_limit_ranks, null for inf), and every rank's peak in it is within its limit.
peaks_within() {
  python3 - "$@" <<'PY'
import json, sys
path, limits, kind = sys.argv[1], [float(x) for x in sys.argv[2].split(",")], sys.argv[3]
d = json.load(open(path))
back = [float("inf") if x is None else x for x in d["mem_limit_ranks"] or []]
assert back == limits, "mem_limit_ranks in the JSON: %r, given %r" % (d["mem_limit_ranks"], limits)
rows = [d] if kind == "schedule" else [r for r in d["families"] if r["fits"]]
assert rows, "no fitting schedule"
for row in rows:
    peaks = row["peak_memory"]
    assert len(peaks) == len(limits), (peaks, limits)
    for r, (p, l) in enumerate(zip(peaks, limits)):
        assert p <= l + 1e-9, "%s: rank %d peak %g above its limit %g" % (row.get("family", "schedule"), r, p, l)
PY
}

command -v python3 >/dev/null || { echo "cli_mem_limit_ranks: python3 not found, skipped"; exit 77; }

# schedule -s auto: rank 2 gets the minimum, the others more
"$ZBPP" schedule -s auto -p 4 -m 8 --mem-limit-ranks 4,3,1,4 --format json -o s.json 2>/dev/null &&
  peaks_within s.json 4,3,1,4 schedule && ok || fail "schedule auto: a rank above its own limit"
# a family that does not fit one rank's limit is refused (1f1b holds P-r activations on rank r)
"$ZBPP" schedule -s 1f1b -p 4 -m 8 --mem-limit-ranks 4,3,2,1 --format json -o h1.json 2>/dev/null &&
  peaks_within h1.json 4,3,2,1 schedule && ok || fail "schedule 1f1b: fits 4,3,2,1 exactly"
"$ZBPP" schedule -s 1f1b -p 4 -m 8 --mem-limit-ranks 4,2,2,1 >out 2>err
[ $? -ne 0 ] && grep -q "rank 1" err && ok || fail "schedule 1f1b over rank 1's limit: '$(cat err)'"

# plan: every fitting row within every rank's limit
"$ZBPP" plan -p 4 -m 8 --mem-limit-ranks 3,4,2,4 --format json >plan.json 2>/dev/null &&
  peaks_within plan.json 3,4,2,4 plan && ok || fail "plan: a fitting row above a rank's limit"

# validate: 1f1b's CSV is valid under its own peaks, not when rank 0 gets less
"$ZBPP" schedule -s 1f1b -p 4 -m 8 --format csv -o h1.csv 2>/dev/null || fail "write h1.csv"
"$ZBPP" validate h1.csv --mem-limit-ranks 4,3,2,1 >out 2>&1 && grep -q "^valid" out && ok ||
  fail "validate at its own peaks: $(cat out)"
"$ZBPP" validate h1.csv --mem-limit-ranks 3,3,2,1 >out 2>&1
[ $? -ne 0 ] && grep -q "rank 0" out && ok || fail "validate over rank 0's limit: $(cat out)"
# simulate takes them as validate does
"$ZBPP" simulate h1.csv --mem-limit-ranks 4,3,2,1 --format json >out 2>&1 && grep -q '"ranks": 4' out &&
  ok || fail "simulate at its own peaks: $(head -3 out)"
"$ZBPP" simulate h1.csv --mem-limit-ranks 3,3,2,1 >out 2>&1
[ $? -ne 0 ] && grep -q "rank 0" out && [ "$(wc -l <out)" -eq 1 ] && ok ||
  fail "simulate over rank 0's limit: $(cat out)"

# refused: wrong count, a bad value, a negative one, an empty list
for cmd in "schedule -s auto -p 4 -m 8" "plan -p 4 -m 8"; do
  # shellcheck disable=SC2086
  refused "$cmd: 3 limits" "3 limits given, the schedule has 4 ranks" "$ZBPP" $cmd --mem-limit-ranks 4,4,4
  # shellcheck disable=SC2086
  refused "$cmd: 5 limits" "5 limits given, the schedule has 4 ranks" "$ZBPP" $cmd --mem-limit-ranks 4,4,4,4,4
done
refused "validate: 3 limits" "3 limits given, the schedule has 4 ranks" "$ZBPP" validate h1.csv --mem-limit-ranks 4,4,4
refused "simulate: 3 limits" "3 limits given, the schedule has 4 ranks" "$ZBPP" simulate h1.csv --mem-limit-ranks 4,4,4
refused "bad value" "mem-limit-ranks \(rank 1\): 'x' is not a finite number" "$ZBPP" schedule -s auto -p 4 -m 8 --mem-limit-ranks 4,x,4,4
refused "negative" "mem-limit-ranks \(rank 2\): '-1' is negative" "$ZBPP" schedule -s auto -p 4 -m 8 --mem-limit-ranks 4,4,-1,4
refused "empty" "mem-limit-ranks" "$ZBPP" schedule -s auto -p 4 -m 8 --mem-limit-ranks ""
# inf: no limit on that rank (null in the JSON)
"$ZBPP" schedule -s gpipe -p 2 -m 4 --mem-limit-ranks inf,inf >/dev/null 2>&1 && ok || fail "inf limits refused"
"$ZBPP" plan -p 2 -m 4 --mem-limit-ranks 3,inf --format json >inf.json 2>/dev/null &&
  peaks_within inf.json 3,inf plan && ok || fail "plan: limits 3,inf not given back"
# one scalar limit: mem_limit_ranks is null
"$ZBPP" schedule -s zb-h1 -p 4 -m 8 --mem-limit 4 --format json -o one.json 2>/dev/null &&
  python3 -c 'import json, sys; d = json.load(open("one.json")); sys.exit(not (d["mem_limit"] == 4 and d["mem_limit_ranks"] is None))' &&
  ok || fail "scalar limit: mem_limit 4 and mem_limit_ranks null expected"

echo "cli_mem_limit_ranks: $checks checks passed, $fails failed"
[ "$fails" -eq 0 ]
