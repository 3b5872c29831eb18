#!/usr/bin/env bash
# zbpp demo (`make run`): 1F1B vs ZB-H1 vs ZB-H2 on a default pipeline, with unit costs and with
# a realistic cost model; ASCII grids on the terminal, SVG charts and Chrome traces in out/.
# Usage: scripts/demo.sh <zbpp-binary> [P] [M]     (OUT_DIR overrides out/)
set -euo pipefail
ZBPP=${1:?usage: demo.sh <zbpp-binary> [P] [M]}
P=${2:-4}
M=${3:-12}
OUT=${OUT_DIR:-out}
mkdir -p "$OUT"
SCHEDULES=(1f1b zb-h1 zb-h2)
COSTS=("1,1,1,0" "1,1,0.7,0.05")
COST_NAMES=("unit F=B=W=1, no comm" "realistic F=1 B=1 W=0.7 comm=0.05")

# The summary line of the ascii output:
# "makespan X, span T, bubble rate Y%, peak memory Z (rank r)".
summary() { "$ZBPP" schedule -s "$1" -p "$P" -m "$M" --cost "$2" | tail -1; }
field() { sed -E "s/.*$1 ([^ ,%]+).*/\\1/" <<<"$2"; }

echo "== zbpp: pipeline schedules for P=$P ranks, M=$M microbatches (memory: F +1, B 0, W -1) =="
echo "makespan: first start to last end; span T: longest per-rank time from its first F to its"
echo "last action; bubble rate (T - busy)/T as in the zero-bubble paper; peak memory in F units"
for k in "${!COSTS[@]}"; do
  cost=${COSTS[$k]}
  echo
  echo "-- costs: ${COST_NAMES[$k]} (--cost $cost)"
  printf '%-8s %10s %8s %12s %12s %16s\n' schedule makespan "span T" "bubble rate" "peak memory" \
    "speedup vs 1f1b"
  base=""
  for s in "${SCHEDULES[@]}"; do
    line=$(summary "$s" "$cost")
    mk=$(field makespan "$line")
    [ -n "$base" ] || base=$mk
    speed=$(awk -v a="$base" -v b="$mk" 'BEGIN { printf "%.3fx", a / b }')
    printf '%-8s %10s %8s %11s%% %12s %16s\n' "$s" "$mk" "$(field span "$line")" \
      "$(field 'bubble rate' "$line")" "$(field 'peak memory' "$line")" "$speed"
  done
done
# With F=B=W=1 and no comm the paper's closed forms give the span exactly: T = M(F+B+W) + bubble.
awk -v p="$P" -v m="$M" 'BEGIN {
  printf "\nclosed forms (unit costs): T = 3M + bubble time; 1f1b 3(P-1) -> T = %d, " \
         "zb-h1 (P-1) -> %d, zb-h2 0 -> %d; peak memory P = %d, P, 2P-1 = %d\n",
         3*m + 3*(p-1), 3*m + (p-1), 3*m, p, 2*p-1 }'

echo
echo "== ASCII grids, unit costs (one cell = one time unit) =="
for s in "${SCHEDULES[@]}"; do
  echo
  "$ZBPP" schedule -s "$s" -p "$P" -m "$M" | grep -v '^F forward'
done
echo
echo "F forward, B backward (input grad; full backward in 1f1b), W weight grad, . idle"

echo
echo "== files =="
for k in "${!COSTS[@]}"; do
  tag=$([ "$k" -eq 0 ] && echo unit || echo real)
  for s in "${SCHEDULES[@]}"; do
    base="$OUT/${s}_p${P}_m${M}_${tag}"
    "$ZBPP" schedule -s "$s" -p "$P" -m "$M" --cost "${COSTS[$k]}" --format svg -o "$base.svg"
    "$ZBPP" schedule -s "$s" -p "$P" -m "$M" --cost "${COSTS[$k]}" --format trace -o "$base.trace.json"
    "$ZBPP" schedule -s "$s" -p "$P" -m "$M" --cost "${COSTS[$k]}" --format csv -o "$base.csv"
    echo "  $base.svg  $base.trace.json  $base.csv"
  done
done
echo "(open the .svg in a browser, the .trace.json in https://ui.perfetto.dev or chrome://tracing;"
echo " the .csv loads in torch.distributed.pipelining with _load_csv(path, \"compute_only\"))"
