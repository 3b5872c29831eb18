#!/usr/bin/env bash
# zbpp train --recompute: every mode trains to the checkpoint of --ranks 1 (also at --ranks 1,
# which then runs the pipeline with one rank); the memory report shows the smaller stash; auto
# recomputes only when --mem-limit-mb needs it (one limit for all ranks, or one per rank); bad
# values are one-line errors.
# usage: cli_train_recompute.sh <zbpp binary> <source dir>
set -euo pipefail
Z=$(readlink -f "$1")
SRC=$(readlink -f "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
common=(--text "$SRC/data/demo_corpus.txt" --layers 4 --channels 32 --heads 2 --seq 16
        --batch 8 --microbatches 8 --steps 2 --partition flops)

"$Z" train "${common[@]}" --quiet --save "$tmp/ref.ckpt"
for rc in none all auto; do
    for P in 1 2; do
        "$Z" train "${common[@]}" --ranks $P --schedule gpipe --recompute $rc \
            --save "$tmp/$rc$P.ckpt" >"$tmp/$rc$P.out"
        cmp "$tmp/ref.ckpt" "$tmp/$rc$P.ckpt" || fail "--recompute $rc --ranks $P: checkpoint differs"
    done
done
grep -q "^pipeline: gpipe+rc," "$tmp/all2.out" || fail "all: no +rc in $(grep pipeline: "$tmp/all2.out")"
grep -q "^pipeline: gpipe," "$tmp/auto2.out" || fail "auto without a limit recomputed"
# whole-rank totals of rank 0 (predicted row): recompute is smaller
total() { awk '/^ rank 0/{getline; print $9; exit}' "$1"; }
t_none=$(total "$tmp/none2.out") t_all=$(total "$tmp/all2.out")
awk -v a="$t_all" -v n="$t_none" 'BEGIN{exit !(a < n)}' || fail "recompute total $t_all MiB not below $t_none MiB"
echo "ok: every mode bit-identical to --ranks 1; rank 0 total $t_none -> $t_all MiB with recompute"

# auto under a limit between the two needs recomputes; none is refused there
mid=$(awk -v a="$t_all" -v n="$t_none" 'BEGIN{printf "%.3f", (a + n) / 2}')
"$Z" train "${common[@]}" --ranks 2 --schedule gpipe --recompute auto --mem-limit-mb "$mid" \
    --save "$tmp/mid.ckpt" >"$tmp/mid.out" || fail "auto at $mid MiB: $(tail -2 "$tmp/mid.out")"
grep -q "^pipeline: gpipe+rc," "$tmp/mid.out" || fail "auto at $mid MiB did not recompute"
cmp "$tmp/ref.ckpt" "$tmp/mid.ckpt" || fail "auto at $mid MiB: checkpoint differs"
if "$Z" train "${common[@]}" --ranks 2 --schedule gpipe --mem-limit-mb "$mid" >"$tmp/o" 2>&1; then
    fail "--recompute none fitted $mid MiB"
fi
grep -q "MiB" "$tmp/o" || fail "limit message without a unit: $(cat "$tmp/o")"
echo "ok: --recompute auto recomputes under --mem-limit-mb $mid, none is refused there"

# auto plans the recompute itself (which forwards, where each R goes); and below what any
# schedule needs, the error says so in MiB (limits: auto recomputes from ~0.69 to 0.8 MiB; they
# moved down from 1.25 / 1.2 when the pipeline's message buffers, stash pools, the threads' tied
# WTE and the post-validation backup shrank: docs/runtime.md, "Memory by lifetime")
"$Z" train "${common[@]}" --ranks 2 --schedule auto --recompute auto --mem-limit-mb 0.75 \
    --save "$tmp/auto.ckpt" >"$tmp/auto.out" || fail "auto --recompute auto at 0.75 MiB"
grep -q "^pipeline: auto, .* of [0-9]* forwards recomputed" "$tmp/auto.out" ||
    fail "auto did not recompute: $(grep pipeline: "$tmp/auto.out")"
cmp "$tmp/ref.ckpt" "$tmp/auto.ckpt" || fail "auto --recompute auto: checkpoint differs"
if "$Z" train "${common[@]}" --ranks 2 --schedule auto --mem-limit-mb 0.62 >"$tmp/o" 2>&1; then
    fail "auto fitted 0.62 MiB"
fi
grep -q "leaves the activations [0-9.]* MiB, below the [0-9.]* MiB that any schedule needs" \
    "$tmp/o" || fail "auto below the minimum: $(cat "$tmp/o")"
echo "ok: auto plans recompute under a limit; below any schedule's minimum it says so in MiB"

# one limit per rank: rank 0 at the midpoint (it must recompute), rank 1 with room: the same
# checkpoint, the report lists both limits; a list of the wrong length or with a bad value is a
# one-line error
"$Z" train "${common[@]}" --ranks 2 --schedule gpipe --recompute auto --mem-limit-mb "$mid,100" \
    --save "$tmp/ranks.ckpt" >"$tmp/ranks.out" || fail "limits $mid,100: $(tail -2 "$tmp/ranks.out")"
grep -q "^pipeline: gpipe+rc," "$tmp/ranks.out" || fail "limits $mid,100: no recompute"
grep -q "memory limits (--mem-limit), MiB on the whole-rank total: rank 0 [0-9.]*, rank 1 100.00" \
    "$tmp/ranks.out" || fail "limits not reported: $(grep -i limit "$tmp/ranks.out")"
cmp "$tmp/ref.ckpt" "$tmp/ranks.ckpt" || fail "limits $mid,100: checkpoint differs"
for bad in "1,2,3:3 values for 2 ranks" "1,,2:one per rank separated by commas" \
    "1,-2:expects a positive number, got '-2'"; do
    if "$Z" train "${common[@]}" --ranks 2 --mem-limit-mb "${bad%%:*}" >"$tmp/o" 2>&1; then
        fail "--mem-limit-mb ${bad%%:*} accepted"
    fi
    [ "$(wc -l <"$tmp/o")" -eq 1 ] || fail "--mem-limit-mb ${bad%%:*}: not one line: $(cat "$tmp/o")"
    grep -q -- "${bad#*:}" "$tmp/o" || fail "--mem-limit-mb ${bad%%:*}: $(cat "$tmp/o")"
done
echo "ok: one --mem-limit-mb per rank recomputes where that rank needs it; bad lists refused"

# an interleaved family's limit is checked against its own placement (loop: the head on the last
# rank), not the V's (head and embedding both on rank 0): rank 0 needs 5.66 MiB besides its
# activations there, 6.64 in a V; at 6.4 it trains, recomputing some forwards (refused up front
# before 2026-11-28)
"$Z" train --text "$SRC/data/demo_corpus.txt" --ranks 4 --schedule interleaved-1f1b --chunks 2 \
    --layers 8 --channels 64 --heads 2 --seq 32 --vocab 4096 --batch 8 --microbatches 8 \
    --steps 1 --partition flops --mem-limit-mb 6.4,20,20,20 --recompute auto >"$tmp/il.out" 2>&1 ||
    fail "interleaved at rank 0's loop bound: $(tail -1 "$tmp/il.out")"
grep -q "^pipeline: interleaved-1f1b+rc, P=4 v=2" "$tmp/il.out" ||
    fail "interleaved under its limit: $(grep pipeline: "$tmp/il.out")"
echo "ok: an interleaved family's limit meets its own placement's bound"

for bad in some ALL ""; do
    if "$Z" train "${common[@]}" --ranks 2 --recompute "$bad" >"$tmp/o" 2>&1; then
        fail "--recompute '$bad' accepted"
    fi
    [ "$(wc -l <"$tmp/o")" -eq 1 ] || fail "--recompute '$bad': not one line: $(cat "$tmp/o")"
    grep -q "expects none, all or auto" "$tmp/o" || fail "--recompute '$bad': $(cat "$tmp/o")"
done
echo "ok: bad --recompute values are one-line errors"
