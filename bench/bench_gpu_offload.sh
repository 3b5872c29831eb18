#!/usr/bin/env bash
# Activation offload's goals on a GPU (docs/offload.md, "Runtime"), one script:
#   bench/bench_gpu_offload.sh BUILD [STEPS=6] [LAYERS=16] [T=1024] [PRECISION=bf16] [P=4] [M=8]
# A GPT-2 124M-like model (C=768, 12 heads, V=50257) with LAYERS blocks, P thread ranks on one
# GPU (each in its own SM partition), one sequence of T tokens per microbatch, M microbatches,
# --partition profile (so O and L are planned with the measured copy bandwidths), device
# messages. Runs, from their reports:
#  - zb-h1 (the reference) and zb-h1 --offload all: step time, the activation peak and the
#    stash slots (largest over the ranks), and the stashes --offload all holds at its peak, in
#    units of one microbatch's stash (zb-h1's rank 0 holds P at its peak; goal <= 2);
#  - at half of zb-h1's activation memory (--mem-limit-mb = zb-h1's largest total minus half its
#    largest activation peak): zb-h1 --offload auto and zb-h1 --recompute auto (goals: offload
#    step <= 1.05 x zb-h1's and below recompute's);
#  - every run's pipeline span measured against the simulator's (goal with offload: within 3 %).
# Writes every run's log next to the table; without a GPU it says so and exits 77.
set -uo pipefail
B=${1:?usage: bench_gpu_offload.sh BUILD [STEPS] [LAYERS] [T] [PRECISION] [P] [M]}
STEPS=${2:-6}
L=${3:-16}
T=${4:-1024}
PREC=${5:-bf16}
P=${6:-4}
M=${7:-8}
BENCH=bench_gpu_offload
source "$(dirname "$0")/gpu_bench_lib.sh" # Z, OUTDIR, run, big, field, ratio; exits 77 without a GPU

echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)," \
    "L=$L C=768 V=50257 T=$T, $PREC, P=$P thread ranks on one GPU, M=$M, $STEPS steps"
common=(--ranks "$P" --schedule zb-h1 --batch "$M" --microbatches "$M" --partition profile
    --gpu-messages device)
big ref "${common[@]}"
big all "${common[@]}" --offload all
total=$(field ref mem_predicted) peak=$(field ref peak_predicted)
limit=$(awk -v t="$total" -v p="$peak" 'BEGIN { if (t > 0) printf "%.1f", t - p / 2 }')
if [ -n "$limit" ]; then
    big auto "${common[@]}" --offload auto --mem-limit-mb "$limit"
    big recompute "${common[@]}" --recompute auto --mem-limit-mb "$limit"
else
    echo "no memory table in the reference run: the half-memory runs are skipped"
fi

printf "%-22s %8s %8s %9s %9s %9s %9s %8s\n" run "step ms" "vs zb-h1" "act.peak" "act.alloc" \
    "span ms" "pred ms" "span %"
for r in ref all auto recompute; do
    [ -f "$OUTDIR/$r.log" ] || continue
    st=$(field "$r" step) sm=$(field "$r" span_m) sp=$(field "$r" span_p)
    case $r in
    ref) what="zb-h1" ;;
    all) what="--offload all" ;;
    auto) what="--offload auto (1/2)" ;;
    recompute) what="--recompute auto (1/2)" ;;
    esac
    printf "%-22s %8s %8s %9s %9s %9s %9s %8s\n" "$what" "$st" "$(ratio "$st" "$(field ref step)")" \
        "$(field "$r" peak_measured)" "$(field "$r" alloc_measured)" "$sm" "$sp" \
        "$(awk -v a="$sm" -v b="$sp" 'BEGIN { if (a > 0 && b > 0) printf "%+.1f", 100 * (a / b - 1); else print "n/a" }')"
done
echo "--offload all holds $(awk -v a="$(field all peak_measured)" -v r="$(field ref peak_measured)" \
    -v p="$P" 'BEGIN { if (r > 0) printf "%.2f", p * a / r; else print "n/a" }') microbatches'" \
    "stashes at its peak (zb-h1's rank 0: $P; goal <= 2)"
[ -f "$OUTDIR/auto.log" ] && echo "limit $limit MiB per rank; offload auto / recompute auto:" \
    "$(ratio "$(field auto step)" "$(field recompute step)")"
grep -h "^zbpp train:\|to page-locked" "$OUTDIR"/*.log 2>/dev/null | sort -u | head -5
echo "logs: $OUTDIR"
