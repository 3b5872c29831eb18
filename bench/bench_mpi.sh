#!/usr/bin/env bash
# bench_mpi.sh — step time of the MPI transport next to the thread transport on this machine
# (localhost, one process per core), plus the MPI run's per-step communication volume and wait.
#
# usage: bash bench/bench_mpi.sh [zbpp] [P M layers channels seq steps reps]
#        (defaults: build/zbpp, the bench_pipeline model: 2 8 8 256 128 12 3)
# Medians over steps 2..N of every repetition (the first step warms caches); threads and MPI
# runs alternate so a noisy neighbour hits both. Shared machine: treat small gaps as noise.
set -u
Z=${1:-build/zbpp}
P=${2:-2} M=${3:-8} L=${4:-8} C=${5:-256} T=${6:-128} STEPS=${7:-12} REPS=${8:-3}
SRC=$(cd "$(dirname "$0")/.." && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v mpirun >/dev/null || { echo "bench_mpi: mpirun not found"; exit 1; }
W=$(mktemp -d /tmp/zbpp_bench_mpi.XXXXXX)
trap 'rm -rf "$W"' EXIT
H=$((C / 64)); [ "$H" -ge 1 ] || H=1
MODEL="--text $SRC/data/demo_corpus.txt --layers $L --channels $C --heads $H --max-seq $T \
--seq $T --batch $M --microbatches $M --steps $STEPS --quiet"

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
step_ms() { grep -o '"step_ms":[0-9.]*' "$1" | tail -n +2 | cut -d: -f2; }

echo "MPI vs threads: P=$P M=$M, GPT-2 L=$L C=$C T=$T, B=$M, $STEPS steps x $REPS runs (median of steps 2..N)"
printf "%-10s %12s %12s %8s %16s %14s\n" schedule "threads ms" "mpi ms" "mpi/thr" "MB sent/step" "wait ms/step"
for sched in 1f1b zb-h1 zb-h2; do
    : >"$W/thr" && : >"$W/mpi"
    for rep in $(seq 1 "$REPS"); do
        "$Z" train $MODEL --ranks "$P" --schedule "$sched" --metrics "$W/t.jsonl" >/dev/null 2>&1 ||
            { echo "$sched: threads run failed"; continue 2; }
        step_ms "$W/t.jsonl" >>"$W/thr"
        # report as text on stdout: per rank "sent X MB ... waited Y ms" per step
        mpirun --oversubscribe -np "$P" "$Z" train $MODEL --transport mpi --schedule "$sched" \
            --metrics "$W/m.jsonl" >/dev/null 2>&1 || { echo "$sched: mpi run failed"; continue 2; }
        step_ms "$W/m.jsonl" >>"$W/mpi"
    done
    mpirun --oversubscribe -np "$P" "$Z" train ${MODEL/--quiet/} --transport mpi --schedule "$sched" \
        --steps 4 >"$W/report.txt" 2>/dev/null
    tm=$(median <"$W/thr") mm=$(median <"$W/mpi")
    sent=$(grep -o 'sent [0-9.]* MB' "$W/report.txt" | awk '{s+=$2} END {printf "%.2f", s}')
    wait_ms=$(grep -o 'waited [0-9.]* ms' "$W/report.txt" | awk '{printf "%s%s", sep, $2; sep="/"}')
    printf "%-10s %12.1f %12.1f %8.3f %16s %14s\n" "$sched" "$tm" "$mm" "$(echo "$mm / $tm" | bc -l)" \
        "$sent" "$wait_ms"
done
echo "(MB sent/step: all ranks together; wait ms/step: rank 0/rank 1/... time blocked in receives,"
echo " flushes and collectives, from a separate 4-step MPI run that prints its report)"
