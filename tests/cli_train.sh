#!/usr/bin/env bash
# zbpp train from the command line: bad input gives one line "zbpp train: ..." and exit 2 (usage)
# or 1 (files); a run writes metrics; save + resume equals a straight run byte for byte; the
# demo text and the same text as an llm.c shard train identically.
# usage: cli_train.sh <zbpp binary> <source dir>
set -u
ZBPP=$1
SRC=$2
TMP=$(mktemp -d /tmp/zbpp_cli_train.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fails=0
TINY=(--layers 2 --heads 2 --channels 32 --seq 16 --batch 4 --text "$SRC/data/demo_corpus.txt")

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error <exit code> <text in message> <args...>
expect_error() {
  local want=$1 needle=$2
  shift 2
  "$ZBPP" train "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$TMP/err")
  if [ "$rc" -ne "$want" ]; then fail "exit $rc (want $want) for: $*"; cat "$TMP/err"; return; fi
  if [ "$lines" -ne 1 ]; then fail "$lines stderr lines for: $*"; cat "$TMP/err"; return; fi
  grep -q '^zbpp train: ' "$TMP/err" || fail "no 'zbpp train:' prefix for: $*"
  grep -qF -- "$needle" "$TMP/err" || fail "message lacks '$needle' for: $*: $(cat "$TMP/err")"
  [ -s "$TMP/out" ] && fail "stdout not empty on error for: $*"
}

"$ZBPP" train --help | grep -q -- '--microbatches' || fail "--help lacks --microbatches"

expect_error 2 "--batch" --batch abc
expect_error 2 "--batch" --batch -1
expect_error 2 "--batch" --batch 4x
expect_error 2 "--lr" --lr nan
expect_error 2 "--steps" --steps
expect_error 2 "unknown option" --bogus 3
expect_error 2 "unexpected argument" stray
expect_error 2 "linear" --lr-schedule linear
expect_error 2 "divisible" "${TINY[@]}" --batch 6 --microbatches 4
expect_error 2 "maximum sequence length" "${TINY[@]}" --max-seq 8
expect_error 2 "beta2" "${TINY[@]}" --beta2 1.5
expect_error 2 "--save" "${TINY[@]}" --save-every 2
expect_error 2 "either --data or --text" --data "$TMP/x.bin" --text "$TMP/x.txt"
expect_error 2 "takes no value" --quiet=1 --steps 1

# getopt_long like the other commands: --flag=value, and flags after a value, mean the same
"$ZBPP" train "${TINY[@]}" --steps 2 --quiet --save "$TMP/spaced.ckpt" || fail "spaced flags"
"$ZBPP" train --steps=2 --quiet --layers=2 --heads=2 --channels=32 --seq=16 --batch=4 \
  --text="$SRC/data/demo_corpus.txt" --save="$TMP/eq.ckpt" || fail "--flag=value flags"
cmp -s "$TMP/spaced.ckpt" "$TMP/eq.ckpt" || fail "--flag=value trained differently"
"$ZBPP" train --resume="$TMP/eq.ckpt" --steps=3 --quiet --save="$TMP/eq3.ckpt" ||
  fail "--resume=FILE"
"$ZBPP" train --resume "$TMP/spaced.ckpt" --steps 3 --quiet --save "$TMP/sp3.ckpt" ||
  fail "--resume FILE"
cmp -s "$TMP/sp3.ckpt" "$TMP/eq3.ckpt" || fail "--resume=FILE resumed differently"
# outputs are checked before any step runs: no training output, one line naming the flag
expect_error 1 "--trace $TMP/no/t.json: directory $TMP/no does not exist" "${TINY[@]}" --steps 1 \
  --ranks 2 --schedule 1f1b --trace "$TMP/no/t.json"
expect_error 1 "--save $TMP/no/c.ckpt: directory" "${TINY[@]}" --steps 1 --save "$TMP/no/c.ckpt"
expect_error 1 "--metrics $TMP: is a directory" "${TINY[@]}" --steps 1 --metrics "$TMP"
expect_error 1 "--save-model $TMP/no/m.bin: directory" "${TINY[@]}" --steps 1 --save-model "$TMP/no/m.bin"
expect_error 1 "no data file matches" --data "$TMP/nothing_*.bin"
expect_error 1 "nope.txt" --text "$TMP/nope.txt"

# a malformed shard and a shard whose ids exceed the model's vocabulary
head -c 3000 /dev/urandom >"$TMP/garbage.bin"
expect_error 1 "garbage.bin" --data "$TMP/garbage.bin" --layers 1 --channels 16 --heads 2
python3 - "$TMP/big.bin" <<'EOF'
import struct, sys
toks = [300] * 100
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
    f.write(struct.pack(f"<{len(toks)}H", *toks))
EOF
expect_error 1 "vocabulary" --data "$TMP/big.bin" --vocab 257 --layers 1 --channels 16 --heads 2

# a save that cannot be written: exit 1 and no stray file
expect_error 1 "nodir does not exist" "${TINY[@]}" --steps 1 --quiet --save "$TMP/nodir/ck.bin"
[ -e "$TMP/nodir" ] && fail "a failed save left files"

