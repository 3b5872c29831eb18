#!/usr/bin/env bash
# zbpp train: --keep-last rotation from the command line (single process and --ranks 2), and
# pipeline flags at --ranks 1 are never silently ignored: --schedule / --trace run the pipeline
# trainer with one rank (same bits, trace files written); --comm-timeout warns.
# usage: cli_train_flags.sh <zbpp binary> <source dir>
set -u
ZBPP=$1
SRC=$2
TMP=$(mktemp -d /tmp/zbpp_cli_train_flags.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
TEXT="$SRC/data/demo_corpus.txt"
TINY=(--layers 2 --heads 2 --channels 32 --seq 16 --batch 4 --microbatches 2 --text "$TEXT"
      --lr-schedule constant)

expect_error() { # <exit> <text in message> <args...>
  local want=$1 needle=$2
  shift 2
  "$ZBPP" train "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  [ "$rc" -eq "$want" ] || { fail "exit $rc (want $want) for: $*"; return; }
  [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "not one stderr line for: $*: $(cat "$TMP/err")"
  grep -qF -- "$needle" "$TMP/err" || fail "message lacks '$needle': $(cat "$TMP/err")"
}
expect_error 2 "--keep-last" "${TINY[@]}" --keep-last 0
# every kind of value, from each of the three flag lists (train's, the pipeline's, the device's),
# says what it expects and what it got, in one line; '=' and unique prefixes work everywhere
expect_error 2 "--steps expects an integer in [0, 4611686018427387903], got 'x'" "${TINY[@]}" --steps x
expect_error 2 "--batch expects an integer in [1, 2147483647], got '0'" "${TINY[@]}" --batch=0
expect_error 2 "--seed expects a non-negative integer, got '-4'" "${TINY[@]}" --seed -4
expect_error 2 "--lr expects a number >= 0, got 'fast'" "${TINY[@]}" --lr fast
expect_error 2 "--peak-tflops expects a positive number, got '0'" "${TINY[@]}" --peak-tflops 0
expect_error 2 "--val-steps expects an integer in [1, 2147483647], got '0'" "${TINY[@]}" --val-ste 0
expect_error 2 "--ranks expects a positive integer, got '0'" "${TINY[@]}" --ranks=0
expect_error 2 "--mem-limit-mb expects a positive number, got '-3'" "${TINY[@]}" --mem-limit-mb -3
expect_error 2 "--partition expects flops or profile, got 'even'" "${TINY[@]}" --partition even
expect_error 2 "--checkpoint-format expects file or sharded, got 'zip'" "${TINY[@]}" --checkpoint-f zip
expect_error 2 "unknown schedule 'zbh1': did you mean zb-h1?" "${TINY[@]}" --schedule zbh1
expect_error 2 "--device: 'gpu' is not cpu, cuda or cuda:N" "${TINY[@]}" --device gpu
expect_error 2 "option --steps needs a value" "${TINY[@]}" --steps
expect_error 2 "unknown option --quiet=1 (it takes no value)" "${TINY[@]}" --quiet=1
expect_error 2 "--keep-last needs --save" "${TINY[@]}" --keep-last 2 --steps 1
expect_error 2 "--keep-last is not available with --checkpoint-format sharded" "${TINY[@]}" \
  --steps 1 --save "$TMP/sh" --save-every 1 --keep-last 1 --checkpoint-format sharded

# --keep-last 2 over 7 steps, saves every 2 and at the end: step 6 and 7 remain
for p in 1 2; do
  d="$TMP/k$p"
  mkdir "$d"
  "$ZBPP" train "${TINY[@]}" --ranks $p --steps 7 --save "$d/ck" --save-every 2 --keep-last 2 \
    --quiet || fail "--keep-last run at --ranks $p"
  [ "$(ls "$d" | tr '\n' ' ')" = "ck ck.step000006 ck.step000007 " ] ||
    fail "--ranks $p: files after --keep-last 2: $(ls "$d" | tr '\n' ' ')"
  cmp -s "$d/ck" "$d/ck.step000007" || fail "--ranks $p: newest link differs from --save"
  # the older one is the step-6 state: resumed for a step it gives the step-7 bytes
  "$ZBPP" train --resume "$d/ck.step000006" --text "$TEXT" --ranks $p --steps 7 --quiet \
    --save "$d/again" || fail "--ranks $p: resume of ck.step000006"
  cmp -s "$d/again" "$d/ck" || fail "--ranks $p: ck.step000006 is not the step-6 state"
done
echo "ok: --keep-last 2 keeps the two newest checkpoints (--ranks 1 and 2)"

# --schedule and --trace at --ranks 1: the pipeline trainer runs them (one rank), same bits
"$ZBPP" train "${TINY[@]}" --steps 3 --quiet --save "$TMP/ref" || fail "reference"
"$ZBPP" train "${TINY[@]}" --steps 3 --schedule zb-v --trace "$TMP/t.json" --save "$TMP/v" \
  >"$TMP/out" 2>"$TMP/err" || fail "--schedule zb-v at --ranks 1: $(cat "$TMP/err")"
grep -q "^pipeline: zb-v, P=1 v=2" "$TMP/out" || fail "zb-v at --ranks 1 did not run: $(head -2 "$TMP/out")"
for f in t.json t.predicted.json t.svg t.predicted.svg; do
  [ -s "$TMP/$f" ] || fail "--trace at --ranks 1 wrote no $f"
done
cmp -s "$TMP/ref" "$TMP/v" || fail "zb-v at --ranks 1 differs from the single-process trainer"
"$ZBPP" train "${TINY[@]}" --steps 1 --quiet --comm-timeout 5 2>"$TMP/err" || fail "--comm-timeout run"
grep -q "warning: --comm-timeout has no effect" "$TMP/err" || fail "no warning for --comm-timeout"
echo "ok: --schedule/--trace at --ranks 1 run the pipeline; --comm-timeout warns"

[ "$fails" -eq 0 ] && echo "cli_train_flags: all passed"
exit $((fails > 0))
