#!/usr/bin/env bash
# The tied embedding's gradient crosses between the embedding and the head rank in 1 MiB chunks
# (PL_WTE_CHUNK): with a vocabulary whose WTE spans three chunks (the last one partial), the
# pipeline still ends bit-identical to --ranks 1, on threads and under MPI; with the V placement
# (embedding and head on one rank) nothing crosses. The embedding-only rank's memory report
# shows no WTE-sized head accumulator.
# usage: cli_tied_chunks.sh <zbpp binary> <source dir>
set -euo pipefail
Z=$(readlink -f "$1")
SRC=$(readlink -f "$2")
tmp=$(mktemp -d)
export OMPI_MCA_orte_tmpdir_base="$tmp" # own Open MPI session dir: concurrent mpiruns race on /tmp's
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
# WTE = 10048 (padded) x 64 = 643072 floats = 2.45 chunks of 262144
M=(--text "$SRC/data/demo_corpus.txt" --vocab 10000 --layers 4 --channels 64 --heads 2 --seq 16
   --batch 4 --microbatches 4 --steps 3 --partition flops)
"$Z" train "${M[@]}" --quiet --save ref.ckpt
for sch in 1f1b zb-v; do
    "$Z" train "${M[@]}" --ranks 2 --schedule $sch --save $sch.ckpt >$sch.out
    cmp ref.ckpt $sch.ckpt || fail "$sch: checkpoint differs from --ranks 1"
done
# rank 0 holds the embedding only under 1f1b: parameters + gradients of the same size, no
# head accumulator (grads would be larger by the 2.45 MiB WTE)
awk '/^ rank 0/ { getline; if ($2 != $3) bad = 1; found = 1 } END { exit !(found && !bad) }' \
    1f1b.out || fail "rank 0 gradients differ from its parameters: $(grep -A2 '^ rank 0' 1f1b.out)"
echo "ok: chunked tied-embedding exchange bit-identical to --ranks 1 (threads, 1f1b and zb-v)"
if command -v mpirun >/dev/null 2>&1; then
    mpirun --oversubscribe --allow-run-as-root -x ASAN_OPTIONS=detect_leaks=0 -np 2 \
        "$Z" train "${M[@]}" --transport mpi --schedule 1f1b --save mpi.ckpt >mpi.out 2>&1 ||
        fail "mpirun: $(tail -3 mpi.out)"
    cmp ref.ckpt mpi.ckpt || fail "mpi: checkpoint differs from --ranks 1"
    echo "ok: the same under MPI -np 2"
fi
