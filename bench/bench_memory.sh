#!/usr/bin/env bash
# Whole-process memory of a pipeline against one process (issue 9's goal): GPT-2 L=8 C=512
# V=8192 T=128, B=8 in M=8 microbatches, 1F1B, 2 steps, FLOP-model partition.
#   --ranks 1 (single process)  vs  --ranks 4 threads (one process)  vs  mpirun -np 4 (per process)
# Prints each max RSS (MiB, from /usr/bin/time or the run's own per-process report) and the ratios.
# The default run clips (norm > 1), so post-validation never steps optimistically; the
# --grad-clip 0 row does, every step (its backup is then written).
# usage: bench/bench_memory.sh [zbpp binary] [extra train flags...]
set -euo pipefail
Z=$(readlink -f "${1:-build/zbpp}")
shift || true
SRC=$(cd "$(dirname "$0")/.." && pwd)
M=(--text "$SRC/data/demo_corpus.txt" --layers 8 --channels 512 --heads 8 --vocab 8192
   --seq 128 --batch 8 --microbatches 8 --steps 2 --partition flops "$@")
rss_of() { /usr/bin/time -f "%M" "$@" 2>&1 >/dev/null | tail -1; }   # KiB
one=$(rss_of "$Z" train "${M[@]}" --quiet)
thr=$(rss_of "$Z" train "${M[@]}" --quiet --ranks 4)
thr_b=$(rss_of "$Z" train "${M[@]}" --quiet --ranks 4 --optimizer-sync barrier)
# no clipping: every step is optimistic under post-validation, so its backup is written
thr_o=$(rss_of "$Z" train "${M[@]}" --quiet --ranks 4 --grad-clip 0)
row() { awk -v l="$1" -v k="$2" -v one="$one" \
      'BEGIN { printf "%-41s %8.1f MiB  (%.2fx --ranks 1)\n", l, k / 1024, k / one }'; }
row "max RSS --ranks 1:" "$one"
row "max RSS --ranks 4 threads:" "$thr"
row "max RSS --ranks 4 threads, barrier sync:" "$thr_b"
row "max RSS --ranks 4 threads, --grad-clip 0:" "$thr_o"
if command -v mpirun >/dev/null 2>&1; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    out=$(mpirun --oversubscribe -np 4 /usr/bin/time -f "rss %M" "$Z" train "${M[@]}" --quiet \
          --ranks 4 --transport mpi 2>&1)
    most=$(grep -o '^rss [0-9]*' <<<"$out" | awk '{ if ($2 > m) m = $2 } END { print m }')
    all=$(grep -o '^rss [0-9]*' <<<"$out" | awk '{ printf "%.1f ", $2 / 1024 }')
    printf "max RSS per MPI process (-np 4):        %s MiB\n" "$all"
    row "largest MPI process:" "$most"
fi
