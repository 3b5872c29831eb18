#!/usr/bin/env bash
# The GPU pipeline's goals (docs/cuda.md, "Pipeline goals" and "The step on a GPU"), one script:
#   bench/bench_gpu_pipeline.sh BUILD [STEPS=8] [LAYERS=16] [T=1024] [PRECISION=bf16] [P=4]
# A GPT-2 124M-like model (C=768, 12 heads, V=50257) with LAYERS blocks, P ranks as threads on
# one GPU (each in its own SM partition), one sequence of T tokens per microbatch, M = 8 and 16,
# 1f1b, zb-h2 and zb-v with --partition profile (the simulator is fed the stages' costs timed in
# a partition of the ranks' size) and device messages. Per run, from its report:
#  - step vs the schedule's actions: the median step, the last step's actions (their makespan:
#    first start to last end over every rank; the per-rank span leaves out the pipeline's
#    fill), the optimizer's device time (the largest over the ranks, from the step-phase
#    table) and step / (actions + optimizer) (goal: <= 1.05), the time outside the actions in %
#    of the step (goal: <= 5 %);
#  - the bubble, measured (CUDA events) and predicted (simulator), one definition (goal: within
#    3 points);
#  - zb-h2 / 1f1b and zb-v / 1f1b median step times next to the predicted makespans' ratio
#    (goal: within 3 %).
# Then: communication hidden (device messages vs no-op transfers, 2 pairs in alternation, goal
# <= 1.03); GPU memory per rank at P 1f1b against the same model with --ranks 1 (goal <= 0.5x,
# predicted = measured); and the small model (L=8 C=256 T=256) for the three schedules, where
# launch latency rules. Writes every run's log next to the tables on stdout; without a GPU it
# says so and exits 77. To fit a short device call: GOAL_MS (default "8 16", empty: none),
# GOAL_HIDE (the schedules of the communication table, default all three, empty: none),
# GOAL_MEMORY=0 and GOAL_SMALL=0 skip those tables; the pairs run last.
set -uo pipefail
B=${1:?usage: bench_gpu_pipeline.sh BUILD [STEPS] [LAYERS] [T] [PRECISION] [P]}
STEPS=${2:-8}
L=${3:-16}
T=${4:-1024}
PREC=${5:-bf16}
P=${6:-4}
BENCH=bench_gpu_pipeline
source "$(dirname "$0")/gpu_bench_lib.sh" # Z, OUTDIR, run, big, field, ratio; exits 77 without a GPU
echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)," \
    "L=$L C=768 V=50257 T=$T, $PREC, P=$P thread ranks on one GPU, $STEPS steps"
# table NAME_PREFIX M: the per-schedule goal rows of runs <prefix>_<sched>
table() {
    local pre=$1 M=$2
    for s in 1f1b zb-h2 zb-v; do
        local n=${pre}_$s st sp opt
        st=$(field "$n" step) sp=$(field "$n" makespan_m) opt=$(field "$n" optimizer)
        local bm bp
        bm=$(field "$n" bubble_m) bp=$(field "$n" bubble_p)
        printf "%-3s %-6s %8s %8s %7s %9s %8s %8s %7s %6s %10s %10s\n" "$M" "$s" "$st" "$sp" "$opt" \
            "$(awk -v a="$st" -v b="$sp" -v c="$opt" 'BEGIN { if (b + c > 0) printf "%.3f", a / (b + c); else print "n/a" }')" \
            "$(field "$n" outside_pct)" "$bm" "$bp" \
            "$(awk -v a="$bm" -v b="$bp" 'BEGIN { if (a != "" && b != "") printf "%.1f", (a > b ? a - b : b - a); else print "n/a" }')" \
            "$(ratio "$st" "$(field "${pre}_1f1b" step)")" \
            "$(ratio "$(field "$n" makespan_p)" "$(field "${pre}_1f1b" makespan_p)")"
    done
}
header() {
    printf "%-3s %-6s %8s %8s %7s %9s %8s %8s %7s %6s %10s %10s\n" M sched "step ms" "acts ms" \
        "opt ms" "step/a+o" "out %" "bubble%" "pred%" "|diff|" "ratio/1f1b" "pred ratio"
}
header
for M in ${GOAL_MS-8 16}; do # empty: no goal rows
    for s in 1f1b zb-h2 zb-v; do
        big "m${M}_$s" --ranks "$P" --schedule "$s" --batch "$M" --microbatches "$M" \
            --partition profile --trace "$OUTDIR/m${M}_$s.json" --gpu-messages device
    done
    table "m$M" "$M"
