# Ctrl-C of `mpirun -np 2 zbpp train --transport mpi`: the ranks agree at a step boundary, stop
# together, --save is written and resumes to the same bytes as an uninterrupted run; non-zero
# exit.
# usage: bash mpi_signal.sh <zbpp> <source dir>
source "$(dirname "$0")/mpi_common.inc"
set -u

M="--text $TEXT --layers 2 --channels 32 --heads 2 --batch 4 --seq 16 --lr-schedule constant"
$MPIRUN -np 2 "$Z" train $M --transport mpi --steps 1000000 --save ck >out 2>err &
pid=$!
for _ in $(seq 600); do grep -q '^step 3/' err 2>/dev/null && break; sleep 0.1; done
grep -q '^step 3/' err || fail "no progress: $(tail -3 err)"
kill -INT "$pid"
wait "$pid"
rc=$?
[ "$rc" -ne 0 ] || fail "mpirun exited 0 after SIGINT"
k=$(sed -n 's/^interrupted after step \([0-9]*\) of.*/\1/p' out)
[ -n "$k" ] || fail "no 'interrupted' line (exit $rc): $(tail -3 out) $(tail -3 err)"
ls | grep -q '\.tmp\.' && fail "a temp file was left"
"$Z" train --resume ck --text "$TEXT" --steps $((k + 2)) --ranks 2 --quiet --save ck ||
    fail "resume"
"$Z" train $M --steps $((k + 2)) --ranks 2 --quiet --save straight || fail "straight run"
cmp -s ck straight || fail "resumed checkpoint differs from a straight run"
echo "ok: mpirun -np 2 stopped at step $k by SIGINT (exit $rc), resumes bit-exactly"
