#!/usr/bin/env bash
# Issue 13's goals on one GPU (docs/cuda.md, "Pipeline goals"), in one script:
#   bench/bench_gpu_pipeline.sh BUILD [STEPS=8] [LAYERS=16] [T=1024] [PRECISION=bf16] [P=4]
# A GPT-2 124M-like model (C=768, 12 heads, V=50257) with LAYERS blocks, P ranks as threads on
# one GPU (each in its own SM partition), one sequence of T tokens per microbatch, M = 8 and 16:
#  1. bubble: 1f1b, zb-h2 and zb-v with --partition profile (the simulator is fed the stages'
#     costs timed in a partition of the ranks' size) and --trace (CUDA-event times): measured
#     bubble of the last step next to the predicted one (goal: within 3 points);
#  2. ratios: zb-h2 / 1f1b and zb-v / 1f1b median step times next to the predicted span ratio
#     (goal: within 3% of it);
#  3. communication hidden: each schedule with device messages (--gpu-messages device) and with
#     no-op transfers (--gpu-messages none: the same waits, no copies after step 1), run in
#     alternation; the ratio of median step times (goal: <= 1.03).
# Writes every run's log next to a table on stdout; without a GPU it says so and exits 77.
set -uo pipefail
B=${1:?usage: bench_gpu_pipeline.sh BUILD [STEPS] [LAYERS] [T] [PRECISION] [P]}
STEPS=${2:-8}
L=${3:-16}
T=${4:-1024}
PREC=${5:-bf16}
P=${6:-4}
Z=$B/zbpp
OUTDIR=${OUT:-gpu-out}/bench_gpu_pipeline
mkdir -p "$OUTDIR"
root=$(cd "$(dirname "$0")/.." && pwd)
TEXT=$root/data/demo_corpus.txt

if ! "$Z" train --device cuda --steps 0 --quiet --text "$TEXT" >/dev/null 2>"$OUTDIR/probe.err"; then
    if grep -qi "no CUDA device\|without CUDA" "$OUTDIR/probe.err"; then
        echo "skipped: $(head -1 "$OUTDIR/probe.err")"
        exit 77
    fi
fi

# run NAME ARGS...: one training run, its log kept; prints nothing
run() {
    local name=$1
    shift
    # bounded: a hung run must not eat the device call (a healthy one takes seconds)
    timeout 180 "$Z" train --device cuda --precision "$PREC" --ranks "$P" --layers "$L" --channels 768 \
        --heads 12 --vocab 50257 --seq "$T" --text "$TEXT" --steps "$STEPS" --lr-schedule constant \
        "$@" >"$OUTDIR/$name.log" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || echo "FAILED ($rc): $name: $(tail -1 "$OUTDIR/$name.log")" >&2
    return $rc
}
# field NAME WHAT: a figure from a run's log
field() {
    local log=$OUTDIR/$1.log
    case $2 in
    step) sed -n 's/.*median step \([0-9.]*\) ms.*/\1/p' "$log" ;;
    bubble_m) sed -n 's/^bubble: measured \([0-9.]*\)%.*/\1/p' "$log" ;;
    bubble_p) sed -n 's/^bubble: .*predicted \([0-9.]*\)% (simulator).*/\1/p' "$log" ;;
    span_p) sed -n 's/^pipeline span .*predicted \([0-9.]*\) ms.*/\1/p' "$log" ;;
    esac
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else print "n/a" }'; }

echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)," \
    "L=$L C=768 V=50257 T=$T, $PREC, P=$P thread ranks on one GPU, $STEPS steps"
printf "%-3s %-6s %9s %9s %9s %9s %11s %11s\n" M sched "step ms" "bubble %" "pred %" \
    "|diff|" "ratio/1f1b" "pred ratio"
for M in 8 16; do
    for s in 1f1b zb-h2 zb-v; do
        run "m${M}_$s" --schedule "$s" --batch "$M" --microbatches "$M" --partition profile \
            --trace "$OUTDIR/m${M}_$s.json" --gpu-messages device
    done
    for s in 1f1b zb-h2 zb-v; do
        n=m${M}_$s
        bm=$(field "$n" bubble_m) bp=$(field "$n" bubble_p)
        diff=$(awk -v a="$bm" -v b="$bp" 'BEGIN { if (a != "" && b != "") printf "%.1f", (a > b ? a - b : b - a); else print "n/a" }')
        printf "%-3s %-6s %9s %9s %9s %9s %11s %11s\n" "$M" "$s" "$(field "$n" step)" "$bm" "$bp" \
            "$diff" "$(ratio "$(field "$n" step)" "$(field "m${M}_1f1b" step)")" \
            "$(ratio "$(field "$n" span_p)" "$(field "m${M}_1f1b" span_p)")"
    done
done

echo
echo "communication hidden (device messages vs no-op transfers, M=8, 3 pairs in alternation):"
printf "%-6s %12s %12s %8s\n" sched "device ms" "no-op ms" ratio
for s in 1f1b zb-h2 zb-v; do
    dev=() nul=()
    for k in 1 2 3; do
        run "hide_${s}_dev$k" --schedule "$s" --batch 8 --microbatches 8 --gpu-messages device &&
            dev+=("$(field "hide_${s}_dev$k" step)")
        run "hide_${s}_nul$k" --schedule "$s" --batch 8 --microbatches 8 --gpu-messages none &&
            nul+=("$(field "hide_${s}_nul$k" step)")
    done
    med() { printf "%s\n" "$@" | sort -g | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)] }'; }
    d=$(med "${dev[@]}") n=$(med "${nul[@]}")
    printf "%-6s %12s %12s %8s\n" "$s" "$d" "$n" "$(ratio "$d" "$n")"
done
echo "logs and traces: $OUTDIR"
