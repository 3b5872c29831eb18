#!/usr/bin/env bash
# zbpp train|profile --device/--precision/--tf32/--fp32-attention on any machine (no GPU needed): bad values and
# combinations give one line "zbpp <cmd>: ..." and exit 2; --device cuda where no CUDA device is
# visible (none here, or hidden with CUDA_VISIBLE_DEVICES=) or in a build without CUDA gives one
# line and exit 1 before anything is trained or written, pipeline ranks (--ranks P) too;
# --transport mpi --gpu-messages device: one line, exit 2; --sm-per-rank K is checked
# (positive, --device cuda, --ranks > 1) and then meets the no-device line; --device cpu
# --precision fp32 is the CPU trainer, bit for bit.
# usage: cli_cuda_flags.sh <zbpp binary> <source dir>
set -u
ZBPP=$1
SRC=$2
TMP=$(mktemp -d /tmp/zbpp_cli_cuda_flags.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fails=0
MODEL=(--layers 2 --heads 2 --channels 32 --seq 16 --batch 4)
TINY=("${MODEL[@]}" --steps 2 --text "$SRC/data/demo_corpus.txt")
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect <command> <exit code> <text in message> <args...>
expect() {
  local cmd=$1 want=$2 needle=$3
  shift 3
  CUDA_VISIBLE_DEVICES= "$ZBPP" "$cmd" "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$? lines
  lines=$(wc -l <"$TMP/err")
  if [ "$rc" -ne "$want" ]; then fail "exit $rc (want $want) for: $cmd $*"; cat "$TMP/err"; return; fi
  if [ "$lines" -ne 1 ]; then fail "$lines stderr lines for: $cmd $*"; cat "$TMP/err"; return; fi
  grep -q "^zbpp $cmd: " "$TMP/err" || fail "no 'zbpp $cmd:' prefix for: $*"
  grep -qF -- "$needle" "$TMP/err" || fail "message lacks '$needle' for: $cmd $*: $(cat "$TMP/err")"
  [ -s "$TMP/out" ] && fail "stdout not empty on error for: $cmd $*"
}

for cmd in train profile; do
  if [ $cmd = train ]; then A=("${TINY[@]}"); else A=("${MODEL[@]}" --reps 1); fi
  "$ZBPP" $cmd --help | grep -q -- '--precision fp32|tf32|bf16' || fail "$cmd --help lacks --precision"
  expect $cmd 2 "'gpu' is not cpu, cuda or cuda:N" "${A[@]}" --device gpu
  expect $cmd 2 "'cuda:x' is not cpu" "${A[@]}" --device cuda:x
  expect $cmd 2 "unknown precision 'fp16'" "${A[@]}" --device cuda --precision fp16
  if ! grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null; then # else it runs there
    expect $cmd 2 "--precision bf16 on the CPU: this CPU has no AVX512-BF16" "${A[@]}" --precision bf16
  fi
  expect $cmd 2 "--precision tf32 needs --device cuda" "${A[@]}" --device cpu --precision tf32
  expect $cmd 2 "--tf32 needs --device cuda" "${A[@]}" --tf32
  expect $cmd 2 "--tf32 turns TF32 on in fp32 mode" "${A[@]}" --device cuda --tf32 --precision bf16
  # --fp32-attention auto|fma|3xtf32: a GPU fp32 choice, refused elsewhere
  "$ZBPP" $cmd --help | grep -q -- '--fp32-attention auto|fma|3xtf32' || fail "$cmd --help lacks --fp32-attention"
  expect $cmd 2 "unknown fp32 attention 'fast' (auto, fma or 3xtf32)" "${A[@]}" --device cuda --fp32-attention fast
  expect $cmd 2 "--fp32-attention is for --device cuda with --precision fp32" "${A[@]}" --fp32-attention 3xtf32
  expect $cmd 2 "--fp32-attention is for --device cuda with --precision fp32" "${A[@]}" --device cuda \
    --precision bf16 --fp32-attention 3xtf32
  expect $cmd 2 "--fp32-attention is for --device cuda with --precision fp32" "${A[@]}" --device cuda \
    --tf32 --fp32-attention fma
done
# --sm-per-rank K (issue 13): a positive integer, only with --device cuda (with one rank: that rank
# in one K-SM partition); the run needs a device (none visible here); train only
"$ZBPP" train --help | grep -q -- '--sm-per-rank K' || fail "train --help lacks --sm-per-rank"
for k in 0 -8 x 8x ""; do
  expect train 2 "--sm-per-rank: '$k' is not a positive integer" "${TINY[@]}" --device cuda \
    --ranks 2 --sm-per-rank "$k"
done
expect train 2 "--sm-per-rank needs --device cuda" "${TINY[@]}" --ranks 2 --sm-per-rank 8
expect train 2 "--sm-per-rank needs --device cuda" "${TINY[@]}" --device cpu --sm-per-rank 8
# --gpu-messages host|device|none: only with --device cuda and --ranks > 1
expect train 2 "--gpu-messages must be host, device or none (got 'peer')" "${TINY[@]}" --device cuda \
  --ranks 2 --gpu-messages peer
expect train 2 "--gpu-messages needs --device cuda" "${TINY[@]}" --ranks 2 --gpu-messages device
expect train 2 "with one rank there are none" "${TINY[@]}" --device cuda --gpu-messages host
expect profile 2 "unknown option --sm-per-rank" --layers 2 --reps 1 --device cuda --sm-per-rank 8
# MPI ranks on GPUs stage messages through host buffers: device messages are refused there
expect train 2 "--gpu-messages device needs thread ranks" "${TINY[@]}" --device cuda \
  --transport mpi --ranks 2 --gpu-messages device
expect train 2 "--gpu-messages none needs thread ranks" "${TINY[@]}" --device cuda \
  --transport mpi --ranks 2 --gpu-messages none
# no device visible (or no CUDA in this build): one line, exit 1, nothing written
no_dev="--device cuda: no CUDA device"
"$ZBPP" train --help >/dev/null
if ! CUDA_VISIBLE_DEVICES= "$ZBPP" train "${TINY[@]}" --device cuda 2>&1 | grep -q "no CUDA device"; then
  no_dev="--device cuda: zbpp was built without CUDA"
fi
for prec in fp32 tf32 bf16; do
  expect train 1 "$no_dev" "${TINY[@]}" --device cuda --precision $prec --save "$TMP/x.ckpt" \
    --metrics "$TMP/m.jsonl"
done
expect train 1 "$no_dev" "${TINY[@]}" --device cuda:1 --tf32
expect train 1 "$no_dev" "${TINY[@]}" --device cuda --fp32-attention 3xtf32
# pipeline ranks on cuda (issue 13): the same line before anything is read or written
expect train 1 "$no_dev" "${TINY[@]}" --device cuda --ranks 2 --save "$TMP/x.ckpt"
expect train 1 "$no_dev" "${TINY[@]}" --device cuda --ranks 2 --sm-per-rank 8
expect train 1 "$no_dev" "${TINY[@]}" --device cuda:0 --ranks 4 --sm-per-rank 32 --precision bf16
expect train 1 "$no_dev" "${TINY[@]}" --device cuda --dp 2 --ranks 2 --schedule zb-h1
expect train 1 "$no_dev" "${TINY[@]}" --device cuda --ranks 2 --gpu-messages device
# one rank in a partition of K SMs (the partitioned pipeline's reference): the same line
expect train 1 "$no_dev" "${TINY[@]}" --device cuda --sm-per-rank 16
[ -e "$TMP/x.ckpt" ] || [ -e "$TMP/m.jsonl" ] && fail "a failed --device cuda run wrote a file"
expect profile 1 "$no_dev" --layers 2 --reps 1 --device cuda
# the explicit CPU defaults are the CPU trainer
"$ZBPP" train "${TINY[@]}" --quiet --save "$TMP/a.ckpt" || fail "cpu run failed"
"$ZBPP" train "${TINY[@]}" --quiet --device cpu --precision fp32 --save "$TMP/b.ckpt" || fail "cpu run failed"
cmp -s "$TMP/a.ckpt" "$TMP/b.ckpt" || fail "--device cpu --precision fp32 changed the bits"

if [ "$fails" -ne 0 ]; then
  echo "$fails failure(s)"
  exit 1
fi
echo "cli_cuda_flags: all passed"
