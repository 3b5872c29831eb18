#!/usr/bin/env bash
# Write seed corpora for the file-reader fuzz harnesses: small files made the way the tests make
# them (zbpp itself writes the checkpoints). Usage: make_seeds.sh <zbpp binary> <out dir> <source dir>
# Creates <out>/<harness>/ for llmc, tokshard, text, costfile, trainckpt, manifest, ckptshard, csv,
# tokenizer, metrics.
set -eu
ZBPP=$(readlink -f "$1")
OUT=$(readlink -f "$2")
SRC=$(readlink -f "$3")
mkdir -p "$OUT"/{llmc,tokshard,text,costfile,trainckpt,manifest,ckptshard,csv,tokenizer,metrics}
W=$(mktemp -d "${TMPDIR:-/tmp}/zbpp-seeds.XXXXXX")
trap 'rm -rf "$W"' EXIT
cd "$W"
head -c 3000 "$SRC/data/demo_corpus.txt" >small.txt
TINY=(--layers 2 --heads 2 --channels 16 --seq 8 --batch 2 --text small.txt --quiet)
OPENBLAS_NUM_THREADS=1 "$ZBPP" train "${TINY[@]}" --steps 2 --save ck --save-model model.bin \
  --metrics m.jsonl --val-text small.txt --val-every 1 --val-steps 1 >/dev/null
cp m.jsonl "$OUT/metrics/train.jsonl"
printf '{"step":1,"val_loss":null}\n{"step":2,"loss":3.5,"lr":null}\n\n' >"$OUT/metrics/nulls.jsonl"
OPENBLAS_NUM_THREADS=1 "$ZBPP" train "${TINY[@]}" --steps 2 --ranks 2 --checkpoint-format sharded \
  --save sc >/dev/null
cp model.bin "$OUT/llmc/model.bin"
head -c 1024 model.bin >"$OUT/llmc/header_only.bin"
cp ck "$OUT/trainckpt/ck"
head -c 512 ck >"$OUT/trainckpt/header_only"
cp sc "$OUT/manifest/sc"
i=0
for f in sc.*.rank*; do cp "$f" "$OUT/ckptshard/shard$i"; i=$((i + 1)); done
python3 - "$OUT/tokshard" <<'PY'
import struct, sys, os
d = sys.argv[1]
def shard(name, toks, count=None):
    with open(os.path.join(d, name), "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(toks) if count is None else count, *([0] * 253)))
        f.write(struct.pack(f"<{len(toks)}H", *toks))
shard("ok.bin", [(i * 31) % 257 for i in range(200)])
shard("short.bin", [1, 2, 3])
shard("eot.bin", [256, 10, 256] * 20)
PY
head -c 400 small.txt >"$OUT/text/plain.txt"
printf 'one<|endoftext|>two<|endoftext|>three and more text here for a batch\n' >"$OUT/text/eot.txt"
printf 'stage,F,B,W,C\n0,1,2,1,0.1\n1,1.5,2,1\n' >"$OUT/costfile/two.csv"
printf '# profiled\n0,1,1,1\n1,1,1,1\n2,1,1,1\n3,2,2,2,0.5\n' >"$OUT/costfile/four.csv"
cp "$SRC"/fuzz/corpus/*.csv "$OUT/csv/"
python3 - "$OUT/tokenizer" <<'PY'
import struct, sys, os
d = sys.argv[1]
def tok(name, pieces, version=2, eot=None):
    with open(os.path.join(d, name), "wb") as f:
        e = len(pieces) - 1 if eot is None else eot
        f.write(struct.pack("<256I", 20240328, version, len(pieces), e if version == 2 else 0,
                            *([0] * 252)))
        for p in pieces:
            f.write(bytes([len(p)]) + p)
tok("bytes.bin", [bytes([i]) for i in range(256)] + [b"<|endoftext|>"])
tok("merges.bin", [b"a", b"b", b"ab", b"abc", b"c", b" the", b"<|endoftext|>"])
tok("v1.bin", [b"x", b"y", b"xy"], version=1)
PY
