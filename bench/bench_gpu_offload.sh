#!/usr/bin/env bash
# Activation offload's goals on a GPU (docs/offload.md, "Runtime"), one script:
#   bench/bench_gpu_offload.sh BUILD [STEPS=6] [LAYERS=16] [T=1024] [PRECISION=bf16] [P=4] [M=8]
# A GPT-2 124M-like model (C=768, 12 heads, V=50257) with LAYERS blocks, P thread ranks on one
# GPU (each in its own SM partition), one sequence of T tokens per microbatch, M microbatches,
# --partition profile (so O and L are planned with the measured copy bandwidths), device
# messages. Runs, from their reports:
#  - zb-h1 (the reference) and zb-h1 --offload all: step time, the activation peak and the
#    stash slots (largest over the ranks), and the stashes --offload all holds at its peak, in
#    units of one microbatch's stash (zb-h1's rank 0 holds P at its peak; goal <= 2);
#  - 1f1b and 1f1b --offload all (a W right after its B): the stashes each rank holds at its
#    peak, in microbatches (1f1b's rank r holds P - r; goal <= 2);
#  - at half of zb-h1's activation memory (one --mem-limit-mb per rank: its total less half its
#    activation peak in zb-h1): --offload auto
#    with the families the simulator finds best there (interleaved-1f1b and looped-bfs at 2
#    chunks per rank, zb-h1, auto) and --recompute auto
#    (auto, zb-h1); the fastest run of each (goals: offload step <= 1.05 x zb-h1's and below
#    recompute's);
#  - every run's pipeline span measured against the simulator's (goal with offload: within 3 %).
# OFFLOAD_RUNS (names from the table, space-separated) runs only those besides ref (for a short
# device lease); unset: all. Writes every run's log next to the table; without a GPU it says so
# and exits 77.
set -uo pipefail
B=${1:?usage: bench_gpu_offload.sh BUILD [STEPS] [LAYERS] [T] [PRECISION] [P] [M]}
STEPS=${2:-6}
L=${3:-16}
T=${4:-1024}
PREC=${5:-bf16}
P=${6:-4}
M=${7:-8}
BENCH=bench_gpu_offload
source "$(dirname "$0")/gpu_bench_lib.sh" # Z, OUTDIR, run, big, field, ratio; exits 77 without a GPU

echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)," \
    "L=$L C=768 V=50257 T=$T, $PREC, P=$P thread ranks on one GPU, M=$M, $STEPS steps"
# wanted NAME: whether OFFLOAD_RUNS asks for this run (ref always)
wanted() {
    [ "$1" = ref ] || [ -z "${OFFLOAD_RUNS:-}" ] && return 0
    case " $OFFLOAD_RUNS " in *" $1 "*) return 0 ;; esac
    return 1
}
common=(--ranks "$P" --schedule zb-h1 --batch "$M" --microbatches "$M" --partition profile
    --gpu-messages device)
big ref "${common[@]}"
wanted all && big all "${common[@]}" --offload all
# 1f1b, whose W follows its B: rank r holds P - r stashes at its peak, which --offload all can
# take off the device (zb-h1's later W keeps a reloaded stash until then)
one=(--ranks "$P" --schedule 1f1b --batch "$M" --microbatches "$M" --partition profile
    --gpu-messages device)
wanted ref1 && big ref1 "${one[@]}"
wanted all1 && big all1 "${one[@]}" --offload all
limit=$(field ref half_limit)
# A two-chunk layout (8 stages, stage s on rank s mod P) holds more besides its activations on
# some ranks than zb-h1's (the last rank: two stages' state, the head's among them), so zb-h1's
# totals less half its activations would not even hold its parameters there. Its limits keep the
# same activation budget: each rank's static memory in that layout (a one-step probe without a
# limit) plus half of zb-h1's activation peak on that rank.
wanted off_interleaved || wanted off_looped || wanted rc_interleaved && run probe2 --ranks "$P" --schedule interleaved-1f1b --chunks 2 --batch "$M" --microbatches "$M" \
    --partition profile --gpu-messages device --layers "$L" --channels 768 --heads 12 \
    --vocab 50257 --seq "$T" --steps 1
