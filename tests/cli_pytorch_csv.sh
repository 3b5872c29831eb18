#!/usr/bin/env bash
# PyTorch's own shapes and dumps from the command line: interleaved 1F1B with M not a multiple of
# P, LoopedBFS by its class name, and runtime-lowered dumps (FSDP actions dropped with a note on
# stderr, DualPipeV OVERLAP_F_B cells read as their actions).
# usage: cli_pytorch_csv.sh <zbpp binary> <source dir>
set -euo pipefail
Z=$(readlink -f "$1")
SRC=$(readlink -f "$2")
FX="$SRC/tests/fixtures"
fail() { echo "FAIL: $*"; exit 1; }

"$Z" schedule -s Interleaved1F1B -p 4 -m 6 -v 2 >/dev/null || fail "interleaved M=6 P=4 refused"
"$Z" schedule -s interleaved-zb -p 3 -m 7 -v 3 >/dev/null || fail "interleaved-zb M=7 P=3 refused"
"$Z" schedule -s ScheduleLoopedBFS -p 4 -m 8 -v 2 >/dev/null || fail "LoopedBFS refused"

err=$("$Z" validate "$FX/pytorch_fsdp_lowered_p2_v2_m2.csv" 2>&1 >/dev/null)
printf '%s\n' "$err" | grep -q "ignored 12 UNSHARD/RESHARD/REDUCE_GRAD actions" ||
    fail "no FSDP note: $err"
err=$("$Z" simulate "$FX/pytorch_dualpipev_overlap_p2_m4.csv" 2>&1 >/dev/null)
printf '%s\n' "$err" | grep -q "read 6 OVERLAP_F_B cells" || fail "no OVERLAP_F_B note: $err"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# a file without such cells prints no note
"$Z" schedule -s 1f1b -p 2 -m 2 --format csv -o "$tmp"
err=$("$Z" validate "$tmp" 2>&1 >/dev/null)
[ -z "$err" ] || fail "unexpected note: $err"
# a malformed composite is one line and a non-zero exit
printf '0F0,(0F1;0B0\n' >"$tmp"
set +e
err=$("$Z" validate "$tmp" 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" != 0 ] || fail "malformed composite accepted"
[ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || fail "not one line: $err"
printf '%s\n' "$err" | grep -q "never closes" || fail "message: $err"
echo ok
