#!/usr/bin/env bash
# Activation recomputation on the CPU runtime (issue 11's goals): 2 ranks, a model whose
# activations dominate (L=4 C=128 NH=4, T=256: attention maps are most of the stash), B=16 in
# M=8 microbatches, profiled costs. For each schedule, --recompute none vs all:
# and selective recompute (--keep-activations selective: LN and GELU outputs rebuilt in W) alone
# and with all:
#   whole-rank total (the larger rank's, measured = the allocators' accounting; MiB) and ratio,
#   process RSS (threads: one process), median step, and the last step's pipeline span measured
#   against the simulator's prediction (its error, %).
# usage: bench/bench_recompute.sh [zbpp binary] [steps] [extra train flags...]
set -euo pipefail
Z=$(readlink -f "${1:-build/zbpp}")
STEPS=${2:-8}
shift 2 || shift $# || true
SRC=$(cd "$(dirname "$0")/.." && pwd)
M=(--text "$SRC/data/demo_corpus.txt" --layers 4 --channels 128 --heads 4 --seq 256
   --batch 16 --microbatches 8 --steps "$STEPS" --ranks 2 --threads 1 "$@")
echo "model: ${M[*]:2}"
printf "%-8s %-7s %9s %7s %9s %9s %11s %11s %7s\n" schedule rc "total MiB" ratio "RSS MiB" \
    "step ms" "span ms" "predicted" "error"
for sch in gpipe 1f1b zb-h1 zb-h2 zb-v; do
    base=""
    for rc in none all sel all+sel; do
        flags=(--recompute "${rc%+sel}")
        [ "$rc" = sel ] && flags=(--keep-activations selective)
        [ "$rc" = all+sel ] && flags=(--recompute all --keep-activations selective)
        out=$(/usr/bin/time -f "rss %M" "$Z" train "${M[@]}" --schedule $sch "${flags[@]}" 2>&1)
        total=$(awk '/^  measured/ { if ($9 > m) m = $9 } END { print m }' <<<"$out")
        rss=$(awk '/^rss / { printf "%.1f", $2 / 1024 }' <<<"$out")
        step=$(sed -n 's/.*median step \([0-9.]*\) ms.*/\1/p' <<<"$out")
        read -r span pred err < <(sed -n \
            's/^pipeline span (last step): measured \([0-9.]*\) ms, predicted \([0-9.]*\) ms (\([-+0-9.]*%\))/\1 \2 \3/p' \
            <<<"$out") || span="-" pred="-" err="-" # no span line with --partition flops
        [ -z "$base" ] && base=$total
        ratio=$(awk -v a="$total" -v b="$base" 'BEGIN { printf "%.2fx", a / b }')
        printf "%-8s %-7s %9s %7s %9s %9s %11s %11s %7s\n" $sch $rc "$total" "$ratio" "$rss" \
            "$step" "$span" "$pred" "$err"
    done
done

# The goal pair on one schedule: 1F1B, 2 ranks, a model where activations dominate more
# (C=64, T=512: attention maps), none and all taking turns REPS times (each run profiles anew,
# so the prediction moves too); medians of the larger rank's total and of the span error.
REPS=${REPS:-3}
A=(--text "$SRC/data/demo_corpus.txt" --layers 4 --channels 64 --heads 4 --seq 512 --batch 16
   --microbatches 8 --steps "$STEPS" --ranks 2 --threads 1 --schedule 1f1b)
med() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
W=$(mktemp -d)
for rep in $(seq 1 "$REPS"); do
    for rc in none all; do
        out=$("$Z" train "${A[@]}" --recompute $rc 2>&1)
        awk '/^  measured/ { if ($9 > m) m = $9 } END { print m }' <<<"$out" >>"$W/total_$rc"
        sed -n 's/^pipeline span.*(\([-+0-9.]*\)%)/\1/p' <<<"$out" >>"$W/err_$rc"
    done
done
echo
echo "1f1b, C=64 T=512, $REPS runs each (medians):"
for rc in none all; do
    printf "  %-4s total %7.2f MiB   span error %+5.1f%%   (errors: %s)\n" $rc \
        "$(med <"$W/total_$rc")" "$(med <"$W/err_$rc")" "$(tr '\n' ' ' <"$W/err_$rc")"
done
awk -v a="$(med <"$W/total_all")" -v n="$(med <"$W/total_none")" \
    'BEGIN { printf "  all / none whole-rank total: %.2fx (goal <= 0.6)\n", a / n }'
rm -rf "$W"