# a real run with metrics: one JSON line per step with the named keys
"$ZBPP" train "${TINY[@]}" --steps 4 --metrics "$TMP/m.jsonl" >"$TMP/out" 2>"$TMP/err" ||
  fail "tiny run failed: $(cat "$TMP/err")"
[ "$(wc -l <"$TMP/m.jsonl")" -eq 4 ] || fail "metrics has $(wc -l <"$TMP/m.jsonl") lines, want 4"
for key in step loss lr grad_norm step_ms tokens_per_s skipped; do
  [ "$(grep -c "\"$key\":" "$TMP/m.jsonl")" -eq 4 ] || fail "metrics lacks $key on some line"
done
[ "$(grep -c '^step ' "$TMP/err")" -eq 4 ] || fail "no plain progress line per step on a non-tty"
grep -q '^trained steps 1..4' "$TMP/out" || fail "no summary line"
"$ZBPP" train "${TINY[@]}" --steps 2 --quiet >"$TMP/out" 2>"$TMP/err"
[ -s "$TMP/out" ] || [ -s "$TMP/err" ] && fail "--quiet still printed"

# save + resume == straight (constant LR so the first leg's --steps does not shape the schedule)
COMMON=("${TINY[@]}" --lr-schedule constant --lr 1e-3 --microbatches 2 --quiet)
"$ZBPP" train "${COMMON[@]}" --steps 6 --save "$TMP/straight.ckpt" --metrics "$TMP/s.jsonl" ||
  fail "straight run failed"
"$ZBPP" train "${COMMON[@]}" --steps 4 --save "$TMP/leg.ckpt" --metrics "$TMP/l.jsonl" ||
  fail "first leg failed"
# resume with no other flags: the checkpoint supplies the settings; the text is given again
"$ZBPP" train --resume "$TMP/leg.ckpt" --text "$SRC/data/demo_corpus.txt" --steps 6 --quiet \
  --save "$TMP/leg.ckpt" --metrics "$TMP/l.jsonl" || fail "resume failed"
cmp -s "$TMP/straight.ckpt" "$TMP/leg.ckpt" || fail "resumed checkpoint differs from straight run"
diff <(sed 's/"step_ms.*//' "$TMP/s.jsonl") <(sed 's/"step_ms.*//' "$TMP/l.jsonl") >/dev/null ||
  fail "resumed losses differ from the straight run"
expect_error 2 "--batch" --resume "$TMP/leg.ckpt" --text "$SRC/data/demo_corpus.txt" --batch 8 --steps 8
expect_error 2 "--layers 3 differs from the model of --resume" --resume "$TMP/leg.ckpt" --layers 3
head -c 1000 "$TMP/leg.ckpt" >"$TMP/trunc.ckpt"
expect_error 1 "truncated" --resume "$TMP/trunc.ckpt" --text "$SRC/data/demo_corpus.txt"

# an llm.c model written by --save-model starts a new run with --init-from (its shape, its weights)
"$ZBPP" train "${TINY[@]}" --steps 3 --quiet --save-model "$TMP/model.bin" || fail "--save-model failed"
"$ZBPP" train --init-from "$TMP/model.bin" --text "$SRC/data/demo_corpus.txt" --seq 16 --batch 4 \
  --steps 1 --metrics "$TMP/i.jsonl" --quiet || fail "--init-from failed"
"$ZBPP" train "${TINY[@]}" --steps 1 --metrics "$TMP/f.jsonl" --quiet || fail "fresh run failed"
loss_init=$(sed 's/.*"loss":\([^,]*\),.*/\1/' "$TMP/i.jsonl")
loss_fresh=$(sed 's/.*"loss":\([^,]*\),.*/\1/' "$TMP/f.jsonl")
[ "$loss_init" != "$loss_fresh" ] || fail "--init-from did not load the trained weights"
expect_error 2 "maximum sequence length" --init-from "$TMP/model.bin" --seq 32 --steps 1
expect_error 2 "fresh model" --init-from "$TMP/model.bin" --channels 64

# the same text as an llm.c shard (written by the corpus generator) trains identically
python3 "$SRC/data/gen_corpus.py" --bytes 30000 --out "$TMP/small.txt" --shard "$TMP/small.bin" ||
  fail "corpus generator failed"
SMALL=(--layers 2 --heads 2 --channels 32 --seq 16 --batch 4 --steps 3 --quiet)
"$ZBPP" train "${SMALL[@]}" --text "$TMP/small.txt" --metrics "$TMP/t.jsonl" || fail "text run failed"
"$ZBPP" train "${SMALL[@]}" --data "$TMP/small.bin" --vocab 257 --metrics "$TMP/d.jsonl" ||
  fail "shard run failed"
diff <(sed 's/"step_ms.*//' "$TMP/t.jsonl") <(sed 's/"step_ms.*//' "$TMP/d.jsonl") >/dev/null ||
  fail "text and shard runs differ"

if [ "$fails" -ne 0 ]; then
  echo "$fails failure(s)"
  exit 1
fi
echo "cli_train: all passed"
