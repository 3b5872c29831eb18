#!/usr/bin/env bash
# CLI: --offload none|all|auto and the copy costs on schedule, plan, simulate and validate;
# O/L through the CSV file round trip; train on CPU ranks refusing offload in one line (GPU ranks
# run it: test_cuda_fake_pipeline, test_cuda_gpu_pipeline).
# Usage: bash cli_offload.sh <zbpp binary> <source dir>
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
lines() { # name, file, expected line count
    local n; n=$(wc -l <"$2")
    if [ "$n" -ne "$3" ]; then echo "FAIL $1: $n lines in $2, want $3:"; cat "$2"; fail=1; fi
}
makespan() { sed -n 's/^makespan \([0-9.e+-]*\),.*/\1/p' "$1"; }
# copies of 0.125 (1 byte at 8 bytes per time unit); a B frees 0.6 of its F's memory
COSTS=(--cost 1,1,1,0.1 --mem 1,-0.6,-0.4 --stash-bytes 1 --copy-bw 8)

# all: O/L in the CSV, hidden behind the compute (same makespan as without)
check all 0 "$ZBPP" schedule -s zb-h1 -p 4 -m 8 "${COSTS[@]}" --offload all
has all "$TMP/out" 'r0 O |'
plain_all=$(makespan "$TMP/out")
check plain 0 "$ZBPP" schedule -s zb-h1 -p 4 -m 8 "${COSTS[@]}"
[ "$(makespan "$TMP/out")" = "$plain_all" ] || { echo "FAIL all: makespan $plain_all"; fail=1; }
check all-csv 0 "$ZBPP" schedule -s zb-h1 -p 4 -m 8 "${COSTS[@]}" --offload all --format csv
has all-csv "$TMP/out" '0O0' && has all-csv "$TMP/out" '0L0'
cp "$TMP/out" "$TMP/o.csv"
# the file reads back, validates and simulates with the same copy costs
check file-validate 0 "$ZBPP" validate "$TMP/o.csv" --mem 1,-0.6,-0.4 --mem-limit 3.4 \
    --stash-bytes 1 --copy-bw 8
check file-sim 0 "$ZBPP" simulate "$TMP/o.csv" "${COSTS[@]}" --format json
has file-sim "$TMP/out" '"offloads": 24'
has file-sim "$TMP/out" '"offload": \[0.125'
check file-trace 0 "$ZBPP" simulate "$TMP/o.csv" "${COSTS[@]}" --format trace
has file-trace "$TMP/out" '"cat": "copy"'
check file-svg 0 "$ZBPP" simulate "$TMP/o.csv" "${COSTS[@]}" --format svg
has file-svg "$TMP/out" 'O offload (to host)'
# a limit only offload meets: plain zb-h1 fails, auto fits at the same makespan
check plain-limit 1 "$ZBPP" schedule -s zb-h1 -p 4 -m 8 "${COSTS[@]}" --mem-limit 3.2
check auto 0 "$ZBPP" schedule -s zb-h1 -p 4 -m 8 "${COSTS[@]}" --mem-limit 3.2 --offload auto
has auto-note "$TMP/err" 'offload auto: .* 0 recomputed'
[ "$(makespan "$TMP/out")" = "$plain_all" ] || { echo "FAIL auto: makespan"; fail=1; }
# lower, auto recomputes some stashes too; far too low, one line and exit 1
check auto-low 0 "$ZBPP" schedule -s zb-h1 -p 4 -m 8 "${COSTS[@]}" --mem-limit 2.5 --offload auto
check auto-none 1 "$ZBPP" schedule -s zb-h1 -p 4 -m 8 "${COSTS[@]}" --mem-limit 0.5 --offload auto
has auto-none "$TMP/err" 'still needs'
lines auto-none "$TMP/err" 1
# plan: +O rows
check plan 0 "$ZBPP" plan -p 4 -m 8 "${COSTS[@]}" --mem-limit 2.5 --offload auto
has plan "$TMP/out" 'zb-h1+O'
has plan-note "$TMP/out" '(offload auto:'
check plan-json 0 "$ZBPP" plan -p 4 -m 8 "${COSTS[@]}" --mem-limit 2.5 --offload all --format json
has plan-json "$TMP/out" '"zb-v+O"'
# bad usage: one line, exit 2
for bad in "--offload most" "--copy-bw -1" "--copy-bw 1,2,3" "--stash-bytes x" "--copy-latency inf"; do
    # shellcheck disable=SC2086
    check "bad $bad" 2 "$ZBPP" schedule -s zb-h1 -p 2 -m 2 $bad
    lines "bad $bad" "$TMP/err" 1
done
check combine 2 "$ZBPP" schedule -s zb-h1 -p 2 -m 2 --offload all --recompute all
has combine "$TMP/err" 'cannot be combined'
# a malformed O/L file: one line naming the action
printf '0F0,0L0,0O0,0F1,0I0,0W0,0I1,0W1\n1F0,1F1,1I0,1W0,1I1,1W1\n' >"$TMP/bad.csv"
check bad-file 1 "$ZBPP" validate "$TMP/bad.csv"
has bad-file "$TMP/err" 'L(stage 0, mb 0) comes before its O'
# train on the CPU: refused in one line, before any work
TINY=(--layers 2 --heads 2 --channels 32 --seq 16 --batch 4 --steps 1 --quiet)
check train-flag 2 "$ZBPP" train "${TINY[@]}" --offload all
has train-flag "$TMP/err" 'no second memory'
lines train-flag "$TMP/err" 1
check train-none 2 "$ZBPP" train --offload some
lines train-none "$TMP/err" 1
"$ZBPP" schedule -s zb-h1 -p 2 -m 2 --offload all --format csv >"$TMP/o2.csv"
check train-file 2 "$ZBPP" train "${TINY[@]}" \
    --schedule-file "$TMP/o2.csv"
has train-file "$TMP/err" 'offload (O/L) actions'
lines train-file "$TMP/err" 1
exit $fail
