#!/usr/bin/env bash
# zbpp train validation and metrics from the command line: bad --val-* input gives one line and
# exit 2; the val loss is printed and written as val_loss on the validated steps, with the same
# bits at --ranks 1, 2 and 4 (threads); mfu against --peak-tflops, else the CPU's measured peak;
# the metrics "step" is numbered like the console.
# usage: cli_val.sh <zbpp binary> <source dir>
set -u
ZBPP=$1
SRC=$2
TMP=$(mktemp -d /tmp/zbpp_cli_val.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
TEXT="$SRC/data/demo_corpus.txt"
M=(--text "$TEXT" --layers 4 --channels 32 --heads 2 --batch 8 --seq 16 --microbatches 4
   --steps 4 --val-text "$TEXT" --val-every 2 --val-steps 3)

expect_error() { # <text in message> <args...>
  local needle=$1
  shift
  "$ZBPP" train "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  [ "$rc" -eq 2 ] || { fail "exit $rc (want 2) for: $*"; return; }
  [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "not one stderr line for: $*: $(cat "$TMP/err")"
  grep -qF -- "$needle" "$TMP/err" || fail "message lacks '$needle': $(cat "$TMP/err")"
}
expect_error "--val-every needs --val-data" --text "$TEXT" --val-every 2
expect_error "either --val-data or --val-text" --val-data "$TMP/x_*.bin" --val-text "$TEXT"
expect_error "--val-steps" --val-text "$TEXT" --val-steps 0
expect_error "--peak-tflops" --peak-tflops 0
"$ZBPP" train --text "$TEXT" --val-text "$TMP/nope.txt" --steps 1 --quiet 2>"$TMP/err"
[ $? -eq 1 ] && grep -q "^zbpp train: --val-text: .*nope.txt" "$TMP/err" ||
  fail "a missing --val-text file: $(cat "$TMP/err")"

vals() { grep -o '"step":[0-9]*,"loss":[^,]*,"val_loss":[^,]*' "$1"; }
for p in 1 2 4; do
  "$ZBPP" train "${M[@]}" --ranks $p --metrics "$TMP/r$p.jsonl" >"$TMP/out$p" 2>"$TMP/err$p" ||
    fail "--ranks $p: $(cat "$TMP/err$p")"
  grep -q '^val loss [0-9.]* (3 batches)$' "$TMP/out$p" || fail "--ranks $p prints no val loss"
  [ "$(grep -c 'val loss' "$TMP/err$p")" -eq 2 ] || fail "--ranks $p: progress shows no val loss"
done
[ "$(vals "$TMP/r1.jsonl" | wc -l)" -eq 2 ] || fail "want val_loss on 2 steps: $(cat "$TMP/r1.jsonl")"
vals "$TMP/r1.jsonl" | grep -q '^"step":2,' || fail "first val_loss is not on step 2"
for p in 2 4; do
  [ "$(vals "$TMP/r1.jsonl")" = "$(vals "$TMP/r$p.jsonl")" ] || fail "--ranks $p val loss differs"
done
[ "$(grep -o '^val loss.*' "$TMP/out1")" = "$(grep -o '^val loss.*' "$TMP/out4")" ] ||
  fail "printed val loss differs"
# --val-data: the demo text as an llm.c shard (byte tokens) gives the same val loss as --val-text
python3 - "$TEXT" "$TMP/val.bin" <<'PY'
import struct, sys
toks = []
for i, part in enumerate(open(sys.argv[1], "rb").read().split(b"<|endoftext|>")):
    toks += ([256] if i else []) + list(part)  # the byte tokenizer's end-of-text token
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
    f.write(struct.pack(f"<{len(toks)}H", *toks))
PY
D=("${M[@]:0:16}" --val-data "$TMP/val.bin" --val-every 2 --val-steps 3)
"$ZBPP" train "${D[@]}" --ranks 2 --metrics "$TMP/d.jsonl" >/dev/null 2>"$TMP/err" ||
  fail "--val-data run: $(cat "$TMP/err")"
[ "$(vals "$TMP/r1.jsonl")" = "$(vals "$TMP/d.jsonl")" ] || fail "--val-data val loss differs"

# elapsed time and ETA on the progress line
grep -q '^step 1/4 .* elapsed, ETA ' "$TMP/err1" || fail "no elapsed/ETA: $(head -1 "$TMP/err1")"

# metrics: step 1..4; mfu against this CPU's measured FMA peak without --peak-tflops (named in
# the report, shown on the progress line), against the given peak with it
[ "$(grep -o '^{"step":[0-9]*' "$TMP/r1.jsonl" | tr -d '{"step:' | tr '\n' ' ')" = "1 2 3 4 " ] ||
  fail "metrics steps are not 1..4"
[ "$(grep -c '"mfu":[0-9][0-9.e+-]*,' "$TMP/r1.jsonl")" -eq 4 ] || fail "no measured-peak mfu in the metrics"
grep -q '^step 1/4 .* tok/s  mfu [0-9.]*%  ' "$TMP/err1" || fail "no mfu on the progress line: $(head -1 "$TMP/err1")"
for p in 1 2; do
  grep -q '^model FLOPs: .*, mfu [0-9.]*% of [0-9.e+-]* TFLOP/s (measured fp32 FMA peak of [0-9]* cores\?;' "$TMP/out$p" ||
    fail "--ranks $p: no measured-peak mfu line: $(grep FLOPs "$TMP/out$p")"
done
"$ZBPP" train --text "$TEXT" --steps 2 --peak-tflops 0.5 >"$TMP/out" 2>/dev/null
grep -q '^model FLOPs: .*, mfu [0-9.]*% of 0.5 TFLOP/s (--peak-tflops)$' "$TMP/out" || fail "no mfu line: $(cat "$TMP/out")"
"$ZBPP" train --text "$TEXT" --steps 2 --quiet --peak-tflops 0.5 --metrics "$TMP/p.jsonl" ||
  fail "--peak-tflops run"
[ "$(grep -c '"mfu":[0-9][0-9.e+-]*,' "$TMP/p.jsonl")" -eq 2 ] || fail "no mfu: $(cat "$TMP/p.jsonl")"
grep -q '"tflops":[0-9.]*,' "$TMP/p.jsonl" || fail "no tflops field"

[ "$fails" -eq 0 ] && echo "cli_val: all passed"
exit $((fails > 0))
