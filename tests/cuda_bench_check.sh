#!/usr/bin/env bash
# The GPU benchmarks, checked where they cannot run: the PyTorch script compiles, the shell
# runner parses, and bench_cuda_step either runs or says "skipped: no CUDA device" (exit 77);
# a bad precision is a usage error (exit 2).
# usage: cuda_bench_check.sh <zbpp binary> <source dir>
set -uo pipefail
BIN=$(dirname "$1")/bench_cuda_step
SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PYTHONPYCACHEPREFIX=$tmp python3 -m py_compile "$SRC/bench/torch_gpt2.py" \
  || { echo "FAIL: bench/torch_gpt2.py does not compile"; exit 1; }
bash -n "$SRC/bench/bench_cuda.sh" || { echo "FAIL: bench/bench_cuda.sh does not parse"; exit 1; }
for f in scripts/gpu_deps.sh scripts/gpu_session.sh; do
  bash -n "$SRC/$f" || { echo "FAIL: $f does not parse"; exit 1; }
done
"$BIN" fp16 >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "unknown precision 'fp16'" "$tmp/out" \
  || { echo "FAIL: bad precision gave rc $rc: $(cat "$tmp/out")"; exit 1; }
"$BIN" fp32 1 16 1 1 1 >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 77 ]; then
  grep -q "^skipped: no CUDA device" "$tmp/out" || { echo "FAIL: rc 77 without the line"; exit 1; }
elif [ $rc -eq 0 ]; then
  grep -q "deferred/fused" "$tmp/out" || { echo "FAIL: no timing line"; cat "$tmp/out"; exit 1; }
else
  echo "FAIL: bench_cuda_step rc $rc"; cat "$tmp/out"; exit 1
fi
echo "ok"
