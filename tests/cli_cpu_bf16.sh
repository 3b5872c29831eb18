#!/usr/bin/env bash
# zbpp train --precision bf16 on the CPU (docs/compute.md, "bf16 on the CPU"):
#   - on a CPU without AVX512-BF16/AMX-BF16: refused, one line naming the missing instructions;
#   - the bf16 path (emulated products through the test hook, so it runs on any CPU): 10 steps
#     within 0.05 of fp32's loss and not the same bits as fp32 (it is not fp32 in disguise); two
#     runs, 1 or 2 threads, the weights rounded per product instead of once a step (the weight
#     cache off), and pipeline ranks under 1f1b / zb-h1 (B then W) / zb-h2: the same checkpoint
#     bytes as --ranks 1;
#   - the same through oneDNN's code (its fp32 matmul on the rounded operands: the "onednn-f32"
#     hook) where zbpp was built with oneDNN;
#   - where the CPU and the build run bf16 for real (oneDNN): the same checks without the hook.
# usage: cli_cpu_bf16.sh <zbpp binary> <source dir>
set -uo pipefail
ZBPP=$1
SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
common=(train --text "$SRC/data/demo_corpus.txt" --layers 4 --channels 32 --heads 2 --seq 16
        --batch 8 --microbatches 4 --steps 10 --seed 5 --quiet)
last_loss() { grep -o '"loss":[^,]*' "$1" | tail -1 | cut -d: -f2; }

"$ZBPP" "${common[@]}" --metrics "$tmp/fp32.jsonl" --save "$tmp/fp32.ckpt" \
  || fail "fp32 reference run"

# the checks of one bf16 path; $1 names it, the environment says which
check_path() {
  local name=$1
  "$ZBPP" "${common[@]}" --precision bf16 --metrics "$tmp/a.jsonl" --save "$tmp/a.ckpt" \
    || { fail "$name: bf16 run"; return; }
  local l32 l16
  l32=$(last_loss "$tmp/fp32.jsonl") l16=$(last_loss "$tmp/a.jsonl")
  awk -v a="$l32" -v b="$l16" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.05) }' \
    || fail "$name: loss after 10 steps $l16, fp32 $l32 (more than 0.05 apart)"
  cmp -s "$tmp/fp32.ckpt" "$tmp/a.ckpt" && fail "$name: the bf16 run gave fp32's bits"
  # the second run also reports what runs the products and how fast they are here
  "$ZBPP" "${common[@]}" --precision bf16 --save "$tmp/b.ckpt" --verbose 2>"$tmp/verbose" \
    || fail "$name: second run"
  grep -qE "CPU bf16 products: .*; [0-9]+\.[0-9]+x fp32's rate here \(measured\)" "$tmp/verbose" \
    || fail "$name: --verbose does not report the bf16 products' speed: $(cat "$tmp/verbose")"
  cmp -s "$tmp/a.ckpt" "$tmp/b.ckpt" || fail "$name: two runs differ"
  # the weights rounded once a step (the weight cache) or per product: the same bits
  ZBPP_TEST_CPU_BF16_NO_WEIGHT_CACHE=1 "$ZBPP" "${common[@]}" --precision bf16 --save "$tmp/b.ckpt" \
    || fail "$name: without the weight cache"
  cmp -s "$tmp/a.ckpt" "$tmp/b.ckpt" || fail "$name: the weight cache changes the bits"
  "$ZBPP" "${common[@]}" --precision bf16 --threads 2 --save "$tmp/b.ckpt" || fail "$name: 2 threads"
  cmp -s "$tmp/a.ckpt" "$tmp/b.ckpt" || fail "$name: 2 threads differ from 1"
  for sched in 1f1b zb-h1 zb-h2; do
    "$ZBPP" "${common[@]}" --precision bf16 --ranks 2 --schedule "$sched" --save "$tmp/p.ckpt" \
      || { fail "$name: --ranks 2 $sched"; continue; }
    cmp -s "$tmp/a.ckpt" "$tmp/p.ckpt" || fail "$name: --ranks 2 $sched differs from --ranks 1"
  done
}

if "$ZBPP" "${common[@]}" --steps 1 --precision bf16 >/dev/null 2>"$tmp/err"; then
  check_path "bf16 (native)"
else
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "refusal is not one line: $(cat "$tmp/err")"
  grep -q '^zbpp train: --precision bf16 on the CPU: ' "$tmp/err" || fail "refusal: $(cat "$tmp/err")"
  if ! grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null; then
    grep -q 'no AVX512-BF16 or AMX-BF16 instructions' "$tmp/err" \
      || fail "refusal does not name the missing instructions: $(cat "$tmp/err")"
  fi
  echo "cli_cpu_bf16: native bf16 refused here: $(cat "$tmp/err")"
fi
ZBPP_TEST_CPU_BF16=emulate check_path "bf16 (emulated)"
# oneDNN's code on the rounded operands (its fp32 matmul), where zbpp was built with oneDNN
if ZBPP_TEST_CPU_BF16=onednn-f32 "$ZBPP" "${common[@]}" --steps 1 --precision bf16 >/dev/null 2>&1; then
  ZBPP_TEST_CPU_BF16=onednn-f32 check_path "bf16 (oneDNN fp32 matmul)"
else
  echo "cli_cpu_bf16: built without oneDNN, its test mode skipped"
fi

[ "$fails" -eq 0 ] && echo "cli_cpu_bf16: all passed"
[ "$fails" -eq 0 ]
