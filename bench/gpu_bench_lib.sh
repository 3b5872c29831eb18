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
# field NAME WHAT: a figure from a run's log
field() {
    local log=$OUTDIR/$1.log
    case $2 in
    step) sed -n 's/.*median step \([0-9.]*\) ms.*/\1/p' "$log" ;;
    bubble_m) sed -n 's/^bubble: measured \([0-9.]*\)%.*/\1/p' "$log" ;;
    bubble_p) sed -n 's/^bubble: .*predicted \([0-9.]*\)% (simulator).*/\1/p' "$log" ;;
    span_p) sed -n 's/^pipeline span .*predicted \([0-9.]*\) ms.*/\1/p' "$log" ;;
    span_m) sed -n 's/^outside the span .*, span \([0-9.]*\) ms,.*/\1/p' "$log" ;;
    outside_pct) sed -n 's/^outside the span .*(\([0-9.-]*\)% of the step)/\1/p' "$log" ;;
    # the step-phase table: the largest device time of a phase over the ranks
    optimizer | rollback | tied-wte | grad-norm | drain)
        awk -v want="$2" '/^step phases after the actions/ { on = 1; next }
            on && /^  rank / { v = $(col + 2); split(v, a, "/"); if (a[1] > m) m = a[1]; next }
            on && !/^  rank / && NF > 1 && !hdr { for (i = 1; i <= NF; i++) if ($i == want) col = i;
                                                  hdr = 1; next }
            on && hdr && !/^  rank / { on = 0 }
            END { printf "%.2f", col ? m : 0 }' "$log" ;;
    # the driver's count of the GPUs' memory in use at the end, and the ranks' allocations (MiB)
    gpu_in_use) sed -n 's/^  GPU memory in use at the end .*: \([0-9.]*\) MiB, of which.*/\1/p' "$log" ;;
    gpu_allocated) sed -n 's/^  GPU memory in use at the end .*allocated \([0-9.]*\)$/\1/p' "$log" ;;
    # the memory table: the largest total over the ranks (MiB), predicted or measured
    mem_predicted | mem_measured)
        awk -v want="${2#mem_}" '$1 == want && NF >= 10 { if ($9 > m) m = $9 } END { printf "%.1f", m }' "$log" ;;
    # the memory table's activation peak and stash allocation (MiB, the largest over the ranks)
    peak_predicted | peak_measured | alloc_predicted | alloc_measured)
        local col=7
        case $2 in alloc_*) col=10 ;; esac
        local want=${2#*_}
        awk -v want="$want" -v c=$col '$1 == want && NF >= 10 { if ($c > m) m = $c } END { printf "%.1f", m }' "$log" ;;
    esac
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else print "n/a" }'; }

