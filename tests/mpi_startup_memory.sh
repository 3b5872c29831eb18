# zbpp train --transport mpi: every process builds only its own rank's units at start-up (fresh,
# --init-from, --resume), never the whole model first. Measured as each process's peak resident
# set (/usr/bin/time's max RSS) of a run that stops after start-up (--steps 0, so gradients and
# moments are never touched), less that of the same run with a model too small to matter: the
# rest is what the model costs the process. A rank of 4 holds about a quarter of the
# parameters (and, resuming, of the two moments); a whole-model copy would be the whole.
# Bound: 1.5 times a quarter, per buffer.
# usage: bash mpi_startup_memory.sh <zbpp> <source dir>
source "$(dirname "$0")/mpi_common.inc"
set -u
if ldd "$Z" 2>/dev/null | grep -q 'libasan'; then
    # shadow memory and the quarantine of freed blocks are resident too: not the program's own
    echo "SKIPPED: resident memory is not the program's under AddressSanitizer"
    exit 77
fi
if [ ! -x /usr/bin/time ]; then
    echo "SKIPPED: /usr/bin/time not found (Debian package time)"
    exit 77
fi

L=8 C=256 V=512 T=32
BIG=(--layers $L --channels $C --heads 4 --vocab $V)
SMALL=(--layers 4 --channels 16 --heads 2 --vocab $V)
RUN=(--text "$TEXT" --seq $T --batch 4 --microbatches 4 --partition flops --quiet)
# parameters of the big model in KiB (llm.c layout, vocab padded to 128)
model_kib=$(( 4 * (V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C) / 1024 ))

# "rank KiB" lines, one per process, sorted by rank. Each process's figure goes to a file of its
# own: mpirun's forwarding of the processes' last stderr lines at exit is not reliable under load.
peaks() {
    rm -f rss.*
    $MPIRUN -np 4 sh -c '/usr/bin/time -o "rss.$OMPI_COMM_WORLD_RANK" -f "rss $OMPI_COMM_WORLD_RANK %M" "$@"' sh \
        "$Z" train "$@" --ranks 4 --transport mpi >/dev/null 2>&1
    cat rss.* 2>/dev/null | awk '/^rss / { print $2, $3 }' | sort -n
}

compare() { # what, model-sized buffers read (1, or 3 resuming), peaks of the big model's run,
            # peaks of the small one's
    local bound=$(($2 * model_kib * 3 / 8))
    [ "$(wc -l <<<"$3")" -eq 4 ] && [ "$(wc -l <<<"$4")" -eq 4 ] ||
        fail "$1: not 4 processes measured: '$3' / '$4'"
    join <(echo "$3") <(echo "$4") | while read -r rank b s; do
        local cost=$((b - s))
        echo "$1: rank $rank peak $b KiB, $cost KiB for its part (model $model_kib KiB," \
             "bound $bound)"
        [ "$cost" -le "$bound" ] ||
            fail "$1: rank $rank holds $cost KiB at start-up, more than $bound KiB for" \
                 "$2 quarter(s) of a $model_kib KiB model: it built more than its own units"
    done || exit 1
}

compare "fresh" 1 "$(peaks "${BIG[@]}" "${RUN[@]}" --steps 0)" \
    "$(peaks "${SMALL[@]}" "${RUN[@]}" --steps 0)"
# a model file and a training checkpoint (after step 1) of each shape, from one-process runs
for shape in BIG SMALL; do
    declare -n flags=$shape
    "$Z" train "${flags[@]}" "${RUN[@]}" --steps 1 --save "ckpt_$shape.bin" \
        --save-model "model_$shape.bin" >/dev/null 2>&1 || fail "cannot make the $shape files"
done
compare "--init-from" 1 "$(peaks --init-from model_BIG.bin "${RUN[@]}" --steps 0)" \
    "$(peaks --init-from model_SMALL.bin "${RUN[@]}" --steps 0)"
compare "--resume" 3 "$(peaks --resume ckpt_BIG.bin "${RUN[@]}" --steps 1)" \
    "$(peaks --resume ckpt_SMALL.bin "${RUN[@]}" --steps 1)"
echo "ok: every MPI process builds only its own units"
