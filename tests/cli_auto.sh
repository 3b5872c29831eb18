#!/usr/bin/env bash
# CLI: zbpp schedule -s auto / optimal, zbpp plan — output, notes, errors and exit codes.
# Usage: bash cli_auto.sh <zbpp binary> <source dir>
set -u
ZBPP=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
check() { # name, expected exit code, command...
    local name=$1 want=$2
    shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ "$rc" -ne "$want" ]; then
        echo "FAIL $name: exit $rc, want $want"; cat "$TMP/err"; fail=1
    fi
}
has() { # name, file, pattern
    if ! grep -q -- "$3" "$2"; then echo "FAIL $1: no '$3' in $2:"; cat "$2"; fail=1; fi
}

# auto reaches zero bubble at 2P and says what it chose
check auto-2p 0 "$ZBPP" schedule -s auto -p 4 -m 8 --mem-limit 8 --format json
has auto-2p "$TMP/out" '"bubble_rate": 0,'
has auto-2p-note "$TMP/err" 'auto chose'
# the chosen chunking is reported and the output is consistent with it
check any-placement 0 "$ZBPP" schedule -s auto -p 4 -m 8 --mem-limit 4 --any-placement --format json
has any-placement "$TMP/out" '"chunks": 2'
has any-placement-note "$TMP/err" '2 chunks per rank'
# a limit no schedule can meet
check too-low 1 "$ZBPP" schedule -s auto -p 4 -m 8 --mem-limit 0.5
has too-low "$TMP/err" 'memory limit 0.5 is below the minimum 1 that any schedule needs'
# nonsense costs are bad usage
check bad-mem 2 "$ZBPP" schedule -s auto -p 4 -m 8 --mem 1,0,-0.5
check bad-cost 2 "$ZBPP" schedule -s auto -p 4 -m 8 --cost 1,-1,1
check bad-tl 2 "$ZBPP" schedule -s optimal -p 2 -m 4 --time-limit x
# optimal on a tiny case: proven or an honest bound
check optimal 0 "$ZBPP" schedule -s optimal -p 2 -m 4 --mem-limit 2 --time-limit 2
if ! grep -q 'proven optimal\|NOT proven' "$TMP/err" && ! grep -q 'no GLPK' "$TMP/err"; then
    echo "FAIL optimal: no proof status"; cat "$TMP/err"; fail=1
fi
# V families through the CLI
for f in zb-v v-half v-min dualpipev interleaved-zb; do
    check "$f" 0 "$ZBPP" schedule -s "$f" -p 4 -m 8 --format csv
done
check zbv-small-m 2 "$ZBPP" schedule -s zb-v -p 4 -m 7
has zbv-small-m "$TMP/err" 'M >= 2P'

# plan: table sorted best first, families that do not fit listed with a reason
check plan 0 "$ZBPP" plan -p 4 -m 8 --mem-limit 4
has plan "$TMP/out" 'not applicable or over the limit'
has plan-gpipe "$TMP/out" 'gpipe .*limit 4'
# columns: rank family v=N placement makespan ...
first=$(awk 'NR==3 {print $5}' "$TMP/out")
last=$(awk 'NR>2 && $1 ~ /^[0-9]+$/ {v=$5} END {print v}' "$TMP/out")
if ! awk -v a="$first" -v b="$last" 'BEGIN {exit !(a <= b)}'; then
    echo "FAIL plan order: first $first last $last"; fail=1
fi
check plan-json 0 "$ZBPP" plan -p 4 -m 8 --mem-limit 6 --cost 1,1,0.6,0.05 --format json
if command -v python3 >/dev/null; then
    python3 - "$TMP/out" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
fits = [f for f in d["families"] if f["fits"]]
assert fits, "no family fits"
mks = [f["makespan"] for f in fits]
assert mks == sorted(mks), mks
assert all(max(f["peak_memory"]) <= 6 + 1e-9 for f in fits)
assert any(f["family"] == "auto" for f in fits)
best = fits[0]["makespan"]
auto = [f for f in fits if f["family"] == "auto"][0]
assert all(f.get("reason") for f in d["families"] if not f["fits"])
PY
fi
check plan-low 1 "$ZBPP" plan -p 4 -m 8 --mem-limit 0.1
has plan-low "$TMP/err" 'below the minimum'
check plan-usage 2 "$ZBPP" plan -p 4
check plan-format 2 "$ZBPP" plan -p 4 -m 8 --format xml
# --time-limit bounds the whole plan: families not started in time are listed as skipped
check plan-time-none 1 "$ZBPP" plan -p 8 -m 16 --time-limit 1e-9
has plan-time-none "$TMP/err" 'no schedule family finished within --time-limit'
has plan-time-none "$TMP/out" "skipped: the plan's time limit"
check plan-time-big 0 "$ZBPP" plan -p 8 -m 16 --time-limit 60
check plan-time-bad 2 "$ZBPP" plan -p 8 -m 16 --time-limit -1
# the exact solver's size cap is the same in plan and schedule (P*M <= 64)
check plan-opt-cap 0 "$ZBPP" plan -p 4 -m 17
has plan-opt-cap "$TMP/out" 'max 64'
check schedule-opt-cap 2 "$ZBPP" schedule -s optimal -p 4 -m 17
has schedule-opt-cap "$TMP/err" 'max 64'
exit $fail
