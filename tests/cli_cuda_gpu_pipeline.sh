#!/usr/bin/env bash
# zbpp train --device cuda --ranks P on a GPU (label gpu; issue 13; exit 77 "skipped: no CUDA
# device" elsewhere). A small GPT-2 (L=4, NH=4, C=64, T=32, B=8 in 4 microbatches, constant lr):
#  - the run prints its GPUs and SM partitions (even split; --sm-per-rank 16: 4 x 16 SMs);
#  - every schedule given here writes the same checkpoint bytes as 1F1B (ranks in partitions of
#    the same size), and --gpu-messages device the same bytes as host staging;
#  - 2 steps on the GPU pipeline + 2 resumed on the CPU pipeline are within 1e-4 of the straight
#    GPU run at every step, and the reverse;
#  - --trace writes the measured trace files.
# usage: cli_cuda_gpu_pipeline.sh <zbpp binary> <source dir>
set -u
ZBPP=$1
SRC=$2
SHAPE=(--layers 4 --heads 4 --channels 64)
RUN=(--seq 32 --batch 8 --microbatches 4 --lr 1e-3 --lr-schedule constant --text "$SRC/data/demo_corpus.txt")

PROBE=(--device cuda --ranks 2)
source "$(dirname "$0")/cuda_gpu_common.inc"

train p2 --steps 4 --device cuda --ranks 2 --schedule 1f1b --save "$TMP/p2.ckpt"
grep -m1 "pipeline on cuda:" "$TMP/p2.err" && grep -q "SM partitions: 2 ranks x" "$TMP/p2.err" ||
  fail "no partition line: $(cat "$TMP/p2.err")"
train k16 --steps 1 --device cuda --ranks 4 --sm-per-rank 16
grep -q "4 ranks x 16 SMs" "$TMP/k16.err" || fail "--sm-per-rank 16 not in: $(cat "$TMP/k16.err")"
for sched in gpipe zb-h1 zb-h2; do
  train "p2_$sched" --steps 4 --device cuda --ranks 2 --schedule $sched --save "$TMP/p2_$sched.ckpt"
  cmp -s "$TMP/p2.ckpt" "$TMP/p2_$sched.ckpt" && echo "$sched: the same checkpoint as 1f1b" ||
    fail "$sched checkpoint differs from 1f1b's"
done
train d2d --steps 4 --device cuda --ranks 2 --schedule zb-h1 --gpu-messages device --save "$TMP/d2d.ckpt"
cmp -s "$TMP/p2.ckpt" "$TMP/d2d.ckpt" && echo "device messages: the same checkpoint" ||
  fail "--gpu-messages device changed the bits"
# across devices (pipeline on both sides)
train g2 --steps 2 --device cuda --ranks 2 --schedule zb-h1 --save "$TMP/g2.ckpt"
train c2 --steps 2 --ranks 2 --schedule zb-h1 --save "$TMP/c2.ckpt"
train c4 --steps 4 --ranks 2 --schedule zb-h1
cp "$TMP/g2.jsonl" "$TMP/gc.jsonl" && train gc --steps 4 --ranks 2 --schedule zb-h1 --resume "$TMP/g2.ckpt"
compare gc p2 rel 1e-4 "2 steps GPU pipeline + 2 CPU pipeline vs 4 GPU"
cp "$TMP/c2.jsonl" "$TMP/cg.jsonl" && train cg --steps 4 --device cuda --ranks 2 --schedule zb-h1 --resume "$TMP/c2.ckpt"
compare cg c4 rel 1e-4 "2 steps CPU pipeline + 2 GPU pipeline vs 4 CPU"
train tr --steps 2 --device cuda --ranks 2 --schedule zb-h1 --trace "$TMP/tr.json"
ls "$TMP"/tr* >/dev/null 2>&1 && grep -E "bubble" "$TMP/tr.out" || fail "--trace wrote nothing"
[ "$fails" -eq 0 ] || exit 1
echo "cli_cuda_gpu_pipeline: ok"
