#!/usr/bin/env bash
# zbpp demo (`make run`):
#   1. the planner: 1F1B vs ZB-H1 vs ZB-H2 on a default pipeline (simulated),
#   2. the main job: train the demo GPT on the demo corpus with 2 pipeline ranks (threads) and a
#      zero-bubble schedule (ZB-H2), stage costs measured at start-up (zbpp profile),
#   3. the same model with 1F1B: median step time, bubble measured vs predicted,
#   4. the files written into out/ (measured and predicted timelines, SVG charts).
# Usage: scripts/demo.sh <zbpp-binary>        (OUT_DIR overrides out/, STEPS the training steps)
set -euo pipefail
ZBPP=${1:?usage: demo.sh <zbpp-binary>}
OUT=${OUT_DIR:-out}
STEPS=${STEPS:-30}
mkdir -p "$OUT"

# ---- 1. planner ----
P=4
M=12
COST="1,1,0.7,0.05"
echo "== 1. planner: P=$P ranks, M=$M microbatches, F=1 B=1 W=0.7 comm=0.05 (simulated) =="
summary() { "$ZBPP" schedule -s "$1" -p "$P" -m "$M" --cost "$COST" | tail -1; }
field() { sed -E "s/.*$1 ([^ ,%]+).*/\\1/" <<<"$2"; }
printf '  %-8s %10s %12s %13s %10s\n' schedule makespan "bubble rate" "peak memory" "vs 1f1b"
base=""
for s in 1f1b zb-h1 zb-h2; do
  line=$(summary "$s")
  mk=$(field makespan "$line")
  [ -n "$base" ] || base=$mk
  printf '  %-8s %10s %11s%% %13s %10s\n' "$s" "$mk" "$(field 'bubble rate' "$line")" \
    "$(field 'peak memory' "$line")" "$(awk -v a="$mk" -v b="$base" 'BEGIN{printf "%.3fx", a/b}')"
  "$ZBPP" schedule -s "$s" -p "$P" -m "$M" --cost "$COST" --format svg -o "$OUT/plan_${s}.svg"
done
echo "  (memory in units of one microbatch's activations; zb-h2 buys its smaller bubble with 2P-1 of them)"

# ---- 2. training ----
# Compute dominates at this size (C=256, T=128): the bubble is about scheduling, not overhead.
model=(--layers 8 --channels 256 --heads 4 --seq 128 --batch 8 --microbatches 8 --lr 1e-3
       --warmup 3 --seed 1337)
echo
echo "== 2. training the demo GPT (L=8 C=256 T=128, 8 microbatches of 1 sequence) on the demo"
echo "      corpus with 2 pipeline ranks (threads), schedule ZB-H2, $STEPS steps =="
progress=/dev/null
[ -t 2 ] && progress=/dev/stderr
run() { # tag schedule steps -> out/train_<tag>.{report,jsonl,trace.json,...}
  "$ZBPP" train "${model[@]}" --steps "$3" --ranks 2 --schedule "$2" \
    --metrics "$OUT/train_$1.jsonl" --trace "$OUT/train_$1.trace.json" \
    ${4:+--save-model "$4"} >"$OUT/train_$1.report" 2>"$progress"
}
run zb-h2 zb-h2 "$STEPS" "$OUT/demo_model.bin"
printf '  %5s %9s %10s\n' step loss "step ms"
awk -F'[:,}]' -v n="$STEPS" '{
    for (i = 1; i < NF; i++) { if ($i ~ /"step"$/) s = $(i+1); if ($i ~ /"loss"$/) l = $(i+1);
                               if ($i ~ /"step_ms"$/) t = $(i+1) }
    if (s == 0 || (s + 1) % 5 == 0 || s + 1 == n) printf "  %5d %9.4f %10.1f\n", s + 1, l, t
  }' "$OUT/train_zb-h2.jsonl"
grep -E "^(pipeline|partition|trained|bubble)" "$OUT/train_zb-h2.report" | sed 's/^/  /'

# ---- 3. comparison ----
CMP_STEPS=$(( STEPS < 12 ? STEPS : 12 ))
echo
echo "== 3. ZB-H2 vs 1F1B, same model ($CMP_STEPS more steps of 1F1B; bubble of the last step,"
echo "      predicted = simulator with the costs measured at start-up) =="
run 1f1b 1f1b "$CMP_STEPS"
med() { sed -nE 's/.*median step ([0-9.]+) ms.*/\1/p' "$OUT/train_$1.report"; }
bub() { sed -nE "s/^bubble: measured ([0-9.]+)%.*predicted ([0-9.]+)%.*/\\$2/p" \
          "$OUT/train_$1.report"; }
printf '  %-9s %14s %10s %16s %17s\n' schedule "median step ms" "vs 1f1b" "bubble measured" \
  "bubble predicted"
for s in 1f1b zb-h2; do
  printf '  %-9s %14s %10s %15s%% %16s%%\n' "$s" "$(med "$s")" \
    "$(awk -v a="$(med "$s")" -v b="$(med 1f1b)" 'BEGIN{printf "%.3fx", a/b}')" \
    "$(bub "$s" 1)" "$(bub "$s" 2)"
done
echo "  (timings are noisy when other programs share the 2 cores)"

# ---- 4. files ----
echo
echo "== 4. files =="
for s in zb-h2 1f1b; do
  echo "  $s measured:  $OUT/train_$s.trace.json  $OUT/train_$s.trace.svg"
  echo "  $s predicted: $OUT/train_$s.trace.predicted.json  $OUT/train_$s.trace.predicted.svg"
done
echo "  planner charts: $OUT/plan_1f1b.svg $OUT/plan_zb-h1.svg $OUT/plan_zb-h2.svg"
echo "  trained model (llm.c format): $OUT/demo_model.bin; losses: $OUT/train_zb-h2.jsonl"
echo "  (open .svg in a browser, .trace.json in https://ui.perfetto.dev or chrome://tracing)"
