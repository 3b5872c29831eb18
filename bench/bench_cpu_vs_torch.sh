#!/usr/bin/env bash
# bench_cpu_vs_torch.sh — one GPT-2 124M training step on the CPU, zbpp next to PyTorch, at 1, 2
# and all cores: B=8, T=128, fp32, one microbatch; forward, backward, grad clip 1.0, AdamW
# (zbpp train; bench/torch_gpt2.py --device cpu, eager). Each run trains STEPS+1 steps and its
# figure is the median of steps 2..STEPS+1 (the first warms caches and allocators); the two
# take turns at each thread count, REPS times, and the table shows the median over the reps,
# so a noisy neighbour hits both. Prints the BLAS kernel each one ran. On a loaded machine wall
# time says little, so a last row compares one-thread CPU time per step (zbpp: bench_gpt2_step's
# whole step, the same model, batch and AdamW without data loading; torch: the process's CPU
# time of each step), which a neighbour does not inflate the same way.
# PyTorch: Debian's python3-torch (run with /usr/bin/python3) or any torch on $PYTHON; its BLAS
# threads follow OPENBLAS_NUM_THREADS / OMP_NUM_THREADS, set here to the thread count.
# Same kernels for both: where OpenBLAS mistakes the CPU (a VM's generic "Intel Xeon Processor")
# and zbpp sets OPENBLAS_CORETYPE itself, PyTorch (Debian's torch runs the same OpenBLAS) and
# bench_gpt2_step get that setting too, and the header names the kernel each ran. Otherwise the
# comparison would be with a PyTorch 4x slower than it can be.
# Where zbpp runs bf16 products on this CPU (AVX512-BF16/AMX and oneDNN: docs/compute.md),
# columns give zbpp's bf16 step, the fp32/bf16 ratio (issue 32's goal: at least 1.5) and
# PyTorch's bf16 step (autocast) beside it; else a line says why not.
#
# usage: bash bench/bench_cpu_vs_torch.sh [zbpp] [steps reps layers "threads..."]
#        (defaults: build/zbpp 3 1 12 "1 2 <all cores>"; rows come in the order given, each
#        printed when measured: on a bounded call, name the count that matters most first)
set -u
Z=${1:-build/zbpp}
STEPS=${2:-3} REPS=${3:-1} L=${4:-12}
ALL=$(nproc)
THREADS=${5:-$(printf '%s\n' 1 2 "$ALL" | awk '!seen[$1]++ && $1 <= '"$ALL"'' | tr '\n' ' ')}
PY=${PYTHON:-/usr/bin/python3}
SRC=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d /tmp/zbpp_bench_cpu_torch.XXXXXX)
trap 'rm -rf "$W"' EXIT
B=8 T=128
MODEL="--text $SRC/data/demo_corpus.txt --layers $L --channels 768 --heads 12 --vocab 50257
--max-seq 1024 --batch $B --seq $T --steps $((STEPS + 1)) --quiet"

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

"$PY" -c 'import torch' 2>/dev/null || { echo "no torch for $PY (apt-get install python3-torch)"; exit 77; }
# shellcheck disable=SC2086
zk=$("$Z" train $MODEL --steps 0 --verbose 2>&1 | sed -n 's/^zbpp train: CPU kernels: //p')
# the core zbpp chose for OpenBLAS, for the others too (unset: theirs is OpenBLAS's own choice)
core=$(sed -n 's/.*zbpp set OPENBLAS_CORETYPE=\([A-Za-z0-9]*\).*/\1/p' <<<"$zk")
[ -n "$core" ] && export OPENBLAS_CORETYPE=$core
tk=$(OPENBLAS_NUM_THREADS=1 "$PY" "$SRC/bench/torch_gpt2.py" --device cpu --threads 1 \
     --layers 0 --B 1 --T 8 --steps 0 --precision fp32 --mode eager 2>&1 | head -1)
echo "GPT-2 124M (L=$L) B=$B T=$T fp32, one step; $STEPS timed steps x $REPS reps; cores: $ALL;" \
     "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
echo "zbpp:  $zk"
echo "torch: $tk${core:+ (given OPENBLAS_CORETYPE=$core, as zbpp set it)}"
# shellcheck disable=SC2086
if "$Z" train $MODEL --steps 0 --precision bf16 --verbose >"$W/bf" 2>&1; then
    BF16=1
    echo "zbpp bf16: $(sed -n 's/^zbpp train: CPU bf16 products: //p' "$W/bf")"
