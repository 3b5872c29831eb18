#!/usr/bin/env bash
# zbpp generate: train a tiny model on demo text for a few steps with --save-model, then sample:
# the prompt is echoed, a seed repeats its text, --ranks 2 gives the same text as one process,
# top-k 1 equals greedy, an llm.c tokenizer file describing the byte vocabulary decodes the same
# text; bad flags and bad files give one line "zbpp generate: ..." and a non-zero exit.
# Usage: cli_generate.sh <zbpp-binary> <source-dir>
set -u
ZBPP=$(readlink -f "$1")
SRC=$(readlink -f "${2:-.}")
T=$(mktemp -d "${TMPDIR:-/tmp}/zbpp-gen.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
export OPENBLAS_NUM_THREADS=1

head -c 20000 "$SRC/data/demo_corpus.txt" >small.txt
if ! "$ZBPP" train --text small.txt --steps 8 --seq 16 --max-seq 48 --batch 4 --layers 2 \
     --channels 32 --heads 2 --lr 3e-3 --quiet --save-model m.bin >train.out 2>&1; then
  cat train.out; echo "FAIL: train with --save-model"; exit 1
fi

gen() { "$ZBPP" generate --init-from m.bin "$@"; }
gen --prompt "The " --tokens 30 --seed 7 >a.txt 2>err || fail "generate: exit $? $(cat err)"
[ "$(head -c 4 a.txt)" = "The " ] || fail "output does not start with the prompt: $(cat a.txt)"
[ "$(wc -c <a.txt)" -gt 30 ] || fail "expected the prompt and 30 tokens: $(cat a.txt)"
gen --prompt "The " --tokens 30 --seed 7 >b.txt 2>/dev/null
cmp -s a.txt b.txt || fail "the same seed gave different text"
gen --prompt "The " --tokens 30 --seed 8 >c.txt 2>/dev/null
cmp -s a.txt c.txt && fail "another seed gave the same text"
gen --prompt "The " --tokens 30 --seed 7 --ranks 2 >r.txt 2>err || fail "--ranks 2: $(cat err)"
cmp -s a.txt r.txt || fail "--ranks 2 differs from one process"
gen --prompt "The " --tokens 20 --temperature 0 >g.txt 2>/dev/null
gen --prompt "The " --tokens 20 --top-k 1 --seed 3 >k.txt 2>/dev/null
cmp -s g.txt k.txt || fail "--top-k 1 differs from --temperature 0"
# no prompt: starts from the end-of-text token; the full window (48 positions) is allowed
gen --tokens 48 --seed 1 >n.txt 2>err || fail "no prompt, 48 tokens: $(cat err)"
[ -s err ] && fail "a full window is not a sliding one: $(cat err)"
# past the window the context slides: the text of one pass while it fits, the same with ranks
gen --prompt "abcd" --tokens 130 --seed 5 >s1.txt 2>err || fail "130 tokens past 48: $(cat err)"
grep -q "the context slides (the last 24 tokens are kept" err || fail "no sliding note: $(cat err)"
gen --prompt "abcd" --tokens 45 --seed 5 >s0.txt 2>/dev/null
[ "$(head -c 49 s0.txt)" = "$(head -c 49 s1.txt)" ] || fail "sliding changed the first window's text"
gen --prompt "abcd" --tokens 130 --seed 5 --ranks 2 >s2.txt 2>/dev/null || fail "sliding --ranks 2"
cmp -s s1.txt s2.txt || fail "sliding with --ranks 2 differs from one process"

# an llm.c tokenizer file for the byte vocabulary (token b = byte b, 256 = <|endoftext|>)
python3 - <<'PY'
import struct
def write(name, magic=20240328, version=2, vocab=257, eot=256, n=257):
    with open(name, "wb") as f:
        f.write(struct.pack("<256I", magic, version, vocab, eot, *([0] * 252)))
        for i in range(n):
            b = bytes([i]) if i < 256 else b"<|endoftext|>"
            f.write(bytes([len(b)]) + b)
write("tok.bin")
write("badmagic.bin", magic=20240326)
write("small.bin", vocab=200, eot=199, n=200)
write("short.bin", n=100)
PY
gen --tokenizer tok.bin --prompt "The " --tokens 30 --seed 7 >t.txt 2>err || fail "--tokenizer: $(cat err)"
cmp -s a.txt t.txt || fail "--tokenizer with the byte vocabulary decodes differently"

bad() { # NAME EXPECTED-RC PATTERN ARGS...
  local name=$1 want=$2 pat=$3; shift 3
  "$ZBPP" generate "$@" >out 2>err
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "$name: exit $rc, expected $want ($(cat err))"
  [ "$(wc -l <err)" -eq 1 ] || fail "$name: expected one error line, got: $(cat err)"
  grep -q "^zbpp generate: .*$pat" err || fail "$name: message lacks '$pat': $(cat err)"
}
bad no-model 2 "--init-from" --prompt hi
bad missing-model 1 "nope.bin" --init-from nope.bin
bad model-bad-magic 1 "bad magic" --init-from tok.bin
bad temp-nan 2 "temperature" --init-from m.bin --temperature nan
bad temp-neg 2 "temperature" --init-from m.bin --temperature -1
bad temp-word 2 "temperature" --init-from m.bin --temperature hot
bad topk-big 2 "top-k" --init-from m.bin --top-k 1000
bad tokens-zero 2 "tokens" --init-from m.bin --tokens 0
bad ranks 2 "blocks" --init-from m.bin --ranks 3
bad seed 2 "seed" --init-from m.bin --seed -4
bad unknown 2 "unknown option" --init-from m.bin --frobnicate 1
bad operand 2 "unexpected argument" --init-from m.bin extra
bad no-value 2 "needs a value" --init-from m.bin --tokens
bad tok-missing 1 "nope.tok" --init-from m.bin --tokenizer nope.tok
bad tok-magic 1 "bad magic" --init-from m.bin --tokenizer badmagic.bin
bad tok-vocab 1 "200 tokens but the model's vocabulary is 257" --init-from m.bin --tokenizer small.bin
bad tok-short 1 "cannot hold 257 tokens" --init-from m.bin --tokenizer short.bin

# train --sample-every: one line per N steps on the progress stream (also with --quiet), the
# same text through 2 pipeline ranks as in one process (the parameters are the same bits)
TINY=(--text small.txt --steps 4 --seq 16 --batch 4 --layers 2 --channels 32 --heads 2 --quiet)
"$ZBPP" train "${TINY[@]}" --sample-every 2 --sample-tokens 12 >/dev/null 2>s1.txt ||
  fail "train --sample-every: $(cat s1.txt)"
[ "$(grep -c '^sample after step [24]: ' s1.txt)" -eq 2 ] || fail "expected 2 samples: $(cat s1.txt)"
"$ZBPP" train "${TINY[@]}" --sample-every 2 --sample-tokens 12 --ranks 2 >/dev/null 2>s2.txt ||
  fail "train --sample-every --ranks 2: $(cat s2.txt)"
cmp -s s1.txt s2.txt || fail "samples differ between 1 and 2 ranks: $(cat s1.txt s2.txt)"
"$ZBPP" train "${TINY[@]}" --sample-every -1 >/dev/null 2>err && fail "--sample-every -1 accepted"
grep -q "sample-every" err || fail "--sample-every -1: $(cat err)"

[ "$fails" -eq 0 ] || { echo "cli_generate: $fails failure(s)"; exit 1; }
echo "cli_generate: PASS"
