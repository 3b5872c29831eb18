#!/usr/bin/env bash
# MPI ranks on a GPU: `mpirun -np P zbpp train --transport mpi --device cuda` (label gpu; issue
# 13). Exit 77 "skipped" without a CUDA device, mpirun or an MPI build. On the GPU machine
# scripts/gpu_deps.sh brings Open MPI. The processes share the one GPU; each puts its rank in a
# partition of K SMs (--sm-per-rank; each process splits the GPU alone, so the partitions are the
# same SMs), as the thread ranks it is compared with do. A small GPT-2
# (as cli_cuda_gpu_pipeline.sh):
#  - each process's device line names its MPI rank and the host staging of its messages;
#  - 1f1b, zb-h1 and zb-v at -np 2 and zb-h2 at -np 4 write the same checkpoint bytes and losses
#    as thread ranks (--ranks P) in partitions of the same size;
#  - 2 steps of MPI ranks on the GPU + 2 resumed on CPU thread ranks are within 1e-4 of 4 steps
#    on the GPU;
#  - a process that sees no GPU stops the job with its reason and a non-zero exit; nothing hangs.
# usage: cli_cuda_gpu_mpi.sh <zbpp binary> <source dir>
set -u
ZBPP=$(readlink -f "$1")
SRC=$2
SHAPE=(--layers 4 --heads 4 --channels 64)
RUN=(--seq 32 --batch 8 --microbatches 4 --lr 1e-3 --lr-schedule constant --text "$SRC/data/demo_corpus.txt")
K=(--sm-per-rank 16) # 4 ranks x 16 SMs fit any GPU with green contexts this test would meet

PROBE=(--device cuda)
source "$(dirname "$0")/cuda_gpu_common.inc"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_orte_tmpdir_base="$TMP" # own session dir: concurrent mpiruns race on /tmp's
if ! command -v mpirun >/dev/null 2>&1; then
  echo "skipped: mpirun not found (on the GPU machine: scripts/gpu_deps.sh brings Open MPI)"
  exit 77
fi
if mpirun -np 1 "$ZBPP" train --transport mpi --steps 0 --text "$SRC/data/demo_corpus.txt" 2>&1 |
  grep -q "built without MPI"; then
  echo "skipped: this zbpp was built without MPI"
  exit 77
fi

# mpi_train <name> <np> <args...>: as train, under mpirun (rank 0 writes metrics and checkpoint)
mpi_train() {
  local name=$1 np=$2 shape=("${SHAPE[@]}")
  shift 2
  case " $* " in *" --resume "*) shape=() ;; esac
  timeout 300 mpirun -np "$np" "$ZBPP" train --transport mpi "${shape[@]}" "${RUN[@]}" \
    --metrics "$TMP/$name.jsonl" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
    { fail "mpirun $name failed: $(grep -v '^-*$' "$TMP/$name.err" | head -3)"; return 1; }
}
# the metrics without the timing fields (they stand together before "skipped")
core() { sed -e 's/"step_ms":.*"skipped"/"skipped"/' "$TMP/$1.jsonl"; }

for cfg in "2 1f1b" "2 zb-h1" "2 zb-v" "4 zb-h2"; do
  set -- $cfg
  np=$1 sched=$2 label="-np $1 $2"
  train "thr_$np$sched" --steps 3 --device cuda --ranks "$np" "${K[@]}" --schedule "$sched" \
    --save "$TMP/thr_$np$sched.ckpt" || continue
  mpi_train "mpi_$np$sched" "$np" --steps 3 --device cuda "${K[@]}" --schedule "$sched" \
    --save "$TMP/mpi_$np$sched.ckpt" || continue
  cmp -s "$TMP/thr_$np$sched.ckpt" "$TMP/mpi_$np$sched.ckpt" &&
    diff <(core "thr_$np$sched") <(core "mpi_$np$sched") >/dev/null &&
    echo "$label: MPI ranks on the GPU give the thread ranks' checkpoint and losses bit for bit" ||
    fail "$label: MPI ranks differ from thread ranks"
done
grep -m1 "^device: cuda.*MPI rank" "$TMP/mpi_21f1b.out" "$TMP/mpi_21f1b.err" ||
  fail "no MPI rank in the device line: $(grep -h "^device" "$TMP"/mpi_21f1b.* | head -2)"

# across devices and transports: GPU MPI ranks, then CPU thread ranks
mpi_train g2 2 --steps 2 --device cuda "${K[@]}" --schedule zb-h1 --save "$TMP/g2.ckpt"
train g4 --steps 4 --device cuda --ranks 2 "${K[@]}" --schedule zb-h1
cp "$TMP/g2.jsonl" "$TMP/gc.jsonl" && train gc --steps 4 --ranks 2 --schedule zb-h1 --resume "$TMP/g2.ckpt"
compare gc g4 rel 1e-4 "2 steps of MPI ranks on the GPU + 2 on CPU thread ranks vs 4 on the GPU"

# a process without a GPU (rank 1): the job stops with the reason, non-zero, within the timeout
t0=$(date +%s)
timeout 120 mpirun -np 1 "$ZBPP" train --transport mpi "${SHAPE[@]}" "${RUN[@]}" --steps 2 --device cuda : \
  -np 1 env CUDA_VISIBLE_DEVICES= "$ZBPP" train --transport mpi "${SHAPE[@]}" "${RUN[@]}" --steps 2 \
  --device cuda >"$TMP/nogpu.out" 2>&1
rc=$?
t1=$(date +%s)
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
  fail "a process without a GPU: mpirun exit $rc (want non-zero, not the timeout's 124)"
elif grep -q "no CUDA device" "$TMP/nogpu.out"; then
  echo "a process without a GPU: mpirun exit $rc after $((t1 - t0)) s, reason: $(grep -m1 "no CUDA device" "$TMP/nogpu.out")"
else
  fail "a process without a GPU: no reason given: $(grep -v '^-*$' "$TMP/nogpu.out" | head -3)"
fi
[ "$fails" -eq 0 ] || exit 1
echo "cli_cuda_gpu_mpi: ok"
