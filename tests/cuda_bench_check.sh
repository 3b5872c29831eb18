#!/usr/bin/env bash
# The GPU benchmarks, checked where they cannot run: the PyTorch script compiles, the shell
# runners parse, the pipeline goals' runner says why it skips (the GPU hidden, so also on a GPU
# machine), and bench_cuda_step either runs
# or says "skipped: no CUDA device" (exit 77); a bad precision is a usage error (exit 2); the same
# for bench_cuda_bf16_ops and bench_flash (a head size without a kernel); bench_cuda_memory prints
# its table (or skips in a build without CUDA).
# usage: cuda_bench_check.sh <zbpp binary> <source dir>
set -uo pipefail
BIN=$(dirname "$1")/bench_cuda_step
SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PYTHONPYCACHEPREFIX=$tmp python3 -m py_compile "$SRC/bench/torch_gpt2.py" \
  || { echo "FAIL: bench/torch_gpt2.py does not compile"; exit 1; }
for f in bench/bench_cuda.sh bench/bench_gpu_pipeline.sh bench/bench_gpu_offload.sh \
  bench/gpu_bench_lib.sh; do
  bash -n "$SRC/$f" || { echo "FAIL: $f does not parse"; exit 1; }
done
# the pipeline and offload goals' runners where there is no GPU: skipped (77) with the reason,
# nothing run. The GPU is hidden even where there is one: the goals are a benchmark of minutes
# (gpu_session.sh goals / offload), not part of a test run
for g in bench_gpu_pipeline bench_gpu_offload; do
  CUDA_VISIBLE_DEVICES= OUT=$tmp bash "$SRC/bench/$g.sh" "$(dirname "$1")" >"$tmp/gp" 2>&1
  rc=$?
  [ $rc -eq 77 ] && grep -q "^skipped: .*\(no CUDA device\|without CUDA\)" "$tmp/gp" \
    || { echo "FAIL: $g.sh without a GPU: rc $rc, not the skip: $(head -3 "$tmp/gp")"; exit 1; }
done
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
  grep -q "by kernel class.*gemm.*optimizer" "$tmp/out" \
    || { echo "FAIL: no kernel-class line"; cat "$tmp/out"; exit 1; }
else
  echo "FAIL: bench_cuda_step rc $rc"; cat "$tmp/out"; exit 1
fi
# the bf16 kernel bench: runs (small rows, one rep) or says it skips; a bad argument is usage
OPS=$(dirname "$1")/bench_cuda_bf16_ops
"$OPS" 0 >"$tmp/ops" 2>&1
[ $? -eq 2 ] && grep -q "rows must be" "$tmp/ops" \
  || { echo "FAIL: bench_cuda_bf16_ops 0: $(cat "$tmp/ops")"; exit 1; }
"$OPS" 64 1 >"$tmp/ops" 2>&1
rc=$?
if [ $rc -eq 77 ]; then
  grep -q "^skipped: no CUDA device" "$tmp/ops" || { echo "FAIL: ops rc 77 without the line"; exit 1; }
elif [ $rc -eq 0 ]; then
  grep -q "fp32/bf16" "$tmp/ops" || { echo "FAIL: no ops timing line"; cat "$tmp/ops"; exit 1; }
else
  echo "FAIL: bench_cuda_bf16_ops rc $rc"; cat "$tmp/ops"; exit 1
fi
# the figures the pipeline benches read from a run's log, on a sample of the report (the
# step-phase table's cells are "device/ host" pairs: the optimizer is its fifth column)
cat >"$tmp/sample.log" <<'LOG'
trained steps 1..6: loss 11.1344 -> 6.3923, median step 48.7 ms, 169186 tokens/s
pipeline span (last step): measured 44.28 ms, predicted 40.90 ms (+8.3%)
pipeline makespan (last step, first action to last over every rank): measured 45.72 ms, predicted 42.65 ms (+7.2%)
outside the actions (last step): step 48.27 ms, actions 45.72 ms (makespan), outside 2.55 ms (5.3% of the step): 0.37 ms before the first action, 2.18 after the last
step phases after the actions (last step, ms; device events / host wall time):
                    drain        tied-wte       grad-norm       norm-sync       optimizer             sum
  rank 0     0.00/   0.00    0.52/   0.02    0.59/  30.50    1.33/   1.34    0.85/   0.04    3.29/  31.90
  rank 1     0.00/   0.02    0.00/   0.00    0.37/  24.49    0.24/   0.24    1.67/   0.04    2.28/  24.79
