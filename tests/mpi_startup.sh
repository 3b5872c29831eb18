# zbpp train --transport mpi: a rank stopped right after launch (before or inside MPI_Init) must
# not leave the others waiting in MPI_Init forever: --comm-timeout covers start-up (issue 16, 5).
# usage: bash mpi_startup.sh <zbpp> <source dir>
source "$(dirname "$0")/mpi_common.inc"
set -u

$MPIRUN -np 2 "$Z" train --text "$TEXT" --layers 2 --channels 32 --heads 2 --batch 4 --seq 16 \
    --steps 2 --transport mpi --comm-timeout 4 --quiet >out.txt 2>&1 &
mp=$!
victim= first=
for _ in $(seq 500); do
    # ranks of this job only: a command-line match could stop another test's process
    victim=$(rank_pid "$mp" 1)
    first=$(rank_pid "$mp" 0)
    [ -n "$victim" ] && [ -n "$first" ] && break
    sleep 0.01
done
[ -n "$victim" ] && [ -n "$first" ] || fail "no rank processes appeared"
kill -STOP "$victim"
# the guard bounds the test: mpirun has been seen to wait for the stopped rank after rank 0
# exited (and once to ignore SIGTERM): SIGKILL 10 s later, so a hang fails in 70 s, not at
# ctest's timeout
( sleep 60; kill -CONT "$victim"; kill "$mp"; sleep 10; kill -9 "$mp" ) >/dev/null 2>&1 &
guard=$!
start=$(date +%s)
# what zbpp owes: rank 0 ends by itself within its start-up timeout. How soon mpirun then
# tears down a stopped rank is Open MPI's business, so the clock stops when rank 0 has exited
# (gone, or a zombie mpirun has not reaped yet)
alive() { [ -e "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
while alive "$first" && [ $(($(date +%s) - start)) -lt 40 ]; do
    sleep 0.1
done
took=$(($(date +%s) - start))
kill -CONT "$victim" 2>/dev/null # let mpirun finish tearing the job down
wait "$mp"
rc=$?
kill "$guard" 2>/dev/null
kill -9 "$victim" 2>/dev/null
[ "$rc" -ne 0 ] || fail "the job exited 0 with a stopped rank"
[ "$took" -lt 40 ] || fail "start-up with a stopped rank: rank 0 still ran after ${took}s (--comm-timeout 4)"
grep -q "did not finish within 4 s\|stopped responding\|failed" out.txt ||
    fail "no start-up timeout message: $(head -3 out.txt)"
echo "ok: a rank stopped at launch ends rank 0 in ${took}s with: $(grep -m1 'zbpp train' out.txt)"
