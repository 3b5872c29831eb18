#!/usr/bin/env bash
# bench_threads.sh — threads inside a rank (--threads) on GPT-2 124M, B=4, T=64:
#   r1 t1  --ranks 1 --threads 1                 (one core)
#   r1 t2  --ranks 1 --threads 2                 (goal: >= 1.8x the step rate of r1 t1)
#   r1 t2 M4 / r2 t1 M4  --microbatches 4: one rank with 2 threads vs a 2-rank pipeline with one
#          thread each, the same microbatches (goal: the pipeline within its bubble of it)
# Every run trains STEPS steps; the step time of a run is the median of its steps 2..N (the first
# warms caches); the figure is the median over REPS runs, the configurations taking turns so a
# noisy neighbour hits them all. Prints the BLAS kernel that ran (zbpp train --verbose).
#
# usage: bash bench/bench_threads.sh [zbpp] [steps reps layers]   (defaults: build/zbpp 5 3 12)
set -u
Z=${1:-build/zbpp}
STEPS=${2:-5} REPS=${3:-3} L=${4:-12}
SRC=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d /tmp/zbpp_bench_threads.XXXXXX)
trap 'rm -rf "$W"' EXIT
MODEL="--text $SRC/data/demo_corpus.txt --layers $L --channels 768 --heads 12 --vocab 50257
--max-seq 1024 --batch 4 --seq 64 --steps $STEPS --quiet"

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
step_ms() { grep -o '"step_ms": *[0-9.]*' "$1" | tail -n +2 | sed 's/.*: *//'; }

NAMES=("r1 t1" "r1 t2" "r1 t2 M4" "r2 t1 M4")
FLAGS=("--ranks 1 --threads 1" "--ranks 1 --threads 2" "--ranks 1 --threads 2 --microbatches 4"
       "--ranks 2 --threads 1 --microbatches 4")
# shellcheck disable=SC2086
blas=$("$Z" train $MODEL --steps 0 --verbose 2>&1 | grep -o 'BLAS [^;]*')
echo "threads per rank: GPT-2 124M (L=$L), B=4 T=64, $STEPS steps x $REPS runs, $blas," \
     "cores: $(nproc), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in "${!NAMES[@]}"; do : >"$W/ms$i"; done
for rep in $(seq 1 "$REPS"); do
    for i in "${!NAMES[@]}"; do
        # shellcheck disable=SC2086
        "$Z" train $MODEL ${FLAGS[$i]} --metrics "$W/m.jsonl" >"$W/out" 2>&1 ||
            { echo "${NAMES[$i]}: run failed: $(tail -1 "$W/out")"; exit 1; }
        step_ms "$W/m.jsonl" | median >>"$W/ms$i"
    done
done
printf "%-10s %-44s %10s %10s\n" config flags "step ms" "steps/s"
for i in "${!NAMES[@]}"; do
    ms[$i]=$(median <"$W/ms$i")
    printf "%-10s %-44s %10.1f %10.3f\n" "${NAMES[$i]}" "${FLAGS[$i]}" "${ms[$i]}" \
        "$(awk -v m="${ms[$i]}" 'BEGIN {print 1000 / m}')"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
echo "r1 t2 / r1 t1 step rate:        $(ratio "${ms[0]}" "${ms[1]}")x (goal >= 1.8)"
echo "r2 t1 M4 / r1 t2 M4 step time:  $(ratio "${ms[3]}" "${ms[2]}")x"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
