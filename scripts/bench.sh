#!/usr/bin/env bash
# zbpp benchmarks (`make bench`): every table the closing notes quote, in one run.
# Usage: scripts/bench.sh <build-dir>     Run on an otherwise idle machine: figures are medians,
# but two cores shared with anything else make them noise.
set -euo pipefail
BUILD=${1:?usage: bench.sh <build-dir>}
cd "$(dirname "$0")/.."
export ZB_SOURCE_DIR=$PWD
section() { printf '\n== %s ==\n' "$1"; }

section "CPU ceiling: single-core fp32 FMA peak"
"$BUILD/bench_peak" 7
section "BLAS: single-threaded sgemm on GPT-2 shapes"
"$BUILD/bench_gemm" 7
section "threads inside a rank: tiled sgemm on 1 and 2 threads vs OpenBLAS's threads"
"$BUILD/bench_gemm_threads" 7 2
section "planner: generate + lower + validate + simulate ZB-H2, P=64 M=1024"
"$BUILD/bench_schedule" 64 1024 11
section "auto: greedy search + local improvement (headline P=32 M=256)"
"$BUILD/bench_auto" 5
section "one training step of GPT-2 124M (B=4 T=64) on one core"
"$BUILD/bench_train_step" 3
section "threads inside a rank: GPT-2 124M (B=4 T=64) step, --threads 1 vs 2, --ranks 2 vs 1"
"$BUILD/bench_threads_step" 7 2
bash bench/bench_threads.sh "$BUILD/zbpp" 5 3
section "pipeline: P=2 M=8, every schedule, threads (L=8 C=384 T=128)"
"$BUILD/bench_pipeline" 2 8 8 384 128 8
if command -v mpirun >/dev/null 2>&1; then
  section "MPI vs threads: P=2 M=8 (L=8 C=384 T=128)"
  bash bench/bench_mpi.sh "$BUILD/zbpp" 2 8 8 384 128 8 3
fi
section "memory: --ranks 1 vs --ranks 4 threads vs mpirun -np 4 (L=8 C=512 V=8192 T=128)"
bash bench/bench_memory.sh "$BUILD/zbpp"
section "auto on the ZB paper's rows and larger (bubble vs ZB-2p, seconds)"
"$BUILD/bench_auto_paper" 3
