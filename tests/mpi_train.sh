# zbpp train --transport mpi: the same bits as the thread transport and as --ranks 1 (losses in
# --metrics, checkpoint bytes), with -np 2 and -np 4 on localhost; --dp 2 x P 2 at -np 4 against
# threads; --trace (timelines gathered to rank 0); sharded checkpoints resume bit-exactly across
# transports (threads <-> MPI) and across rank counts; measured costs under MPI (rank 0 profiles
# and shares its figures, so every rank plans the same partition and schedule).
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

for cfg in "2 zb-h1" "2 1f1b --optimizer-sync barrier --partition flops" "4 zb-h2" "2 zb-v" \
    "2 zb-v --recompute all" "4 1f1b --recompute all --partition flops" \
    "2 zb-h1 --keep-activations selective"; do
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

# ranks that disagree on --recompute run different programs: the handshake names it
$MPIRUN -np 1 "$Z" train $M --steps 1 --transport mpi --schedule zb-h1 --partition flops : \
    -np 1 "$Z" train $M --steps 1 --transport mpi --schedule zb-h1 --partition flops \
    --recompute all >out.txt 2>&1 && fail "mixed --recompute was accepted"
grep -q "rank 1 disagrees on: .*schedule" out.txt || fail "no --recompute mismatch message: $(head -3 out.txt)"
echo "ok: mixed --recompute none/all refused by the handshake"

# measured costs under MPI: rank 0 profiles and sends its figures to rank 1 before planning, so
# both partition and plan `auto` alike (the handshake hashes partition and schedule); 6 blocks
# leave the partition free to follow the measured costs. Same bits as --ranks 1.
A="--text $TEXT --layers 6 --channels 32 --heads 2 --batch 8 --seq 16 --microbatches 4 --steps 3"
"$Z" train $A --quiet --metrics aref.jsonl --save aref.ckpt || fail "--ranks 1 reference (6 blocks)"
for part in profile flops; do
    $MPIRUN -np 2 "$Z" train $A --transport mpi --schedule auto --partition $part \
        --metrics auto.jsonl --save auto.ckpt --trace auto.json >auto.out 2>&1 ||
        fail "mpirun -np 2 auto --partition $part: $(tail -3 auto.out)"
    diff <(metrics_core aref.jsonl) <(metrics_core auto.jsonl) >/dev/null ||
        fail "auto --partition $part: losses differ from --ranks 1"
    cmp -s aref.ckpt auto.ckpt || fail "auto --partition $part: checkpoint differs from --ranks 1"
    grep -q "bubble: measured .* predicted" auto.out || fail "no bubble line: $(cat auto.out)"
    if [ $part = profile ]; then
        grep -q "^pipeline: auto, .*stage costs measured on rank 0" auto.out ||
            fail "the MPI run did not plan with measured costs: $(grep pipeline: auto.out)"
        grep -q "predicted (profiled costs, s)" auto.predicted.svg ||
            fail "the predicted trace does not use the measured costs"
    else
        grep -q "^pipeline: auto, .*stage costs from the FLOP model" auto.out ||
            fail "--partition flops under MPI: $(grep pipeline: auto.out)"
        grep -q "predicted (FLOP model" auto.predicted.svg || fail "flops: predicted trace title"
    fi
    echo "ok: mpi -np 2 auto --partition $part (partition $(sed -n 's/^partition (first block of each stage): //p' auto.out)),"\
        "bit-identical to --ranks 1"
done
# a rank with another --partition is named by the handshake (and nobody waits for figures)
$MPIRUN -np 1 "$Z" train $A --transport mpi --schedule zb-h1 : \
    -np 1 "$Z" train $A --transport mpi --schedule zb-h1 --partition flops >out.txt 2>&1 &&
    fail "mixed --partition was accepted"
grep -q "rank 1 disagrees on: .*partition costs" out.txt || fail "no --partition mismatch message: $(head -3 out.txt)"
echo "ok: mixed --partition profile/flops refused by the handshake"

# --dp 2 x P 2 at -np 4 (global rank = replica*P + pipeline rank): the same bits as the thread
# run, and as --dp 2 --ranks 1 (the replicas without a pipeline); the replicas end identical
D="--text $TEXT --layers 4 --channels 32 --heads 2 --batch 8 --seq 16 --microbatches 2 --quiet --steps 4"
"$Z" train $D --dp 2 --metrics dpref.jsonl --save dpref.ckpt || fail "threads --dp 2 --ranks 1"
"$Z" train $D --dp 2 --ranks 2 --schedule zb-h1 --metrics dpthr.jsonl --save dpthr.ckpt ||
    fail "threads --dp 2 --ranks 2"
