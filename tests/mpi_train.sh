# zbpp train --transport mpi: the same bits as the thread transport and as --ranks 1 (losses in
# --metrics, checkpoint bytes), with -np 2 and -np 4 on localhost; sharded checkpoints resume
# bit-exactly across transports (threads <-> MPI) and across rank counts.
# usage: bash mpi_train.sh <zbpp> <source dir>
source "$(dirname "$0")/mpi_common.inc"
set -u

M="--text $TEXT --layers 4 --channels 32 --heads 2 --batch 8 --seq 16 --microbatches 8 --quiet"

"$Z" train $M --steps 4 --metrics ref.jsonl --save ref.ckpt || fail "--ranks 1 reference run"

same_as_ref() { # $1 = label, $2 = metrics, $3 = checkpoint
    diff <(metrics_core ref.jsonl) <(metrics_core "$2") >/dev/null || fail "$1: losses differ from --ranks 1"
    cmp -s ref.ckpt "$3" || fail "$1: checkpoint differs from --ranks 1"
    echo "ok: $1 bit-identical to --ranks 1 (metrics and checkpoint)"
}

for cfg in "2 zb-h1" "2 1f1b --optimizer-sync barrier" "4 zb-h2" "2 zb-v"; do
    set -- $cfg
    np=$1; shift
    label="-np $np $*"
    "$Z" train $M --steps 4 --ranks "$np" --schedule "$@" --metrics thr.jsonl --save thr.ckpt ||
        fail "threads $label"
    $MPIRUN -np "$np" "$Z" train $M --steps 4 --transport mpi --schedule "$@" \
        --metrics mpi.jsonl --save mpi.ckpt || fail "mpirun $label exited $?"
    cmp -s thr.ckpt mpi.ckpt || fail "$label: MPI checkpoint differs from threads"
    same_as_ref "mpi $label" mpi.jsonl mpi.ckpt
done

# --ranks must match the number of processes; it defaults to it
$MPIRUN -np 2 "$Z" train $M --steps 1 --transport mpi --ranks 3 >out.txt 2>&1 &&
    fail "--ranks 3 with -np 2 was accepted"
grep -q -- "--ranks 3 but 2 processes were started" out.txt || fail "no clear --ranks message: $(head -3 out.txt)"
echo "ok: --ranks != world size is refused"

# sharded checkpoints: constant LR so a 3+3 run equals a straight 6-step run
C="$M --lr-schedule constant"
"$Z" train $C --steps 6 --save straight.ckpt || fail "straight run"
"$Z" train $C --steps 3 --ranks 4 --schedule zb-h1 --checkpoint-format sharded --save thr.sh ||
    fail "threads sharded save"
$MPIRUN -np 4 "$Z" train $C --steps 3 --transport mpi --schedule zb-h1 --checkpoint-format sharded \
    --save mpi.sh || fail "mpi sharded save"
head -1 mpi.sh | grep -q "zbpp-sharded-checkpoint 1" || fail "no manifest at the --save path"
for r in 0 1 2 3; do
    cmp -s thr.sh.3-*.rank$r mpi.sh.3-*.rank$r || fail "shard of rank $r differs between threads and MPI"
done
echo "ok: sharded save identical (4 shards) with threads and MPI"

$MPIRUN -np 4 "$Z" train --quiet --text "$TEXT" --steps 6 --transport mpi --schedule zb-h1 \
    --resume thr.sh --save a.ckpt || fail "MPI resume of a threads checkpoint"
cmp -s a.ckpt straight.ckpt || fail "threads -> MPI resume is not bit-exact"
"$Z" train --quiet --text "$TEXT" --steps 6 --ranks 4 --schedule zb-h1 --resume mpi.sh --save b.ckpt ||
    fail "threads resume of an MPI checkpoint"
cmp -s b.ckpt straight.ckpt || fail "MPI -> threads resume is not bit-exact"
"$Z" train --quiet --text "$TEXT" --steps 6 --resume mpi.sh --save c.ckpt || fail "--ranks 1 resume"
cmp -s c.ckpt straight.ckpt || fail "sharded -> --ranks 1 resume is not bit-exact"
$MPIRUN -np 2 "$Z" train --quiet --text "$TEXT" --steps 6 --transport mpi --schedule 1f1b \
    --resume mpi.sh --checkpoint-format sharded --save mpi.sh || fail "-np 2 resume of a 4-rank checkpoint"
ls mpi.sh.3-* >/dev/null 2>&1 && fail "the previous checkpoint's shards were not removed"
[ "$(ls mpi.sh.6-*.rank* | wc -l)" = 2 ] || fail "expected 2 shards after the -np 2 save"
"$Z" train --quiet --text "$TEXT" --steps 6 --resume mpi.sh --save d.ckpt || fail "resume of the re-sharded checkpoint"
cmp -s d.ckpt straight.ckpt || fail "4 -> 2 rank re-sharding is not bit-exact"
echo "ok: sharded resume bit-exact threads->MPI, MPI->threads, ->--ranks 1, 4->2 ranks"

# a corrupted shard is refused, naming the file
S=$(ls mpi.sh.6-*.rank1)
printf 'X' | dd of="$S" bs=1 seek=100 conv=notrunc 2>/dev/null
"$Z" train --quiet --text "$TEXT" --steps 7 --ranks 2 --schedule 1f1b --resume mpi.sh >out.txt 2>&1 &&
    fail "a corrupt shard was resumed"
grep -q "corrupt" out.txt || fail "no corruption message: $(cat out.txt)"
echo "ok: corrupt shard refused"
echo "PASS"
