#!/usr/bin/env bash
# GPU speed, one script (docs/cuda.md): zbpp's CUDA stage (bench_cuda_step: fp32 with TF32 off,
# tf32, bf16; fp32 once per attention in FP32_ATTENTIONS, default "fma 3xtf32"; fused vs
# deferred W; time by kernel class; bench_cuda_memory's predicted memory) next to PyTorch eager and torch.compile on the same GPU, model
# and step (bench/torch_gpt2.py). Run from the repository root after scripts/gpu_deps.sh build.
#   bench/bench_cuda.sh [BUILD_DIR=build-gpu] [STEPS=10] [T=1024]
# TORCH_MODES / PRECISIONS override the sets (e.g. TORCH_MODES=eager PRECISIONS=bf16).
set -uo pipefail
build=${1:-build-gpu}
steps=${2:-10}
T=${3:-1024}
precisions=${PRECISIONS:-fp32 tf32 bf16}
modes=${TORCH_MODES:-eager,compile}
[ -x "$build/bench_cuda_step" ] || { echo "bench_cuda: $build/bench_cuda_step not built" >&2; exit 2; }
# the predicted memory per precision and B (host figures; the device's largest B follows)
[ -x "$build/bench_cuda_memory" ] && "$build/bench_cuda_memory" "$T" 2
for p in $precisions; do
    attentions=fma
    [ "$p" = fp32 ] && attentions=${FP32_ATTENTIONS:-fma 3xtf32}
    for a in $attentions; do
        "$build/bench_cuda_step" "$p" 0 "$T" "$steps" 12 2 "$a"
        rc=$?
        [ $rc -eq 77 ] && exit 77
    done
done
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    python3 bench/torch_gpt2.py --precision "$(echo $precisions | tr ' ' ,)" --mode "$modes" \
        --T "$T" --steps "$steps" --M 2
else
    echo "bench_cuda: PyTorch with CUDA not available: no PyTorch comparison"
fi
