#!/usr/bin/env bash
# CLI: --recompute none|all|auto, --mem-recompute, --recompute-time on schedule, plan, simulate
# and validate — output, errors and exit codes.
# Usage: bash cli_recompute.sh <zbpp binary> <source dir>
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
makespan() { sed -n 's/^makespan \([0-9.e+-]*\),.*/\1/p' "$1"; }
COSTS=(--cost 1,1,0.6,0.05 --mem 1,-0.5,-0.5)

# all on a fixed family: an R per (stage, mb) in the CSV dialect and the JSON summary
check all-csv 0 "$ZBPP" schedule -s 1f1b -p 4 -m 8 --recompute all --format csv
has all-csv "$TMP/out" '0R0'
cp "$TMP/out" "$TMP/r.csv"
check all-json 0 "$ZBPP" schedule -s zb-h1 -p 4 -m 8 --recompute all --mem-recompute 0.1 --format json
has all-json "$TMP/out" '"recomputes"'
# auto: below every no-recompute schedule's need only recompute fits
check plain-too-low 1 "$ZBPP" schedule -s auto -p 4 -m 8 "${COSTS[@]}" --mem-limit 0.9 --any-placement
has plain-too-low "$TMP/err" 'below the minimum'
check auto-low 0 "$ZBPP" schedule -s auto -p 4 -m 8 "${COSTS[@]}" --mem-limit 0.9 --any-placement \
    --recompute auto --mem-recompute 0.1 --format csv
has auto-low "$TMP/out" 'R'
has auto-low-note "$TMP/err" 'recompute'
check auto-all 0 "$ZBPP" schedule -s auto -p 4 -m 8 "${COSTS[@]}" --mem-limit 2 --recompute all \
    --mem-recompute 0.1
# bad values: one line, exit 2
check auto-fixed 2 "$ZBPP" schedule -s 1f1b -p 4 -m 8 --recompute auto
has auto-fixed "$TMP/err" 'needs the auto family'
check bad-mode 2 "$ZBPP" schedule -s 1f1b -p 4 -m 8 --recompute some
has bad-mode "$TMP/err" 'none, all or auto'
check keep-negative 2 "$ZBPP" schedule -s 1f1b -p 4 -m 8 --recompute all --mem-recompute -0.1
has keep-negative "$TMP/err" 'negative'
check keep-too-big 2 "$ZBPP" schedule -s 1f1b -p 4 -m 8 --recompute all --mem-recompute 1.5
has keep-too-big "$TMP/err" "more than an F's memory"
check time-negative 2 "$ZBPP" schedule -s 1f1b -p 4 -m 8 --recompute all --recompute-time -1
check time-nan 2 "$ZBPP" schedule -s 1f1b -p 4 -m 8 --recompute all --recompute-time nan
for f in "$TMP/err"; do
    if [ "$(wc -l <"$f")" -ne 1 ]; then echo "FAIL one-line: $(cat "$f")"; fail=1; fi
done

# simulate: the R time counts; --recompute all on a plain file adds the R's
check sim-r0 0 "$ZBPP" simulate "$TMP/r.csv" --recompute-time 0
t0=$(makespan "$TMP/out")
check sim-r2 0 "$ZBPP" simulate "$TMP/r.csv" --recompute-time 2
t2=$(makespan "$TMP/out")
if ! awk -v a="$t0" -v b="$t2" 'BEGIN {exit !(a + 0 < b + 0)}'; then
    echo "FAIL sim-rtime: makespan $t0 (R=0) not below $t2 (R=2)"; fail=1
fi
check plain-csv 0 "$ZBPP" schedule -s 1f1b -p 4 -m 8 --format csv -o "$TMP/p.csv"
check sim-all 0 "$ZBPP" simulate "$TMP/p.csv" --recompute all --format csv
has sim-all "$TMP/out" '0R7'
check sim-twice 2 "$ZBPP" simulate "$TMP/r.csv" --recompute all
has sim-twice "$TMP/err" 'already'
check sim-auto 2 "$ZBPP" simulate "$TMP/p.csv" --recompute auto
# validate: 1F1B+R keeps 4 x 0.1 and rebuilds one microbatch: peak 1.3
check val-fits 0 "$ZBPP" validate "$TMP/r.csv" --mem-recompute 0.1 --mem-limit 1.3
check val-over 1 "$ZBPP" validate "$TMP/r.csv" --mem-recompute 0.1 --mem-limit 1.2
check val-keep 2 "$ZBPP" validate "$TMP/r.csv" --mem-recompute 3

# plan: recompute variants beside the others
check plan-all 0 "$ZBPP" plan -p 4 -m 17 "${COSTS[@]}" --mem-limit 2 --recompute all \
    --mem-recompute 0.1 --time-limit 20
has plan-all "$TMP/out" '1f1b+R'
has plan-all-auto "$TMP/out" 'auto+R'
check plan-low 0 "$ZBPP" plan -p 4 -m 17 "${COSTS[@]}" --mem-limit 0.9 --recompute auto \
    --mem-recompute 0.1 --time-limit 20 --format json
has plan-low "$TMP/out" '"family": "auto+R", "fits": true'
exit $fail