GPU memory per rank, MiB (device: params + grads + optimizer + backup + messages + activation peak + workspace)
              params    grads    optim   backup messages act.peak     work     total act.alloc
 rank 0
  predicted   387.79   258.53   517.05   775.58    27.00   411.84    32.54   2410.33    427.08
  measured    387.79   258.53   517.05   775.58    27.00   411.84    32.54   2410.33    427.08
 rank 3
  predicted    81.12   201.46   108.16   162.25    27.00   651.16    32.47   1263.62    666.30
  measured    81.12   201.46   108.16   162.25    27.00   651.16    32.47   1263.62    666.30
LOG
got=$(OUTDIR=$tmp bash -c 'source "$1/bench/gpu_bench_fields.sh"; echo "$(field sample step) \
$(field sample span_m) $(field sample makespan_m) $(field sample makespan_p) $(field sample outside_pct) $(field sample optimizer) $(field sample grad-norm) \
$(field sample norm-sync) $(field sample drain) $(field sample mem_predicted) \
$(field sample peak_measured) $(field sample half_limit) $(field sample peaks) \
$(field sample static) $(field sample half_act)"' _ "$SRC")
# half_limit: each rank's total less half its peak (2410.33 - 411.84 / 2, 1263.62 - 651.16 / 2);
# static: total less peak (2410.33 - 411.84, 1263.62 - 651.16); half_act: half the peak
[ "$got" = "48.7 44.28 45.72 42.65 5.3 1.67 0.59 1.33 0.00 2410.3 651.2 2204.4,938.0 411.8,651.2 \
1998.5,612.5 205.9,325.6" ] \
  || { echo "FAIL: gpu_bench_fields.sh read '$got' from the sample log"; exit 1; }
# add_lists (the two-chunk layouts' limits in bench_gpu_offload.sh): element by element, and
# nothing where the lengths differ
got=$(bash -c 'source "$1/bench/gpu_bench_fields.sh"; echo "$(add_lists 1998.5,612.5 205.9,325.6)|$(add_lists 1,2 3)|$(add_lists "" "")"' _ "$SRC")
[ "$got" = "2204.4,938.1||" ] || { echo "FAIL: add_lists gave '$got'"; exit 1; }
# the predicted memory needs no GPU: a row per precision and B, bf16 at B = 64 among them, and
# each precision's largest B
"$(dirname "$1")/bench_cuda_memory" >"$tmp/mem" 2>&1
rc=$?
if [ $rc -eq 0 ]; then
  grep -Eq "^bf16 +64 " "$tmp/mem" && grep -Eq "^fp32 +20 " "$tmp/mem" \
    || { echo "FAIL: bench_cuda_memory rows missing"; cat "$tmp/mem"; exit 1; }
  # fp32 without the T×T attention stash (the fp32 flash kernel): B = 32 fits on 79.1 GiB
  most=$(sed -n 's/^fp32 *largest B that fits: \([0-9]*\)$/\1/p' "$tmp/mem")
  [ -n "$most" ] && [ "$most" -ge 32 ] \
    || { echo "FAIL: bench_cuda_memory fp32 largest B '$most' (expected >= 32)"; cat "$tmp/mem"; exit 1; }
elif [ $rc -ne 77 ]; then
  echo "FAIL: bench_cuda_memory rc $rc"; cat "$tmp/mem"; exit 1
fi
# bench_flash: a head size without a kernel is a usage error (exit 2); a tiny shape runs or skips
FLASH=$(dirname "$1")/bench_flash
"$FLASH" 1 64 1 48 >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "head size 48 has no kernel" "$tmp/out" \
  || { echo "FAIL: bench_flash hs 48 gave rc $rc: $(cat "$tmp/out")"; exit 1; }
"$FLASH" 1 64 1 64 2 >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 77 ]; then
  grep -q "^skipped: no CUDA device" "$tmp/out" \
    || { echo "FAIL: bench_flash rc 77 without the line"; exit 1; }
elif [ $rc -eq 0 ]; then
  grep -q "^flash (bf16)" "$tmp/out" && grep -q "^flash (fp32 FMA)" "$tmp/out" \
    || { echo "FAIL: bench_flash: no timing line"; cat "$tmp/out"; exit 1; }
else
  echo "FAIL: bench_flash rc $rc"; cat "$tmp/out"; exit 1
fi
echo "ok"