done

if [ "${GOAL_MEMORY:-1}" = 1 ]; then
    echo
    echo "GPU memory per rank (MiB, the largest total over the ranks), M=8:"
    big one_rank --ranks 1 --schedule 1f1b --batch 8 --microbatches 8
    # driver: what cudaMemGetInfo counts in use at the end (contexts included), beside what the
    # ranks' tables say they allocated (all ranks together)
    printf "%-22s %10s %10s %10s %10s %10s\n" run predicted measured "vs --ranks 1" driver allocated
    printf "%-22s %10s %10s %10s %10s %10s\n" "--ranks 1" "$(field one_rank mem_predicted)" \
        "$(field one_rank mem_measured)" 1.000 "$(field one_rank gpu_in_use)" \
        "$(field one_rank gpu_allocated)"
    # --ranks 1 has no post-validation backup (its own norm is the global one): the goal's row
    # runs P ranks with the same features (--optimizer-sync barrier); the default run's row beside it
    # carries each rank's backup (3 x its parameters)
    big mem_barrier --ranks "$P" --schedule 1f1b --batch 8 --microbatches 8 \
        --optimizer-sync barrier --gpu-messages device
    printf "%-22s %10s %10s %10s %10s %10s\n" "--ranks $P 1f1b barrier" \
        "$(field mem_barrier mem_predicted)" "$(field mem_barrier mem_measured)" \
        "$(ratio "$(field mem_barrier mem_measured)" "$(field one_rank mem_measured)")" \
        "$(field mem_barrier gpu_in_use)" "$(field mem_barrier gpu_allocated)"
    printf "%-22s %10s %10s %10s %10s %10s\n" "--ranks $P 1f1b post-val" \
        "$(field m8_1f1b mem_predicted)" "$(field m8_1f1b mem_measured)" \
        "$(ratio "$(field m8_1f1b mem_measured)" "$(field one_rank mem_measured)")" \
        "$(field m8_1f1b gpu_in_use)" "$(field m8_1f1b gpu_allocated)"
fi

if [ "${GOAL_SMALL:-1}" = 1 ]; then
    echo
    echo "small model (L=8 C=256 T=256, fp32, P=$P, M=8): launch latency rules"
    header
    for s in 1f1b zb-h2 zb-v; do
        PREC=fp32 run "small_$s" --layers 8 --channels 256 --heads 8 --vocab 50257 --seq 256 \
            --steps "$STEPS" --ranks "$P" --schedule "$s" --batch 8 --microbatches 8 \
            --partition profile --gpu-messages device
    done
    table small 8
fi

if [ -n "${GOAL_HIDE-x}" ]; then
    echo
    echo "communication hidden (device messages vs no-op transfers, M=8, 2 pairs in alternation):"
    printf "%-6s %12s %12s %8s\n" sched "device ms" "no-op ms" ratio
    med() { printf "%s\n" "$@" | sort -g | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)] }'; }
    for s in ${GOAL_HIDE-1f1b zb-h2 zb-v}; do
        dev=() nul=()
        for k in 1 2; do
            big "hide_${s}_dev$k" --ranks "$P" --schedule "$s" --batch 8 --microbatches 8 \
                --gpu-messages device && dev+=("$(field "hide_${s}_dev$k" step)")
            big "hide_${s}_nul$k" --ranks "$P" --schedule "$s" --batch 8 --microbatches 8 \
                --gpu-messages none && nul+=("$(field "hide_${s}_nul$k" step)")
        done
        d=$(med "${dev[@]}") n=$(med "${nul[@]}")
        printf "%-6s %12s %12s %8s\n" "$s" "$d" "$n" "$(ratio "$d" "$n")"
    done
fi

echo "logs and traces: $OUTDIR"
