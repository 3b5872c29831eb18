#!/usr/bin/env bash
# Memory of a pipeline against one process: GPT-2 L=8 C=512 V=8192 T=128, B=8 in M=8
# microbatches, 4 steps, 1F1B, FLOP-model partition.
#   --ranks 1 (single process)  vs  --ranks 4 threads (one process)  vs  mpirun -np 4 (per process)
# Every process is sampled every 0.1 s: peak = its VmHWM (the most it was ever resident: what
# decides whether a model fits, start-up included), steady = the median VmRSS over the second
# half of its run (after start-up). Ratios are against --ranks 1. The default run clips
# (norm > 1), so post-validation never steps optimistically; the --grad-clip 0 row does, every
# step (its backup is then written).
# usage: bench/bench_memory.sh [zbpp binary] [extra train flags...]
#        (MPI as root needs no flag: the script allows it for mpirun)
set -euo pipefail

# Sampling mode (internal): run "$@" and print "rss <rank> <peak KiB> <steady KiB>" on stderr.
if [ "${1:-}" = "--sample" ]; then
    shift
    "$@" >/dev/null &
    pid=$!
    hwm=0
    samples=()
    while kill -0 "$pid" 2>/dev/null; do
        read -r h r < <(awk '/^VmHWM:/ { h = $2 } /^VmRSS:/ { r = $2 } END { print h + 0, r + 0 }' \
                        "/proc/$pid/status" 2>/dev/null || echo "0 0")
        [ "$h" -gt "$hwm" ] && hwm=$h
        [ "$r" -gt 0 ] && samples+=("$r")
        sleep 0.1
    done
    wait "$pid"
    n=${#samples[@]}
    steady=$(printf '%s\n' "${samples[@]:$((n / 2))}" | sort -n |
             awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : 0 }')
    echo "rss ${OMPI_COMM_WORLD_RANK:-0} $hwm $steady" >&2
    exit 0
fi

Z=$(readlink -f "${1:-build/zbpp}")
shift || true
SELF=$(readlink -f "$0")
SRC=$(cd "$(dirname "$0")/.." && pwd)
M=(--text "$SRC/data/demo_corpus.txt" --layers 8 --channels 512 --heads 8 --vocab 8192
   --seq 128 --batch 8 --microbatches 8 --steps 4 --quiet "$@")
P=(--ranks 4 --partition flops) # a later --partition wins

sample() { "$SELF" --sample "$@" 2>&1 | grep '^rss ' | tail -1; }   # "rss 0 peak steady"
one=$(sample "$Z" train "${M[@]}")
one_peak=$(awk '{ print $3 }' <<<"$one")
one_steady=$(awk '{ print $4 }' <<<"$one")
row() { # label, peak KiB, steady KiB
    awk -v l="$1" -v p="$2" -v s="$3" -v op="$one_peak" -v os="$one_steady" 'BEGIN {
        printf "%-38s peak %7.1f MiB (%.2fx)   steady %7.1f MiB (%.2fx)\n",
               l, p / 1024, p / op, s / 1024, s / os }'
}
row "--ranks 1:" "$one_peak" "$one_steady"
# FLOP-model partition unless the row says profiled (the default of zbpp train: start-up
# measures the stages' costs first)
for v in "threads::" "threads, profiled::--partition profile" \
         "threads, barrier sync::--optimizer-sync barrier" \
         "threads, --grad-clip 0::--grad-clip 0"; do
    label=${v%%::*}
    flags=${v#*::}
    # shellcheck disable=SC2086 # flags are words
    r=$(sample "$Z" train "${M[@]}" "${P[@]}" $flags)
    row "--ranks 4 $label:" "$(awk '{ print $3 }' <<<"$r")" "$(awk '{ print $4 }' <<<"$r")"
done
if command -v mpirun >/dev/null 2>&1; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    for v in "::" ", profiled::--partition profile"; do
        label=${v%%::*}
        flags=${v#*::}
        # shellcheck disable=SC2086
        out=$(mpirun --oversubscribe -np 4 "$SELF" --sample "$Z" train "${M[@]}" "${P[@]}" \
              $flags --transport mpi 2>&1 | grep '^rss ' | sort -k2n)
        while read -r _ rank peak steady; do
            row "mpirun -np 4$label, rank $rank:" "$peak" "$steady"
        done <<<"$out"
    done
fi
