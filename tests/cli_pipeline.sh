#!/usr/bin/env bash
# zbpp train --ranks P: same losses and the same checkpoint bytes as --ranks 1; bad setups are
# refused before training with exit status 2 and one clear line.
# usage: cli_pipeline.sh <zbpp binary> <source dir>
set -euo pipefail
ZBPP=$1
SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--text "$SRC/data/demo_corpus.txt" --layers 4 --channels 32 --heads 2 --seq 16
        --batch 8 --microbatches 4 --steps 3 --quiet)

"$ZBPP" train "${common[@]}" --metrics "$tmp/ref.jsonl" --save "$tmp/ref.ckpt"
losses() { grep -o '"loss":[^,]*' "$1"; }
for sched in 1f1b zb-h1 zb-h2; do
  for sync in post-validation barrier; do
    "$ZBPP" train "${common[@]}" --ranks 2 --schedule "$sched" --optimizer-sync "$sync" \
      --metrics "$tmp/p.jsonl" --save "$tmp/p.ckpt" --trace "$tmp/trace.json"
    diff <(losses "$tmp/ref.jsonl") <(losses "$tmp/p.jsonl") \
      || { echo "FAIL: $sched/$sync losses differ from --ranks 1"; exit 1; }
    cmp "$tmp/ref.ckpt" "$tmp/p.ckpt" \
      || { echo "FAIL: $sched/$sync checkpoint differs from --ranks 1"; exit 1; }
    grep -q '"traceEvents"' "$tmp/trace.json" || { echo "FAIL: no trace written"; exit 1; }
  done
done

# the report names the measured and predicted bubble
out=$("$ZBPP" train --text "$SRC/data/demo_corpus.txt" --layers 4 --channels 32 --heads 2 \
      --seq 16 --batch 8 --microbatches 4 --steps 2 --ranks 2 --schedule zb-h1 2>/dev/null)
grep -q "bubble: measured .* predicted" <<<"$out" || { echo "FAIL: no bubble report"; exit 1; }

# --dp 2 --ranks 2: replicas of the pipeline, the same bits as --dp 2 --ranks 1
"$ZBPP" train "${common[@]}" --dp 2 --save "$tmp/d1.ckpt"
loud=("${common[@]:0:${#common[@]}-1}") # without the trailing --quiet: the report is printed
out=$("$ZBPP" train "${loud[@]}" --dp 2 --ranks 2 --schedule zb-h1 \
      --save "$tmp/d2.ckpt" 2>/dev/null)
cmp "$tmp/d1.ckpt" "$tmp/d2.ckpt" || { echo "FAIL: --dp 2 --ranks 2 differs from --ranks 1"; exit 1; }
grep -q "replicas: 2, identical after the run" <<<"$out" || { echo "FAIL: no replica check: $out"; exit 1; }

expect_refused() { # expected-substring, args...
  local want=$1; shift
  set +e
  err=$("$ZBPP" train "${common[@]}" "$@" 2>&1 >/dev/null)
  rc=$?
  set -e
  [ "$rc" -ne 0 ] || { echo "FAIL: accepted: $*"; exit 1; }
  grep -q "$want" <<<"$err" || { echo "FAIL: '$*' said: $err"; exit 1; }
}
expect_refused "more stages" --ranks 8
expect_refused "not divisible" --ranks 2 --microbatches 3
expect_refused "unknown schedule" --ranks 2 --schedule nope
expect_refused "optimizer-sync" --ranks 2 --optimizer-sync sometimes
expect_refused "memory" --ranks 2 --schedule zb-h2 --mem-limit 100
expect_refused "not divisible by --dp 3" --ranks 2 --dp 3
expect_refused "per replica is not divisible by --microbatches 4" --ranks 2 --dp 4
expect_refused "positive integer" --dp 0
echo "cli_pipeline: ok"
