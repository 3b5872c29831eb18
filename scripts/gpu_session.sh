#!/usr/bin/env bash
# One device-tool call on the GPU machine (docs/cuda.md): run from the repository root with
# `.gpu-deps` carried (scripts/gpu_deps.sh download, here, first). Logs go to $OUT (or ./gpu-out).
#   scripts/gpu_session.sh test     build, then ctest -L gpu (kernels, stage, zbpp train/profile
#                                   --device cuda) + the host-only CUDA tests
#   scripts/gpu_session.sh bench    build, then zbpp's bench (fp32, tf32, bf16) + PyTorch eager
#   scripts/gpu_session.sh compile [P] PyTorch torch.compile reference only (no build needed);
#                                   P = precisions, default bf16 (fp32,tf32 in a second call)
#   scripts/gpu_session.sh sanitize build, then compute-sanitizer (memcheck, racecheck, initcheck)
#   scripts/gpu_session.sh partitions  build, then only the SM-partition and event-timing tests
#                                   (issue 13), verbose, plus compute-sanitizer memcheck on them
#   scripts/gpu_session.sh pipeline build, then the pipeline-rank tests on the GPU (issue 13: thread
#                                   ranks, MPI ranks through the carried Open MPI) and
#                                   zbpp train --device cuda --ranks 2|4 (partition line, bubble)
#   scripts/gpu_session.sh kernels  build, then the bf16 path first: the bf16 kernel, typed GEMM,
#                                   flash attention and bf16 stage tests (verbose), memcheck and
#                                   racecheck on the flash test, bench_flash, bench_cuda_bf16_ops
#   scripts/gpu_session.sh all [S]  one call for a whole lease: build, then in order of value the
#                                   bf16 kernel tests, the bf16 step bench (largest B), ctest -L gpu,
#                                   the pipeline goals, the kernel benches, compute-sanitizer on
#                                   flash; each step bounded, all within S seconds (default 420);
#                                   logs in one $OUT/logs.tgz (the tool returns 8 files at most).
#                                   ALL_PARTS picks and orders the parts (kernels step ctest goals
#                                   flash sanitize fp32 flash32 offload cpu), STEP_BS the step
#                                   bench's B (0: largest). Not in the default set: flash32
#                                   (issue 29: the fp32 attention's GPU test, the fp32 stage and
#                                   pipeline tests, bench_flash, the predicted memory, the fp32/tf32
#                                   steps at their largest B), offload (bench/bench_gpu_offload.sh),
#                                   cpu (the CPU bf16 tests on its AMX, zbpp's CPU step fp32 and
#                                   bf16 vs PyTorch CPU at 1, 2 and all cores: CPU_THREADS),
#                                   wstage (one 4-block rank in 32 SMs: W against its profile),
#                                   tf32 (the TF32 attention: its test, bench_flash, the step),
#                                   torchtf32 (PyTorch eager tf32 at TF32_B), x3 (the 3xTF32
#                                   attention: its tests, bench_flash, the fp32 step at X3_B with
#                                   each attention of X3_ATTN (default "fma 3xtf32"), PyTorch
#                                   eager fp32 there), cputorch (cpu's
#                                   last step alone: the CPU step against PyTorch's). GOALS_LIMIT,
#                                   CPU_LIMIT and OFFLOAD_LIMIT bound those parts (default 200,
#                                   300, 260 s); torchprof
#                                   (PyTorch eager fp32 at X3_B with one step's kernel time by
#                                   zbpp's kernel classes)
#   scripts/gpu_session.sh goals    build, then the pipeline goals (bench/bench_gpu_pipeline.sh:
#                                   step vs span + optimizer, bubble vs simulator, ZB/1F1B
#                                   ratios, communication hidden, memory vs --ranks 1, small model)
# A warm machine keeps build-gpu: then only an incremental build runs (the sent tree's changes).
set -uo pipefail
case "${1:-}" in
test | bench | compile | sanitize | partitions | pipeline | goals | kernels | all) ;;
*)
    sed -n '2,43p' "$0" >&2
    exit 2
    ;;