else
    BF16=0
    echo "zbpp bf16: not run here: $(tail -1 "$W/bf")"
fi
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

zbpp_ms() { # threads [more flags] -> median step ms of one run
    # shellcheck disable=SC2086
    "$Z" train $MODEL --threads "$@" --metrics "$W/m.jsonl" >"$W/out" 2>&1 ||
        { echo "zbpp --threads $1 failed: $(tail -1 "$W/out")" >&2; return 1; }
    grep -o '"step_ms": *[0-9.]*' "$W/m.jsonl" | tail -n +2 | sed 's/.*: *//' | median
}
torch_ms() { # threads [precision] -> median step ms of one run
    local prec=${2:-fp32}
    OPENBLAS_NUM_THREADS=$1 OMP_NUM_THREADS=$1 "$PY" "$SRC/bench/torch_gpt2.py" --device cpu \
        --threads "$1" --layers "$L" --B $B --T $T --M 1 --steps "$STEPS" --precision "$prec" \
        --mode eager --times >"$W/tout" 2>&1 ||
        { echo "torch --threads $1 $prec failed: $(tail -1 "$W/tout")" >&2; return 1; }
    sed -n 's/^step_ms //p' "$W/tout" | tr ' ' '\n' | median
    [ "$1" -eq 1 ] && [ "$prec" = fp32 ] &&
        sed -n 's/^cpu_ms //p' "$W/tout" | tr ' ' '\n' | median >>"$W/tcpu"
    return 0
}
zbpp_cpu_ms() { # one thread, whole step, thread CPU time (bench_gpt2_step)
    "$(dirname "$Z")/bench_gpt2_step" "$STEPS" $B $T "$L" >"$W/zout" 2>&1 ||
        { echo "bench_gpt2_step failed: $(tail -1 "$W/zout")" >&2; return 1; }
    sed -n 's/^ *whole step thread CPU *//p' "$W/zout"
}

# one row per thread count as soon as it is measured (a run cut short by a time limit keeps its
# rows): at each count the two take turns REPS times
printf "%-8s %12s %12s %12s" threads "zbpp ms" "torch ms" "zbpp/torch"
[ "$BF16" = 1 ] && printf " %14s %14s %14s" "zbpp bf16 ms" "fp32/bf16" "torch bf16 ms"
echo
: >"$W/zcpu"; : >"$W/tcpu"
for t in $THREADS; do
    : >"$W/z$t"; : >"$W/t$t"; : >"$W/b$t"; : >"$W/tb$t"
    for rep in $(seq 1 "$REPS"); do
        zbpp_ms "$t" >>"$W/z$t" || exit 1
        torch_ms "$t" >>"$W/t$t" || exit 1
        if [ "$BF16" = 1 ]; then
            zbpp_ms "$t" --precision bf16 >>"$W/b$t" || exit 1
            torch_ms "$t" bf16 >>"$W/tb$t" || exit 1
        fi
        if [ "$t" -eq 1 ] && [ -x "$(dirname "$Z")/bench_gpt2_step" ]; then
            zbpp_cpu_ms >>"$W/zcpu" || exit 1
        fi
    done
    z=$(median <"$W/z$t") p=$(median <"$W/t$t")
    printf "%-8s %12.0f %12.0f %12.3f" "$t" "$z" "$p" "$(awk -v a="$z" -v b="$p" 'BEGIN {print a / b}')"
    if [ "$BF16" = 1 ]; then
        b=$(median <"$W/b$t") tb=$(median <"$W/tb$t")
        printf " %14.0f %14.3f %14.0f" "$b" "$(awk -v a="$z" -v b="$b" 'BEGIN {print a / b}')" "$tb"
    fi
    echo
done
if [ -s "$W/zcpu" ] && [ -s "$W/tcpu" ]; then
    z=$(median <"$W/zcpu") p=$(median <"$W/tcpu")
    printf "%-8s %12.0f %12.0f %12.3f   (CPU time per step)\n" "1 cpu" "$z" "$p" \
        "$(awk -v a="$z" -v b="$p" 'BEGIN {print a / b}')"
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
