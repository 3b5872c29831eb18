# zbpp train --transport mpi with validation: the val loss of -np 2 (zb-h1) has the same bits as
# --ranks 1 and the thread transport, in the metrics and on the console.
# usage: bash mpi_val.sh <zbpp> <source dir>
source "$(dirname "$0")/mpi_common.inc"
set -u

# (the model flags first: mpi_startup.sh picks its victim by "zbpp train --text")
M="--layers 4 --channels 32 --heads 2 --batch 8 --seq 16 --microbatches 4 --steps 4 --text $TEXT
   --val-text $TEXT --val-every 2 --val-steps 3"
vals() { grep -o '"step":[0-9]*,"loss":[^,]*,"val_loss":[^,]*' "$1"; }

"$Z" train $M --metrics ref.jsonl >ref.out 2>/dev/null || fail "--ranks 1 reference"
"$Z" train $M --ranks 2 --schedule zb-h1 --metrics thr.jsonl >/dev/null 2>&1 || fail "threads"
$MPIRUN -np 2 "$Z" train $M --transport mpi --schedule zb-h1 --metrics mpi.jsonl >mpi.out 2>&1 ||
    fail "mpirun -np 2: $(tail -3 mpi.out)"
[ "$(vals ref.jsonl | wc -l)" -eq 2 ] || fail "reference has no val_loss on 2 steps"
[ "$(vals ref.jsonl)" = "$(vals mpi.jsonl)" ] || fail "MPI val loss differs from --ranks 1"
[ "$(vals thr.jsonl)" = "$(vals mpi.jsonl)" ] || fail "MPI val loss differs from threads"
[ "$(grep '^val loss' ref.out)" = "$(grep '^val loss' mpi.out)" ] || fail "printed val loss differs"
echo "ok: mpi -np 2 val loss bit-identical to --ranks 1 and threads"
