#!/usr/bin/env bash
# zbpp train --device cuda on a GPU (label gpu; exit 77 "skipped: no CUDA device" elsewhere).
# A small GPT-2 (L=2, NH=4, C=64, T=32, B=8 in 2 microbatches, clipping on, constant lr so a
# 4-step run resumed to 8 is the 8-step run), 10 steps:
#  - fp32: every step's loss within 1e-5 (relative) of the CPU trainer's;
#  - bf16 and tf32: every step within 0.05 of fp32, and the loss falls;
#  - determinism: two fp32 runs write identical checkpoints; 4 steps + resume to 8 on the GPU
#    is the straight 8-step GPU run byte for byte;
#  - device-independent checkpoints: 4 steps on the GPU then 4 on the CPU (and the reverse)
#    within 1e-4 of the straight GPU (CPU) run at every step; --save-model from the GPU is read
#    by --init-from on the CPU;
#  - zbpp profile --device cuda prints its table.
# usage: cli_cuda_gpu_train.sh <zbpp binary> <source dir>
set -u
ZBPP=$1
SRC=$2
SHAPE=(--layers 2 --heads 4 --channels 64)
RUN=(--seq 32 --batch 8 --microbatches 2 --lr 1e-3 --lr-schedule constant --text "$SRC/data/demo_corpus.txt" --quiet)

PROBE=(--device cuda)
source "$(dirname "$0")/cuda_gpu_common.inc"

train cpu --steps 10 --save "$TMP/cpu10.ckpt"
train fp32 --steps 10 --device cuda --save "$TMP/fp32.ckpt" --save-model "$TMP/fp32.bin"
train fp32b --steps 10 --device cuda --save "$TMP/fp32b.ckpt"
train bf16 --steps 10 --device cuda --precision bf16
train tf32 --steps 10 --device cuda --tf32
compare fp32 cpu rel 1e-5 "fp32 cuda vs cpu"
compare bf16 fp32 abs 0.05 "bf16 vs fp32"
compare tf32 fp32 abs 0.05 "tf32 vs fp32"
for p in fp32 bf16 tf32; do
  first=$(losses $p | head -1) last=$(losses $p | tail -1)
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "$p loss did not fall ($first -> $last)"
  echo "$p: step 1 loss $first, step 10 loss $last"
done
cmp -s "$TMP/fp32.ckpt" "$TMP/fp32b.ckpt" && echo "determinism: two fp32 runs, identical checkpoints" ||
  fail "two fp32 cuda runs differ"

# resume: on the GPU bit-exact; across devices within tolerance
train g8 --steps 8 --device cuda --save "$TMP/g8.ckpt"
train c8 --steps 8 --save "$TMP/c8.ckpt"
train g4 --steps 4 --device cuda --save "$TMP/g4.ckpt"
train c4 --steps 4 --save "$TMP/c4.ckpt"
cp "$TMP/g4.jsonl" "$TMP/gg.jsonl" && train gg --steps 8 --device cuda --resume "$TMP/g4.ckpt" --save "$TMP/gg.ckpt"
cmp -s "$TMP/g8.ckpt" "$TMP/gg.ckpt" && echo "resume on cuda: bit-exact" || fail "cuda resume is not bit-exact"
cp "$TMP/g4.jsonl" "$TMP/gc.jsonl" && train gc --steps 8 --resume "$TMP/g4.ckpt"
compare gc g8 rel 1e-4 "4 steps cuda + 4 cpu vs 8 cuda"
cp "$TMP/c4.jsonl" "$TMP/cg.jsonl" && train cg --steps 8 --device cuda --resume "$TMP/c4.ckpt"
compare cg c8 rel 1e-4 "4 steps cpu + 4 cuda vs 8 cpu"
train init --steps 1 --init-from "$TMP/fp32.bin" || fail "--init-from a GPU --save-model"

"$ZBPP" profile --layers 2 --heads 4 --channels 64 --seq 32 --batch 8 --reps 3 --device cuda \
  >"$TMP/prof" 2>&1 || fail "profile --device cuda: $(tail -1 "$TMP/prof")"
grep -q "^block 1 " "$TMP/prof" && head -6 "$TMP/prof" || fail "profile --device cuda printed no table"

if [ "$fails" -ne 0 ]; then
  echo "$fails failure(s)"
  exit 1
fi
echo "cli_cuda_gpu_train: all passed"
