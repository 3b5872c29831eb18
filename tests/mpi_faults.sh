# zbpp train --transport mpi under faults: mismatched flags or binaries and start-up failures
# stop every rank with one clear message; a SIGSTOPped rank is reported within --comm-timeout;
# a kill -9'd rank ends the job with a non-zero exit (no hang); the last sharded checkpoint
# stays intact and resumable after either.
# usage: bash mpi_faults.sh <zbpp> <source dir>
source "$(dirname "$0")/mpi_common.inc"
set -u

M="--text $TEXT --layers 4 --channels 32 --heads 2 --batch 8 --seq 16 --microbatches 8 --quiet"

# flags that differ between ranks (MPMD launch): named, non-zero exit
$MPIRUN -np 1 "$Z" train $M --steps 2 --transport mpi --lr 1e-3 : \
    -np 1 "$Z" train $M --steps 2 --transport mpi --lr 2e-3 --schedule zb-h1 >out.txt 2>&1 &&
    fail "mismatched flags were accepted"
grep -q "rank 1 disagrees on: schedule, lr" out.txt || fail "no mismatch message: $(head -3 out.txt)"
[ "$(grep -c "disagrees" out.txt)" = 1 ] || fail "the mismatch was reported more than once"
echo "ok: mismatched flags -> 'rank 1 disagrees on: schedule, lr'"

# a different --dp (each side's world size fits its own flags): named by the handshake
$MPIRUN -np 2 "$Z" train ${M/8 --quiet/4 --quiet} --steps 1 --transport mpi --dp 2 --ranks 2 : \
    -np 2 "$Z" train ${M/8 --quiet/4 --quiet} --steps 1 --transport mpi --dp 1 --ranks 4 >out.txt 2>&1 &&
    fail "mismatched --dp was accepted"
grep -q "rank 2 disagrees on: ranks, dp" out.txt || fail "no --dp mismatch message: $(head -3 out.txt)"
echo "ok: mismatched --dp -> 'rank 2 disagrees on: ranks, dp, ...'"

# a different binary
cp "$Z" ./zbpp_other && printf 'x' >>./zbpp_other
$MPIRUN -np 1 "$Z" train $M --steps 2 --transport mpi : \
    -np 1 ./zbpp_other train $M --steps 2 --transport mpi >out.txt 2>&1 &&
    fail "mismatched binaries were accepted"
grep -q "rank 1 disagrees on: binary" out.txt || fail "no binary message: $(head -3 out.txt)"
echo "ok: mismatched binary detected"

# one rank cannot start (its data file is missing): it says why, the others stop too
$MPIRUN -np 2 "$Z" train $M --steps 2 --transport mpi : \
    -np 1 "$Z" train $M --steps 2 --transport mpi --text /nonexistent/corpus.txt >out.txt 2>&1 &&
    fail "a rank that failed to start went unnoticed"
grep -q "rank 2: cannot open /nonexistent/corpus.txt" out.txt || fail "no start-up message: $(head -3 out.txt)"
echo "ok: a rank failing at start-up stops the job with its reason"

# wrong process count for the schedule (more stages than blocks)
$MPIRUN -np 4 "$Z" train $M --steps 2 --transport mpi --schedule zb-v >out.txt 2>&1 &&
    fail "8 stages on 4 blocks were accepted"
grep -q "more stages (8) than transformer blocks (4)" out.txt || fail "no stage message: $(head -3 out.txt)"
echo "ok: too many processes for the model is refused"

# a long run checkpointing every 10 steps; returns once the first checkpoint exists
start_long_run() { # $1 = -np, $2 = extra flags
    rm -f ck.ckpt ck.ckpt.*
    $MPIRUN -np "$1" "$Z" train $M --steps 1000000 --transport mpi --save-every 10 \
        --checkpoint-format sharded --save ck.ckpt $2 >out.txt 2>&1 &
    RUN=$!
    for _ in $(seq 1 300); do
        [ -f ck.ckpt ] && return 0
        sleep 0.1
    done
    fail "no checkpoint after 30 s"
}

resume_ok() { # the last checkpoint must be complete and resumable
    local s
    s=$(awk '$1 == "step" {print $2}' ck.ckpt)
    "$Z" train --quiet --text "$TEXT" --steps $((s + 1)) --ranks 2 --schedule 1f1b --resume ck.ckpt ||
        fail "the last checkpoint (step $s) is not resumable after $1"
    echo "ok: checkpoint of step $s intact after $1"
}

# a rank that stops responding (SIGSTOP): the others time out, say who, and the job ends
start_long_run 2 "--comm-timeout 2"
sleep 0.5
victim=$(rank_pid $RUN 1)
[ -n "$victim" ] || fail "cannot find rank 1's pid"
kill -STOP "$victim"
t0=$(date +%s)
wait $RUN && fail "the job succeeded with a stopped rank"
t1=$(date +%s)
grep -q "rank 1 failed or stopped responding (no answer to a liveness check within 2 s; rank 0 timed out after 2 s" out.txt ||
    fail "no timeout message: $(head -5 out.txt)"
[ $((t1 - t0)) -le 20 ] || fail "took $((t1 - t0)) s to notice a stopped rank with --comm-timeout 2"
kill -CONT "$victim" 2>/dev/null
echo "ok: stopped rank reported after $((t1 - t0)) s: $(grep -m1 'stopped responding' out.txt)"
resume_ok "SIGSTOP"

# four ranks, rank 2 stopped: whoever times out first (waiting on rank 2, or on a rank that
# itself waits on rank 2) names rank 2, found by a liveness check, and nobody else
start_long_run 4 "--comm-timeout 2"
sleep 0.5
victim=$(rank_pid $RUN 2)
[ -n "$victim" ] || fail "cannot find rank 2's pid"
kill -STOP "$victim"
wait $RUN && fail "the job succeeded with a stopped rank"
kill -CONT "$victim" 2>/dev/null
grep -q "rank 2 failed or stopped responding (no answer to a liveness check" out.txt ||
    fail "rank 2 not named: $(head -5 out.txt)"
grep -E "ranks? [0-9, ]*[013][0-9, ]* failed or stopped responding" out.txt &&
    fail "a live rank was blamed: $(head -5 out.txt)"
echo "ok: 4 ranks, rank 2 stopped -> $(grep -m1 -o 'rank 2 failed or stopped responding ([^;]*' out.txt)"
# (its checkpoint resumes like any other: the -np 2 case above checks that)

# a rank killed mid-run: mpirun ends the job with a non-zero status, nothing hangs
start_long_run 4 "--schedule zb-h1"
sleep 0.5
victim=$(rank_pid $RUN 2)
[ -n "$victim" ] || fail "cannot find rank 2's pid"
kill -9 "$victim"
t0=$(date +%s)
wait $RUN
rc=$?
t1=$(date +%s)
[ $rc -ne 0 ] || fail "mpirun exited 0 after a rank was killed"
[ $((t1 - t0)) -le 30 ] || fail "took $((t1 - t0)) s to end the job after kill -9"
# the survivors' SIGTERM comes from mpirun: one line from rank 0 says so, no promise to save
grep -q "stopping after this step and saving" out.txt && fail "survivors promised a save: $(cat out.txt)"
[ "$(grep -c "the MPI launcher is ending the job" out.txt)" -le 1 ] ||
    fail "more than one line about the launcher: $(cat out.txt)"
echo "ok: kill -9 of rank 2 -> mpirun exit $rc after $((t1 - t0)) s"
resume_ok "kill -9"

echo "PASS"