limit2=$(add_lists "$(field probe2 static)" "$(field ref half_act)")
# at half memory: NAME FAMILY CHUNKS (0: the family's own) LIMITS MODE-FLAGS...
half() {
    local name=$1 fam=$2 v=$3 lim=$4
    shift 4
    wanted "$name" || return 0
    local chunks=()
    [ "$v" -gt 0 ] && chunks=(--chunks "$v")
    big "$name" --ranks "$P" --schedule "$fam" "${chunks[@]}" --batch "$M" --microbatches "$M" \
        --partition profile --gpu-messages device --mem-limit-mb "$lim" "$@"
}
runs=""
for r in ref all ref1 all1; do wanted $r && runs="$runs $r"; done
if [ -n "$limit" ]; then
    half off_interleaved interleaved-1f1b 2 "${limit2:-$limit}" --offload auto
    half off_looped looped-bfs 2 "${limit2:-$limit}" --offload auto
    half rc_interleaved interleaved-1f1b 2 "${limit2:-$limit}" --recompute auto
    half off_zbh1 zb-h1 0 "$limit" --offload auto
    half off_auto auto 0 "$limit" --offload auto
    half rc_auto auto 0 "$limit" --recompute auto
    half rc_zbh1 zb-h1 0 "$limit" --recompute auto
    for r in off_interleaved off_looped rc_interleaved off_zbh1 off_auto rc_auto rc_zbh1; do
        wanted $r && runs="$runs $r"
    done
else
    echo "no memory table in the reference run: the half-memory runs are skipped"
fi

printf "%-30s %8s %8s %9s %9s %9s %9s %8s\n" run "step ms" "vs zb-h1" "act.peak" "act.alloc" \
    "span ms" "pred ms" "span %"
best_off="" best_rc=""
for r in $runs; do
    st=$(field "$r" step)
    [ -n "$st" ] || { echo "$r: no step time (failed or did not fit: $(tail -1 "$OUTDIR/$r.log"))"; continue; }
    sm=$(field "$r" span_m) sp=$(field "$r" span_p)
    case $r in off_*) [ -z "$best_off" ] || awk -v a="$st" -v b="$(field "$best_off" step)" 'BEGIN { exit !(a < b) }' && best_off=$r ;; esac
    case $r in rc_*) [ -z "$best_rc" ] || awk -v a="$st" -v b="$(field "$best_rc" step)" 'BEGIN { exit !(a < b) }' && best_rc=$r ;; esac
    printf "%-30s %8s %8s %9s %9s %9s %9s %8s\n" "$r ($(sed -n 's/^pipeline: \([^,]*\),.*/\1/p' "$OUTDIR/$r.log" | head -1))" \
        "$st" "$(ratio "$st" "$(field ref step)")" "$(field "$r" peak_measured)" \
        "$(field "$r" alloc_measured)" "$sm" "$sp" \
        "$(awk -v a="$sm" -v b="$sp" 'BEGIN { if (a > 0 && b > 0) printf "%+.1f", 100 * (a / b - 1); else print "n/a" }')"
done
echo "--offload all holds $(awk -v a="$(field all peak_measured)" -v r="$(field ref peak_measured)" \
    -v p="$P" 'BEGIN { if (r > 0) printf "%.2f", p * a / r; else print "n/a" }') microbatches'" \
    "stashes at its peak (zb-h1's rank 0: $P; goal <= 2)"
# per rank, in microbatches' stashes: 1f1b's rank r holds P - r at its peak
echo "activation peak per rank (MiB): zb-h1 $(field ref peaks), --offload all $(field all peaks);" \
    "1f1b $(field ref1 peaks), --offload all $(field all1 peaks)"
echo "1f1b --offload all holds $(awk -v a="$(field all1 peaks)" -v r="$(field ref1 peaks)" -v p="$P" \
    'BEGIN { n = split(a, x, ","); split(r, y, ",")
             for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? "," : ""), (y[i] > 0 ? sprintf("%.2f", (p - i + 1) * x[i] / y[i]) : "n/a") }') microbatches' stashes per rank (goal <= 2 each)"
if [ -n "$best_off" ]; then
    echo "two-chunk layouts' limits ${limit2:-(no probe: as for zb-h1)} MiB (per rank: its static memory + half zb-h1's activations)"
    echo "limits $limit MiB (per rank): best offload $best_off / zb-h1: $(ratio "$(field "$best_off" step)" "$(field ref step)")" \
        "(goal <= 1.05); / best recompute ${best_rc:-none}: $(ratio "$(field "$best_off" step)" "$(field "${best_rc:-ref}" step)")" \
        "(goal < 1)"
fi
grep -h "^zbpp train:\|to page-locked" "$OUTDIR"/*.log 2>/dev/null | sort -u | head -5
echo "logs: $OUTDIR"
