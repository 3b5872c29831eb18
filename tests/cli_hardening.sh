#!/usr/bin/env bash
# Hangs, lost runs and misleading messages found by trying zbpp as a new user and with hostile
# files and flags. Each block failed (or hung) before its fix; every command runs under a timeout.
# usage: cli_hardening.sh <zbpp binary> <source dir>
set -u
ZBPP=$(readlink -f "$1")
SRC=$(readlink -f "${2:-.}")
T=$(mktemp -d "${TMPDIR:-/tmp}/zbpp-hard.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
cd "$T" || exit 1
fails=0
TINY=(--layers 2 --heads 2 --channels 32 --seq 16 --batch 4 --text "$SRC/data/demo_corpus.txt"
      --quiet)

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error <exit code> <text in message> <cmd...>: that exit code and message, within 60 s
expect_error() {
  local want=$1 needle=$2
  shift 2
  timeout 60 "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then fail "exit $rc (want $want) for: $*: $(head -c 400 "$T/err")"; return; fi
  grep -qF -- "$needle" "$T/err" || fail "message lacks '$needle' for: $*: $(cat "$T/err")"
}

# ---- --metrics FIFO nobody reads: refused at once (fopen used to block forever) ----
mkfifo mfifo
expect_error 1 "--metrics mfifo: is a FIFO and nothing reads it" \
  "$ZBPP" train "${TINY[@]}" --steps 2 --metrics mfifo
# ... and one with a reader gets the metrics (the check keeps it open: no early end-of-file)
cat mfifo >metrics_seen & reader=$!
sleep 0.2
timeout 60 "$ZBPP" train "${TINY[@]}" --steps 2 --metrics mfifo 2>"$T/err" ||
  fail "--metrics FIFO with a reader: $(cat "$T/err")"
wait $reader
[ "$(grep -c '"step"' metrics_seen)" -eq 2 ] || fail "the FIFO's reader got: $(cat metrics_seen)"

# ---- --comm-timeout beyond time_t: bounded flag (spun at 100% CPU forever before) ----
expect_error 2 "--comm-timeout expects a number of seconds up to 2592000" \
  "$ZBPP" train "${TINY[@]}" --ranks 2 --microbatches 2 --steps 1 --comm-timeout 1e300
timeout 60 "$ZBPP" train "${TINY[@]}" --ranks 2 --microbatches 2 --steps 1 \
  --comm-timeout 2592000 2>"$T/err" || fail "--comm-timeout 2592000 (the bound): $(cat "$T/err")"

# ---- outputs checked before the first step, not after the last ----
ln -s nowhere/m.bin dangling
mkfifo sfifo
expect_error 1 "--save-model dangling: it is a symlink to a missing file" \
  "$ZBPP" train "${TINY[@]}" --steps 200000 --save-model dangling
expect_error 1 "--save sfifo: is a FIFO and nothing reads it" \
  "$ZBPP" train "${TINY[@]}" --steps 200000 --save sfifo
chmod 0555 "$T" 2>/dev/null
if [ -w "$T" ]; then
  echo "note: running as a user who may write anywhere; unwritable directory not checked"
else
  expect_error 1 "is not writable" "$ZBPP" train "${TINY[@]}" --steps 200000 --save ck.bin
fi
chmod 0755 "$T"
[ -e ck.bin ] && fail "a refused run wrote ck.bin"

# ---- a run that diverges in its last steps: exit non-zero, no files ----
expect_error 1 "training diverged: the loss of step 5 is NaN; nothing saved" \
  "$ZBPP" train --layers 2 --channels 32 --heads 2 --seq 16 --batch 2 --steps 5 --lr 1e10 \
  --text "$SRC/data/demo_corpus.txt" --save d5.bin --save-model d5m.bin
[ -e d5.bin ] || [ -e d5m.bin ] && fail "a diverged run saved $(ls d5*)"

# ---- --keep-last through a symlink keeps real copies; the replaced file keeps its mode ----
echo x >real.bin
chmod 0600 real.bin
ln -s real.bin lnk.bin
timeout 60 "$ZBPP" train "${TINY[@]}" --steps 4 --save lnk.bin --save-every 2 --keep-last 2 \
  2>"$T/err" || fail "--keep-last with a symlink --save: $(cat "$T/err")"
[ -L lnk.bin ] || fail "--save replaced the symlink"
[ -f lnk.bin.step000002 ] && [ ! -L lnk.bin.step000002 ] || fail "kept step 2 is not a file"
cmp -s lnk.bin.step000002 lnk.bin.step000004 && fail "kept steps 2 and 4 are the same file"
cmp -s lnk.bin.step000004 real.bin || fail "kept step 4 differs from the saved file"
[ "$(stat -c %a real.bin)" = 600 ] || fail "replaced 0600 file became $(stat -c %a real.bin)"
expect_error 2 "--keep-last needs --save to be a regular file" \
  "$ZBPP" train "${TINY[@]}" --steps 2 --save /dev/null --save-every 1 --keep-last 2

# ---- generate: a training checkpoint says what it is; diverged weights are refused; the
# README's example (100 tokens from a --seq 64 model) slides its context ----
timeout 120 "$ZBPP" train "${TINY[@]}" --steps 2 --save tr.ck --save-model m.bin 2>"$T/err" ||
  fail "train for generate: $(cat "$T/err")"
timeout 120 "$ZBPP" train "${TINY[@]}" --steps 2 --ranks 2 --microbatches 2 \
  --checkpoint-format sharded --save sh.ck 2>"$T/err" || fail "sharded train: $(cat "$T/err")"
expect_error 2 "sh.ck is a sharded training checkpoint (the manifest of --checkpoint-format sharded), not a model: write the model with \`zbpp train --resume sh.ck --save-model MODEL.bin\`" \
  "$ZBPP" generate --init-from sh.ck
expect_error 2 "tr.ck is a training checkpoint (zbpp train --save), not a model" \
  "$ZBPP" generate --init-from tr.ck
timeout 120 "$ZBPP" train --resume sh.ck --text "$SRC/data/demo_corpus.txt" --quiet \
  --save-model from_sharded.bin 2>"$T/err" || fail "the advised command failed: $(cat "$T/err")"
timeout 60 "$ZBPP" generate --init-from from_sharded.bin --tokens 3 >/dev/null 2>"$T/err" ||
  fail "generate from the advised model: $(cat "$T/err")"
cp m.bin nan.bin
printf '\xff\xff\xff\xff' | dd of=nan.bin bs=1 seek=2048 conv=notrunc status=none
expect_error 1 "nan.bin: 1 of" "$ZBPP" generate --init-from nan.bin --tokens 3
timeout 60 "$ZBPP" generate --init-from m.bin --prompt "Once upon a time" --tokens 100 \
  >long.txt 2>"$T/err" || fail "generate past the model's 16 positions: $(cat "$T/err")"
# 16 prompt bytes + 100 tokens (byte-level: one byte each, or '?'/UTF-8 pieces: at least one)
[ "$(head -c 16 long.txt)" = "Once upon a time" ] || fail "prompt not echoed: $(head -c 40 long.txt)"
timeout 60 "$ZBPP" generate --init-from m.bin --prompt "Once upon a time" --tokens 1 >one.txt
[ "$(head -c 17 one.txt)" = "$(head -c 17 long.txt)" ] ||
  fail "the first token differs between a one-pass and a sliding run"

# ---- the original command plus --resume: agreeing shape flags accepted, differing ones named ----
timeout 60 "$ZBPP" train "${TINY[@]}" --steps 2 --save res.ck 2>"$T/err" || fail "train: $(cat "$T/err")"
timeout 60 "$ZBPP" train "${TINY[@]}" --steps 3 --save res.ck --resume res.ck 2>"$T/err" ||
  fail "resume with the same shape flags refused: $(cat "$T/err")"
expect_error 2 "--channels 48 differs from the model of --resume res.ck (channels 32): leave it out, or give 32" \
  "$ZBPP" train "${TINY[@]/32/48}" --steps 4 --resume res.ck

# ---- schedule-name typos get a suggestion ----
expect_error 2 "unknown schedule family 'zbh1': did you mean zb-h1?" "$ZBPP" schedule -s zbh1 -p 4 -m 8
expect_error 2 "did you mean zb-h1?" "$ZBPP" schedule --schedule zb-hh1 -p 4 -m 8
expect_error 2 "unknown schedule 'zbh2': did you mean zb-h2?" "$ZBPP" train "${TINY[@]}" --ranks 2 --schedule zbh2
"$ZBPP" schedule -s nope -p 4 -m 8 2>"$T/err"
grep -q "did you mean" "$T/err" && fail "a suggestion for a name close to nothing: $(cat "$T/err")"

# ---- the test summary names skipped tests instead of hiding them in "100% passed" ----
printf 'The following tests did not run:\n\t 12 - test_cuda_gpu_ops (Skipped)\n\t 40 - pytorch_load_csv (Skipped)\n\n100%% tests passed, 0 tests failed out of 90\n' >ctest.log
bash "$SRC/scripts/test_summary.sh" ctest.log >summary.txt
grep -q "2 of 90 tests were SKIPPED" summary.txt || fail "summary: $(cat summary.txt)"
grep -q "test_cuda_gpu_ops pytorch_load_csv" summary.txt || fail "summary names: $(cat summary.txt)"

# ---- SVG: the legend fits the chart; arrows are drawn under the microbatch numbers ----
"$ZBPP" schedule -s zb-v -p 4 -m 8 --format svg --arrows -o arrows.svg || fail "svg --arrows"
python3 - arrows.svg <<'PY' || fail "svg layout"
import re, sys
svg = open(sys.argv[1]).read()
w, h = (int(v) for v in re.search(r'<svg [^>]*width="(\d+)" height="(\d+)"', svg).groups())
for x, y, text in re.findall(r'<text x="([\d.]+)" y="([\d.]+)">([^<]*)</text>', svg):
    # ~6 px per character of the 11 px font; the baseline leaves room for descenders
    if float(x) + 6 * len(text) > w or float(y) + 3 > h:
        sys.exit("legend text outside the %dx%d chart: %r at (%s, %s)" % (w, h, text, x, y))
arrows = svg.index('marker-end="url(#zb-arrow)"')
first_number = re.search(r'<text [^>]*font-size="(11|8)">\d+</text>', svg).start()
if first_number < arrows:
    sys.exit("microbatch numbers drawn before (under) the arrows")
PY

# ---- Ctrl-C without --save says that nothing is saved ----
"$ZBPP" train "${TINY[@]}" --steps 1000000 --metrics int.jsonl 2>int.err & run=$!
for _ in $(seq 300); do [ -s int.jsonl ] && break; sleep 0.1; done
kill -INT $run
timeout 60 tail --pid=$run -f /dev/null
wait $run
rc=$?
[ "$rc" -eq 130 ] || fail "Ctrl-C exit $rc (want 130)"
grep -q "nothing will be saved (no --save)" int.err || fail "Ctrl-C without --save: $(cat int.err)"

# ---- a model shorter than the default --seq: the message says the 64 is the default, not a flag ----
expect_error 2 "sequence length 64 (--seq, default 64) exceeds the model's maximum sequence length 16: give --seq 16 or less" \
  "$ZBPP" train --init-from m.bin --text "$SRC/data/demo_corpus.txt" --steps 1 --quiet

[ "$fails" -eq 0 ] && echo "cli_hardening: all passed"
exit $((fails > 0))