esac
t0=$(date +%s)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-gpu-out}
mkdir -p "$out"
out=$(cd "$out" && pwd) # absolute: the ctest calls below run inside build-gpu
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$out/gpu.txt"
# Load the prefix's environment into this shell (the build and the commands after it use it),
# then build: incrementally where a warm machine kept build-gpu, so a fix sent with the call is
# what runs.
build() {
    eval "$(bash scripts/gpu_deps.sh env)"
    local how=full cmd=(bash scripts/gpu_deps.sh build build-gpu)
    if [ -f build-gpu/CMakeCache.txt ] && [ -d .gpu-prefix ]; then
        how=incremental
        cmd=(cmake --build build-gpu -j "$(nproc)")
    fi
    if ! "${cmd[@]}" >"$out/build.log" 2>&1; then
        tail -40 "$out/build.log"
        exit 1
    fi
    echo "build: $how, ok ($(grep -c nvcc "$out/build.log") nvcc step)"
}
case "${1:-}" in
test)
    build
    (cd build-gpu && ctest -L gpu -V 2>&1 | tee "$out/ctest_gpu.log" |
        grep -E "rel err|step|fp32|bf16|tf32|device|resume|determinism|partition|distinct SMs|refused|action [0-9]|GPU pipeline|P=[24] M=|-np|without a GPU|Passed|Failed|Skipped|tests passed|FAIL|\[  ")
    (cd build-gpu && ctest -R "test_cuda_host|test_cuda_fake|test_cuda_green|test_cuda_timing|cli_cuda_flags|cuda_bench_check|test_nn_kernels|test_gpt2_stage" \
        --output-on-failure 2>&1 | tail -4)
    # the machine has PyTorch: zbpp's CSVs through torch's own _Action.from_str (issue 14)
    (cd build-gpu && ctest -R pytorch_load_csv -V 2>&1 | tee "$out/pytorch_csv.log" | tail -6)
    ;;
bench)
    build
    TORCH_MODES=eager bench/bench_cuda.sh build-gpu 10 1024 2>&1 | tee "$out/bench.log"
    ;;
sanitize)
    # compute-sanitizer memcheck (out-of-bounds, misaligned, uninitialised reads via initcheck)
    # and racecheck on the op test; memcheck on the stage test
    build
    for tool in memcheck racecheck initcheck; do
        compute-sanitizer --tool $tool --error-exitcode 9 build-gpu/test_cuda_gpu_ops \
            >"$out/sanitize_ops_$tool.log" 2>&1
        echo "compute-sanitizer $tool test_cuda_gpu_ops: rc $? ($(tail -1 "$out/sanitize_ops_$tool.log"))"
    done
    compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/test_cuda_gpu_stage \
        >"$out/sanitize_stage.log" 2>&1
    echo "compute-sanitizer memcheck test_cuda_gpu_stage: rc $? ($(tail -1 "$out/sanitize_stage.log"))"
    ;;
partitions)
    # issue 13: green contexts (2, 4, 2 x 16 SMs; SM ids of a probe kernel per partition) and
    # CUDA-event action timing; then memcheck on both
    build
    (cd build-gpu && ctest -R "test_cuda_gpu_green|test_cuda_gpu_timing|test_cuda_green|test_cuda_timing" \
        -V 2>&1 | tee "$out/ctest_partitions.log" |
        grep -E "device|partition|distinct SMs|refused|rank|action|step|Passed|Failed|Skipped|FAIL|\[  ")
    for t in test_cuda_gpu_green test_cuda_gpu_timing; do
        compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/$t >"$out/sanitize_$t.log" 2>&1
        echo "compute-sanitizer memcheck $t: rc $? ($(tail -1 "$out/sanitize_$t.log"))"
    done
    ;;
pipeline)
    # issue 13: thread ranks on the GPU (SM partitions), every family's bits, a failing rank;
    # then the CLI with the partition line and the measured vs predicted bubble
    build
    (cd build-gpu && ctest -R "test_cuda_gpu_pipeline|test_cuda_fake_pipeline|cli_cuda_gpu_pipeline|cli_cuda_gpu_mpi" -V 2>&1 |
        tee "$out/ctest_pipeline.log" |
        grep -E "device|P=|-np|GPU pipeline|failing|without a GPU|checkpoint|steps|bubble|skipped|Passed|Failed|Skipped|FAIL|\[  ")
    for P in 2 4; do
        for sched in 1f1b zb-h1 zb-h2; do
            for msg in host device; do
                echo "== P=$P $sched messages $msg"
                build-gpu/zbpp train --device cuda --ranks $P --schedule $sched --layers 8 \
                    --channels 256 --heads 4 --seq 256 --batch 16 --microbatches $((2 * P)) \
                    --steps 6 --gpu-messages $msg --text data/demo_corpus.txt 2>&1 |
                    tee "$out/train_p${P}_${sched}_$msg.log" |
                    grep -E "^device|bubble|trained|zbpp train"
            done
        done
    done
    ;;
