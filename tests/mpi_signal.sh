# SIGINT to one rank process of `mpirun -np 2 zbpp train --transport mpi` (rank 1, not the one
# that prints): the ranks agree at a step boundary (an all-reduce of the flag), stop together,
# rank 0 writes --save, which resumes to the same bytes as an uninterrupted run; exit 130.
# (Ctrl-C on mpirun itself is Open MPI's: it sends SIGTERM to every rank and SIGKILL a second
# later, which may cut the save short; docs/training.md.)
# usage: bash mpi_signal.sh <zbpp> <source dir>
source "$(dirname "$0")/mpi_common.inc"
set -u

# (the model flags first: mpi_startup.sh picks its victim by "zbpp train --text")
M="--layers 2 --channels 32 --heads 2 --batch 4 --seq 16 --lr-schedule constant --text $TEXT"
$MPIRUN -np 2 "$Z" train $M --transport mpi --steps 1000000 --save ck >out 2>err &
pid=$!
for _ in $(seq 600); do grep -q '^step 3/' err 2>/dev/null && break; sleep 0.1; done
grep -q '^step 3/' err || fail "no progress: $(tail -3 err)"
r1=$(rank_pid "$pid" 1)
[ -n "$r1" ] || { kill -KILL "$pid"; fail "rank 1's process not found"; }
kill -INT "$r1"
wait "$pid"
rc=$?
[ "$rc" -eq 130 ] || fail "mpirun exited $rc after SIGINT to rank 1 (want 130)"
k=$(sed -n 's/^interrupted after step \([0-9]*\) of.*/\1/p' out)
[ -n "$k" ] || fail "no 'interrupted' line (exit $rc): $(tail -3 out) $(tail -3 err)"
ls | grep -q '\.tmp\.' && fail "a temp file was left"
"$Z" train --resume ck --text "$TEXT" --steps $((k + 2)) --ranks 2 --quiet --save ck ||
    fail "resume"
"$Z" train $M --steps $((k + 2)) --ranks 2 --quiet --save straight || fail "straight run"
cmp -s ck straight || fail "resumed checkpoint differs from a straight run"
echo "ok: SIGINT to rank 1 stopped -np 2 at step $k on both ranks (exit $rc), resumes bit-exactly"