$MPIRUN -np 4 "$Z" train ${D/--quiet/} --transport mpi --dp 2 --schedule zb-h1 \
    --metrics dpmpi.jsonl --save dpmpi.ckpt >dp.out 2>&1 || fail "mpirun -np 4 --dp 2: $(tail -3 dp.out)"
cmp -s dpthr.ckpt dpmpi.ckpt || fail "--dp 2 -np 4: MPI checkpoint differs from threads"
cmp -s dpref.ckpt dpmpi.ckpt || fail "--dp 2 -np 4: checkpoint differs from --dp 2 --ranks 1"
diff <(metrics_core dpthr.jsonl) <(metrics_core dpmpi.jsonl) >/dev/null || fail "--dp 2: MPI losses differ from threads"
grep -q "replicas: 2, identical after the run" dp.out || fail "no replica check in: $(cat dp.out)"
grep -q "rank 3 (replica 1, pipeline rank 1)" dp.out || fail "report does not name replica ranks"
echo "ok: --dp 2 x --ranks 2 at -np 4 bit-identical to threads and to --dp 2 --ranks 1"
# replica 0 writes the sharded checkpoint (2 shards); every replica resumes from it
DC="${D/--quiet/--quiet --lr-schedule constant}"
"$Z" train ${DC/--steps 4/--steps 6} --dp 2 --save dpstraight.ckpt || fail "threads --dp 2 straight run"
$MPIRUN -np 4 "$Z" train ${DC/--steps 4/--steps 3} --transport mpi --dp 2 --schedule zb-h1 \
    --checkpoint-format sharded --save dp.sh || fail "mpi --dp 2 sharded save"
[ "$(ls dp.sh.3-*.rank* | wc -l)" = 2 ] || fail "expected 2 shards (replica 0's ranks): $(ls dp.sh*)"
$MPIRUN -np 4 "$Z" train --quiet --text "$TEXT" --steps 6 --transport mpi --dp 2 --schedule zb-h1 \
    --resume dp.sh --save dpres.ckpt || fail "mpi --dp 2 resume"
cmp -s dpres.ckpt dpstraight.ckpt || fail "--dp 2 sharded resume under MPI is not bit-exact"
echo "ok: --dp 2 sharded checkpoint (replica 0's shards) resumes bit-exactly under MPI"
$MPIRUN -np 3 "$Z" train $D --transport mpi --dp 2 >out.txt 2>&1 && fail "--dp 2 at -np 3 was accepted"
grep -q -- "3 processes cannot be split into --dp 2 equal pipelines" out.txt ||
    fail "no clear --dp world size message: $(head -3 out.txt)"
$MPIRUN -np 3 "$Z" train $D --transport mpi --dp 2 --ranks 2 >out.txt 2>&1 &&
    fail "--dp 2 --ranks 2 at -np 3 was accepted"
grep -q -- "--dp 2 x --ranks 2 = 4 ranks but 3 processes were started" out.txt ||
    fail "no clear --dp x --ranks message: $(head -3 out.txt)"
echo "ok: a world size that is not --dp x --ranks is refused"

# --trace under MPI: rank 0 gathers every rank's timeline of the last step (one track per
# pipeline rank), writes the measured and predicted traces and reports the measured bubble
$MPIRUN -np 2 "$Z" train ${M/--quiet/} --steps 2 --transport mpi --schedule zb-h1 \
    --trace tr.json >tr.out 2>&1 || fail "mpirun --trace: $(tail -3 tr.out)"
grep -q "bubble: measured .* predicted" tr.out || fail "no measured bubble under MPI: $(cat tr.out)"
for f in tr.json tr.predicted.json tr.svg tr.predicted.svg; do
    [ -s "$f" ] || fail "--trace did not write $f"
done
python3 - tr.json 2 <<'PY' || fail "tr.json is not a Chrome trace with one track per rank"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
ranks = int(sys.argv[2])
spans = [e for e in events if e.get("ph") == "X"]
tracks = {e["tid"] for e in spans}
assert tracks == set(range(ranks)), tracks
for e in spans:
    assert e["dur"] >= 0 and e["ts"] >= 0, e
# each rank ran its whole program: F, B and W of 8 microbatches at least
for r in range(ranks):
    names = [e["name"] for e in spans if e["tid"] == r]
    assert sum(n.startswith("F") for n in names) >= 8, (r, names[:5])
# one time origin: F of stage 1 starts after F of stage 0 of the same microbatch ended (it
# waits for its activation), up to the skew of the ranks' barrier exits (allow 5 ms)
end0 = {e["args"]["mb"]: e["ts"] + e["dur"] for e in spans if e["tid"] == 0 and e["name"].startswith("F ")}
for e in spans:
    if e["tid"] == 1 and e["name"].startswith("F "):
        assert e["ts"] >= end0[e["args"]["mb"]] - 5000, (e, end0)
PY
echo "ok: --trace under MPI writes a valid Chrome trace with one track per rank"

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
