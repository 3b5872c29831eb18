#!/usr/bin/env bash
# zbpp train --threads: bad values give one line and exit 2; a few steps of a small model (big
# enough that LayerNorm, GELU, attention and the tiled matrix products really split) give
# byte-identical checkpoints and identical losses with --threads 1, 2, 3 (3 oversubscribes a
# 2-core machine), and a 2-rank pipeline with 2 threads per rank matches them too (as threads, and
# as MPI processes when mpirun is there). --verbose
# names the BLAS kernel and the thread count.
# usage: cli_threads.sh <zbpp binary> <source dir>
set -u
ZBPP=$(readlink -f "$1")
SRC=$(readlink -f "$2")
TMP=$(mktemp -d /tmp/zbpp_cli_threads.XXXXXX)
export OMPI_MCA_orte_tmpdir_base="$TMP" # own Open MPI session dir: concurrent mpiruns race on /tmp's
trap 'rm -rf "$TMP"' EXIT
fails=0
MODEL=(--layers 2 --heads 4 --channels 128 --seq 32 --batch 4 --steps 3 --quiet
       --text "$SRC/data/demo_corpus.txt")

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

expect_error() {
  local needle=$1
  shift
  "$ZBPP" train "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  [ "$rc" -eq 2 ] || fail "exit $rc (want 2) for: $*"
  [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "not one stderr line for: $*: $(cat "$TMP/err")"
  grep -qF -- "$needle" "$TMP/err" || fail "message lacks '$needle' for: $*: $(cat "$TMP/err")"
}

expect_error "--threads" --threads 0
expect_error "--threads" --threads 300
expect_error "--threads" --threads two
expect_error "--threads" --threads

"$ZBPP" train --help | grep -q -- '--threads' || fail "--help lacks --threads"

# run <name> <args...>: checkpoint and metrics under $TMP/<name>.*
run() {
  local name=$1
  shift
  "$ZBPP" train "${MODEL[@]}" --save "$TMP/$name.ckpt" --metrics "$TMP/$name.jsonl" "$@" \
    >"$TMP/$name.out" 2>&1 || fail "run $name failed: $(cat "$TMP/$name.out")"
}
# the losses of a metrics file, one per line
losses() { grep -o '"loss": *[^,}]*' "$1"; }

run t1 --threads 1
run t2 --threads 2
run t3 --threads 3
run p2t2 --ranks 2 --threads 2
[ "$(losses "$TMP/t1.jsonl" | wc -l)" -eq 3 ] || fail "expected 3 losses in the metrics"
for other in t2 t3 p2t2; do
  cmp -s "$TMP/t1.ckpt" "$TMP/$other.ckpt" || fail "$other: checkpoint differs from --threads 1"
  [ "$(losses "$TMP/t1.jsonl")" = "$(losses "$TMP/$other.jsonl")" ] ||
    fail "$other: losses differ from --threads 1"
done

# the same under MPI (one rank per process, 2 threads each), when this build and machine have it
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun --oversubscribe --allow-run-as-root -x ASAN_OPTIONS=detect_leaks=0"
if command -v mpirun >/dev/null 2>&1 &&
   ! $MPIRUN -np 1 "$ZBPP" train --transport mpi --steps 0 --quiet --text "$SRC/data/demo_corpus.txt" \
       2>&1 | grep -q "built without MPI"; then
  (cd "$TMP" && $MPIRUN -np 2 "$ZBPP" train "${MODEL[@]}" --transport mpi --ranks 2 --threads 2 \
     --save "$TMP/mpi.ckpt" --metrics "$TMP/mpi.jsonl" >"$TMP/mpi.out" 2>&1) ||
    { fail "mpirun -np 2 --threads 2 failed"; grep -v "^-*$" "$TMP/mpi.out" | head -5; }
  cmp -s "$TMP/t1.ckpt" "$TMP/mpi.ckpt" || fail "MPI --threads 2: checkpoint differs from --threads 1"
else
  echo "note: no MPI build or mpirun; the MPI case was not run"
fi

"$ZBPP" train "${MODEL[@]}" --steps 1 --threads 2 --verbose >"$TMP/v.out" 2>&1 ||
  fail "--verbose run failed"
grep -Eq 'BLAS .+; 2 threads per rank' "$TMP/v.out" || fail "--verbose lacks the BLAS/threads line"

[ "$fails" -eq 0 ] && echo "cli_threads: all passed"
exit "$fails"