kernels)
    # the bf16 path's pieces, smallest first, so a failure points at one kernel family: the
    # parts of `all` that hold them
    ALL_PARTS="kernels sanitize flash" exec bash "$0" all "${2:-420}"
    ;;
all)
    # logs outside $OUT (more than 8 files would not all come back), tarred after every step
    logs=$out/all-logs
    mkdir -p "$logs"
    deadline=$((t0 + ${2:-420}))
    pack() { tar czf "$out/logs.tgz" -C "$out" all-logs build.log gpu.txt 2>/dev/null; }
    # step NAME LIMIT CMD...: bounded by LIMIT and by what is left of the budget
    step() {
        local name=$1 limit=$2 left s rc
        shift 2
        left=$((deadline - $(date +%s)))
        if [ "$left" -lt 15 ]; then
            echo "skipped (budget spent)" >"$logs/$name.log" # the caller's tail reads it
            echo "[$(($(date +%s) - t0))s] $name: skipped (budget spent)"
            return 0
        fi
        [ "$limit" -gt "$left" ] && limit=$left
        s=$(date +%s)
        timeout "$limit" "$@" >"$logs/$name.log" 2>&1
        rc=$?
        echo "[$(($(date +%s) - t0))s] $name: rc $rc in $(($(date +%s) - s))s"
        pack
        return $rc
    }
    build
    echo "[$(($(date +%s) - t0))s] built"
    # ALL_PARTS: which parts, in this order (default: every one)
    for part in ${ALL_PARTS:-kernels step ctest goals flash sanitize}; do
        case $part in
        kernels)
            for t in test_cuda_gpu_bf16_ops test_cuda_gpu_bf16_gemm test_cuda_gpu_flash test_cuda_gpu_stage16; do
                step "$t" 60 build-gpu/$t
                grep -E "FAILED|ERROR|rel err|bound|fused|fallback|Assert|error" "$logs/$t.log" | head -12
            done
            ;;
        step) # the bf16 step at the largest B that fits, then at torch.compile's largest (64)
            for B in ${STEP_BS:-0}; do
                step "bench_step_bf16_b$B" 120 build-gpu/bench_cuda_step bf16 "$B" 1024 8 12 2
                grep -vE "^ *$" "$logs/bench_step_bf16_b$B.log" | tail -8
            done
            ;;
        ctest)
            step ctest_gpu 150 bash -c "cd build-gpu && ctest -L gpu -E 'bf16|flash|stage16' --output-on-failure"
            grep -E "tests passed|Failed|\*\*\*|rel err|FAILED" "$logs/ctest_gpu.log" | head -20
            ;;
        goals)
            step goals "${GOALS_LIMIT:-200}" env OUT="$logs" bash bench/bench_gpu_pipeline.sh build-gpu 6 16 1024 bf16 4
            tail -45 "$logs/goals.log"
            # the profile's sharing factors (count, mix, fused BW) and the per-phase ratios
            for f in "$logs"/bench_gpu_pipeline/m8_*.log; do
                [ -f "$f" ] || continue
                echo "== $(basename "$f")"
                grep -h "^pipeline:" "$f" | cut -c1-700
                grep -h -A5 "^action times" "$f"
            done
            ;;
        flash)
            step bench_flash 40 build-gpu/bench_flash
            tail -12 "$logs/bench_flash.log"
            step bench_bf16_ops 40 build-gpu/bench_cuda_bf16_ops
            tail -15 "$logs/bench_bf16_ops.log"
            ;;
        sanitize)
            for tool in memcheck racecheck; do
                # API errors not reported: test_unsupported_head_size refuses a launch on purpose
                step "sanitize_flash_$tool" 90 compute-sanitizer --tool $tool --report-api-errors no \
                    --error-exitcode 9 build-gpu/test_cuda_gpu_flash
                tail -2 "$logs/sanitize_flash_$tool.log"
            done
            ;;
        offload) # issue 35: offload's goals (zb-h1 with --offload all / auto vs recompute)
            # the host link itself first: its bandwidth with 1..4 streams, small transfers
            # beside a stash copy, compute beside copies
            step host_link 60 build-gpu/bench_host_link 96 5
            cat "$logs/host_link.log"
            # OFFLOAD_RUNS: only those runs besides the reference (bench_gpu_offload.sh)
            step offload "${OFFLOAD_LIMIT:-260}" env OUT="$logs" bash bench/bench_gpu_offload.sh build-gpu 6 16 1024 bf16 4 8
            tail -18 "$logs/offload.log"
            ;;
        cpu) # issue 32: bf16 on this machine's AMX CPU (oneDNN) for real, then the CPU step next
            # to PyTorch on its cores (1, 2, all), with zbpp's bf16 column
            # the bf16 dot-product ceiling beside fp32's (AVX512-BF16; AMX is oneDNN's to use)
            step bench_peak 30 build-gpu/bench_peak 3
            grep -h "peak" "$logs/bench_peak.log"
            # per product shape: fp32, bf16 with its rounding, oneDNN's kernel alone (AMX?), on
            # the OpenBLAS core zbpp train picks for this CPU
            core=$(build-gpu/zbpp train --layers 1 --channels 32 --heads 2 --seq 16 --batch 2 \
                --steps 0 --text data/demo_corpus.txt --verbose 2>&1 |
                sed -n 's/.*zbpp set OPENBLAS_CORETYPE=\([A-Za-z0-9]*\).*/\1/p' | head -1)
            step bench_gemm 60 env ${core:+OPENBLAS_CORETYPE=$core} build-gpu/bench_gemm 3
            cat "$logs/bench_gemm.log"
            step test_cpu_bf16 30 build-gpu/test_cpu_bf16
            step cli_cpu_bf16 60 bash tests/cli_cpu_bf16.sh build-gpu/zbpp .
            grep -hE "bf16 products|FAIL|SKIPPED|PASSED|passed|refused|warning" "$logs/test_cpu_bf16.log" \
                "$logs/cli_cpu_bf16.log" | head -12
            # which oneDNN kernels ran each product layout (a "ref" one would be a slow path)
            step onednn_impls 40 env ONEDNN_VERBOSE=1 build-gpu/zbpp train --layers 2 --channels 768 \
                --heads 12 --seq 128 --batch 8 --steps 1 --text data/demo_corpus.txt --precision bf16
            grep "^onednn_verbose,exec" "$logs/onednn_impls.log" | awk -F, '{print $5, $7}' |
                sort | uniq -c | sort -rn | head -12
            ;&
        cputorch) # (cpu's last step alone) zbpp's CPU step against PyTorch's
            # all cores first: the row only this machine can give (issue 32's 16 threads); at
            # 1 thread a GPT-2 step takes seconds, and 240 s did not reach the table (2026-11-27)
            step cpu_vs_torch "${CPU_LIMIT:-300}" env PYTHON=python3 bash bench/bench_cpu_vs_torch.sh \
                build-gpu/zbpp 2 1 12 "${CPU_THREADS:-$(nproc) 2 1}"
            tail -12 "$logs/cpu_vs_torch.log"
            ;;
        flash32) # the fp32 flash attention: correctness first (the pipeline test runs fp32 ranks in
            # SM partitions: the kernels' dynamic shared memory there), then its speed and the steps
            for t in test_cuda_gpu_flash:60 test_cuda_gpu_stage:90 test_cuda_gpu_pipeline:90; do
                step "${t%%:*}" "${t##*:}" build-gpu/${t%%:*}
                grep -E "FAILED|ERROR|fp32 kernels|rel err|Assert|error" "$logs/${t%%:*}.log" | head -30
            done
            step bench_flash_fp32 40 build-gpu/bench_flash 8 1024 12 64 20 fp32
            tail -8 "$logs/bench_flash_fp32.log"
            step bench_memory 10 build-gpu/bench_cuda_memory 1024 2
            grep "largest B" "$logs/bench_memory.log"
            for p in fp32 tf32; do
                step "bench_step_$p" 75 build-gpu/bench_cuda_step "$p" 0 1024 4 12 2
                grep -vE "^ *$" "$logs/bench_step_$p.log" | sed -n 2,6p
            done
            ;;
        tf32) # issue 29: the TF32 tensor-core attention (flash_attn_tf32.cu): its GPU test, its
            # speed beside the fp32 and bf16 kernels, then the tf32 step at its largest B
            step test_cuda_gpu_flash 90 build-gpu/test_cuda_gpu_flash
            grep -E "FAILED|ERROR|tf32 kernels|rel err|Assert|error|PASSED" "$logs/test_cuda_gpu_flash.log" | head -20
            step bench_flash_tf32 40 build-gpu/bench_flash 8 1024 12 64 20 tf32
            tail -9 "$logs/bench_flash_tf32.log"
            step bench_step_tf32 75 build-gpu/bench_cuda_step tf32 0 1024 4 12 2
            grep -vE "^ *$" "$logs/bench_step_tf32.log" | sed -n 2,8p
            ;;
        wstage) # issue 30: a one-rank pipeline of 4 blocks alone in 32 SMs; its action table
            # tells whether W's 1.2x over the profile comes from the stage's size or the neighbours
            step wstage 60 build-gpu/zbpp train --device cuda --ranks 1 --sm-per-rank 32 \
                --schedule zb-h1 --layers 4 --channels 768 --heads 12 --vocab 50257 --seq 1024 \
                --batch 8 --microbatches 8 --partition profile --steps 4 --text data/demo_corpus.txt \
                --precision "${WSTAGE_PREC:-bf16}"
            grep -A8 -i "action" "$logs/wstage.log" | head -24
            ;;
        x3) # issue 29's fp32 goal: the 3xTF32 attention (--fp32-attention 3xtf32): its kernel
            # test, the fp32 epilogues' op test, the fp32 stage test (3xTF32 within the fp32
            # bounds), bench_flash (FMA,
            # TF32, 3xTF32 rows), the fp32 step at X3_B with each attention side by side, then
            # PyTorch eager fp32 at the same B (its attention runs 3xTF32 too)
            step test_cuda_gpu_flash 90 build-gpu/test_cuda_gpu_flash
            grep -E "FAILED|ERROR|kernels:|rel err|Assert|error|PASSED" "$logs/test_cuda_gpu_flash.log" | head -24
            step test_cuda_gpu_ops 60 build-gpu/test_cuda_gpu_ops # the fp32 epilogues
            grep -E "FAILED|ERROR|gelu|Assert|PASSED" "$logs/test_cuda_gpu_ops.log" | head -12
            step test_cuda_gpu_stage 90 build-gpu/test_cuda_gpu_stage
            grep -E "FAILED|ERROR|3xtf32|Assert|PASSED|params after" "$logs/test_cuda_gpu_stage.log" | head -12
            step bench_flash_x3 40 build-gpu/bench_flash 8 1024 12 64 20 fp32
            tail -10 "$logs/bench_flash_x3.log"
            for a in ${X3_ATTN:-fma 3xtf32}; do
                step "bench_step_fp32_$a" 75 build-gpu/bench_cuda_step fp32 "${X3_B:-32}" 1024 4 12 2 "$a"
                grep -vE "^ *$" "$logs/bench_step_fp32_$a.log" | sed -n 2,8p
            done
            step torch_fp32 90 python3 bench/torch_gpt2.py --device cuda --mode eager \
                --precision fp32 --B "${X3_B:-32}" --steps 8
            grep -v Warning "$logs/torch_fp32.log" | tail -6
            ;;
        torchprof) # issue 29: where PyTorch eager fp32's step goes, by zbpp's kernel classes
            step torch_fp32_kernels 90 python3 bench/torch_gpt2.py --device cuda --mode eager \
                --precision fp32 --B "${X3_B:-32}" --steps 3 --kernels
            grep -v Warning "$logs/torch_fp32_kernels.log" | tail -14
            ;;
        torchtf32) # issue 29's tf32 goal: PyTorch eager with TF32 matmuls at zbpp's tf32 B
            step torch_tf32 90 python3 bench/torch_gpt2.py --device cuda --mode eager \
                --precision tf32 --B "${TF32_B:-32}" --steps 8
            grep -v Warning "$logs/torch_tf32.log" | tail -6
            ;;
        fp32) # zbpp's fp32 (TF32 off) and tf32 steps at their largest B
            for p in fp32 tf32; do
                step "bench_step_$p" 60 build-gpu/bench_cuda_step "$p" 0 1024 4 12 2
                grep -vE "^ *$" "$logs/bench_step_$p.log" | sed -n 2,4p
            done
            ;;
        esac
    done
    ;;
goals)
    build
    bash bench/bench_gpu_pipeline.sh build-gpu 8 16 1024 bf16 4 2>&1 | tee "$out/goals.log"
    ;;
compile)
    # bf16 by default (the issue's goal compares zbpp's bf16 with torch.compile's); each cold
    # compile of GPT-2 takes minutes, so other precisions go in their own call: compile fp32,tf32
    python3 bench/torch_gpt2.py --mode compile --precision "${2:-bf16}" --steps 10 2>&1 |
        tee "$out/torch_compile_${2:-bf16}.log" | grep -v Warning
    ;;
esac
