# The figures the GPU pipeline benches read from a zbpp train log (sourced by gpu_bench_lib.sh;
# tests/cuda_bench_check.sh checks them on a sample log). Needs OUTDIR (the logs' folder).
# field NAME WHAT: a figure from a run's log
field() {
    local log=$OUTDIR/$1.log
    case $2 in
    step) sed -n 's/.*median step \([0-9.]*\) ms.*/\1/p' "$log" ;;
    bubble_m) sed -n 's/^bubble: measured \([0-9.]*\)%.*/\1/p' "$log" ;;
    bubble_p) sed -n 's/^bubble: .*predicted \([0-9.]*\)% (simulator).*/\1/p' "$log" ;;
    span_p) sed -n 's/^pipeline span .*predicted \([0-9.]*\) ms.*/\1/p' "$log" ;;
    span_m) sed -n 's/^pipeline span .*measured \([0-9.]*\) ms,.*/\1/p' "$log" ;;
    # the actions' makespan (first start to last end over every rank), measured and predicted
    makespan_m) sed -n 's/^outside the actions .*, actions \([0-9.]*\) ms.*/\1/p' "$log" ;;
    makespan_p) sed -n 's/^pipeline makespan .*predicted \([0-9.]*\) ms.*/\1/p' "$log" ;;
    outside_pct) sed -n 's/^outside the actions .*(\([0-9.-]*\)% of the step).*/\1/p' "$log" ;;
    # the step-phase table: the largest device time of a phase over the ranks. A row is
    # "  rank R  dev/ host  dev/ host ...": the pairs joined first, so phase i of the header is
    # field i + 2 of the row
    optimizer | rollback | tied-wte | grad-norm | norm-sync | backup | drain)
        awk -v want="$2" '/^step phases after the actions/ { on = 1; next }
            on && /^  rank / { gsub(/\/ +/, "/"); split($(col + 2), a, "/"); if (a[1] > m) m = a[1]; next }
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
    # one memory limit per rank (MiB, comma-separated, rank order, for --mem-limit-mb) at which
    # each rank keeps half its activation peak: its predicted total less half its peak
    half_limit)
        awk '$1 == "predicted" && NF >= 10 { printf "%s%.1f", n++ ? "," : "", $9 - $7 / 2 }' "$log" ;;
    # what each rank holds besides its activations, predicted (MiB, comma-separated, rank
    # order): parameters, gradients, optimizer state, backup, messages and workspace
    static)
        awk '$1 == "predicted" && NF >= 10 { printf "%s%.1f", n++ ? "," : "", $9 - $7 }' "$log" ;;
    # half of each rank's predicted activation peak (MiB, comma-separated, rank order)
    half_act)
        awk '$1 == "predicted" && NF >= 10 { printf "%s%.1f", n++ ? "," : "", $7 / 2 }' "$log" ;;
    # the measured activation peak of each rank (MiB, comma-separated, rank order)
    peaks)
        awk '$1 == "measured" && NF >= 10 { printf "%s%.1f", n++ ? "," : "", $7 }' "$log" ;;
    # the memory table's activation peak and stash allocation (MiB, the largest over the ranks)
    peak_predicted | peak_measured | alloc_predicted | alloc_measured)
        local col=7
        case $2 in alloc_*) col=10 ;; esac
        local want=${2#*_}
        awk -v want="$want" -v c=$col '$1 == want && NF >= 10 { if ($c > m) m = $c } END { printf "%.1f", m }' "$log" ;;
    esac
}
# add_lists A B: two comma-separated lists added element by element (%.1f); empty where their
# lengths differ or both are empty. (The ternary is parenthesised: inside printf's arguments mawk
# reads a bare '>' as a redirection.)
add_lists() {
    awk -v s="$1" -v h="$2" 'BEGIN {
        n = split(s, a, ","); if (split(h, b, ",") != n || n == 0) exit
        for (i = 1; i <= n; i++) printf "%s%.1f", (i > 1 ? "," : ""), a[i] + b[i] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else print "n/a" }'; }
