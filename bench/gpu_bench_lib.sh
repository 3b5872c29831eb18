# Shared by the GPU pipeline benches (bench_gpu_pipeline.sh, bench_gpu_offload.sh), sourced after
# they set B (the build directory), L, T, STEPS, PREC and BENCH (their log folder's name):
# Z (the zbpp binary), OUTDIR (logs), TEXT (the corpus); run / big (one training run, its log
# kept), field (a figure from a run's log), ratio. Exits 77 when there is no GPU.
Z=$B/zbpp
OUTDIR=${OUT:-gpu-out}/$BENCH
mkdir -p "$OUTDIR"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TEXT=$root/data/demo_corpus.txt

if ! "$Z" train --device cuda --steps 0 --quiet --text "$TEXT" >/dev/null 2>"$OUTDIR/probe.err"; then
    if grep -qi "no CUDA device\|without CUDA" "$OUTDIR/probe.err"; then
        echo "skipped: $(head -1 "$OUTDIR/probe.err")"
        exit 77
    fi
fi

# run NAME ARGS...: one training run (model flags given by the caller), its log kept
run() {
    local name=$1
    shift
    # bounded: a hung run must not eat the device call (a healthy one takes seconds)
    timeout 180 "$Z" train --device cuda --precision "$PREC" --text "$TEXT" \
        --lr-schedule constant "$@" >"$OUTDIR/$name.log" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || echo "FAILED ($rc): $name: $(tail -1 "$OUTDIR/$name.log")" >&2
    return $rc
}
big() { run "$@" --layers "$L" --channels 768 --heads 12 --vocab 50257 --seq "$T" --steps "$STEPS"; }
source "$root/bench/gpu_bench_fields.sh" # field, ratio

