#!/usr/bin/env bash
# Fuzz smoke test: build every libFuzzer harness (fuzz/fuzz_*.c: the schedule CSV and each file
# reader) with clang in its own build directory, write seed files with the zbpp under test
# (fuzz/make_seeds.sh), and run each harness briefly with its dictionary; any crash, leak,
# sanitizer report, hang or broken invariant fails.
# Usage: fuzz_smoke.sh <zbpp-binary> <source-dir>
#   FUZZ_SECONDS   total seconds of fuzzing, shared by the harnesses (default 40: fuzz_csv gets
#                  12, the 9 readers 3 each)
#   FUZZ_EACH      seconds per harness instead (the longer campaign: `make fuzz` sets 600)
#   FUZZ_ONLY      space-separated harness names (e.g. "llmc manifest") to run only those
#   FUZZ_KEEP      a directory to keep each harness's growing corpus in (default: a scratch copy)
set -u
ZBPP=$1
SRC=$(readlink -f "${2:-.}")
TOTAL=${FUZZ_SECONDS:-40}
HARNESSES=${FUZZ_ONLY:-"csv llmc tokshard text costfile trainckpt manifest ckptshard tokenizer metrics"}

if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz_smoke: SKIP: clang not found (install clang and libclang-rt-dev to fuzz)"
  exit 0
fi
# Build next to the build tree that holds the zbpp binary, else in $TMPDIR.
BUILD_ROOT=$(dirname "$(readlink -f "$ZBPP")")
[ -w "$BUILD_ROOT" ] || BUILD_ROOT=${TMPDIR:-/tmp}
FUZZ_BUILD="$BUILD_ROOT/build-fuzz"

if ! CC=clang cmake -S "$SRC" -B "$FUZZ_BUILD" -DZB_FUZZ=ON -DZB_TESTS=OFF \
     -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$FUZZ_BUILD.log" 2>&1; then
  echo "fuzz_smoke: FAIL: configure failed (see $FUZZ_BUILD.log)"; tail -20 "$FUZZ_BUILD.log"; exit 1
fi
targets=()
for h in $HARNESSES; do targets+=("fuzz_$h"); done
if ! cmake --build "$FUZZ_BUILD" --target "${targets[@]}" -j 2 >>"$FUZZ_BUILD.log" 2>&1; then
  if grep -q "cannot find.*libclang_rt.fuzzer\|fuzzer.*No such file" "$FUZZ_BUILD.log"; then
    echo "fuzz_smoke: SKIP: clang has no libFuzzer runtime (install libclang-rt-dev)"; exit 0
  fi
  echo "fuzz_smoke: FAIL: build failed (see $FUZZ_BUILD.log)"; tail -20 "$FUZZ_BUILD.log"; exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/zbpp-fuzz.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
if ! bash "$SRC/fuzz/make_seeds.sh" "$ZBPP" "$WORK/seeds" "$SRC" >"$WORK/seeds.log" 2>&1; then
  echo "fuzz_smoke: FAIL: writing seeds failed:"; tail -5 "$WORK/seeds.log"; exit 1
fi

fails=0
for h in $HARNESSES; do
  if [ -n "${FUZZ_EACH:-}" ]; then secs=$FUZZ_EACH
  elif [ "$h" = csv ]; then secs=$((TOTAL * 3 / 10))
  else secs=$((TOTAL * 7 / 10 / 9)); fi
  [ "$secs" -ge 1 ] || secs=1
  # libFuzzer adds interesting inputs to the first corpus directory
  corpus="$WORK/corpus/$h"
  [ -n "${FUZZ_KEEP:-}" ] && corpus="$FUZZ_KEEP/$h"
  mkdir -p "$corpus" "$WORK/artifacts/$h"
  cp -n "$WORK/seeds/$h"/* "$corpus/" 2>/dev/null
  echo "fuzz_smoke: running fuzz_$h for ${secs}s"
  # OPENBLAS_NUM_THREADS: no BLAS thread pool next to ASan's (and none is used)
  if ! OPENBLAS_NUM_THREADS=1 TMPDIR="$WORK" "$FUZZ_BUILD/fuzz_$h" -max_total_time="$secs" -timeout=20 \
       -rss_limit_mb=2048 -dict="$SRC/fuzz/dict/$h.dict" -print_final_stats=1 \
       -artifact_prefix="$WORK/artifacts/$h/" "$corpus" >"$WORK/$h.log" 2>&1; then
    echo "fuzz_smoke: FAIL: fuzz_$h found a problem:"
    grep -E "ERROR|SUMMARY|runtime error|abort|==[0-9]+==|failed|differs|accepted" "$WORK/$h.log" | head -20
    for a in "$WORK/artifacts/$h"/*; do
      [ -f "$a" ] && { echo "--- input ($a):"; head -c 400 "$a" | od -c | head -20; }
      [ -f "$a" ] && [ -n "${FUZZ_KEEP:-}" ] && cp "$a" "$FUZZ_KEEP/finding-$h-$(basename "$a")"
    done
    fails=$((fails + 1))
    continue
  fi
  runs=$(grep -E "stat::number_of_executed_units" "$WORK/$h.log" | awk '{print $2}')
  cov=$(grep -E "^#[0-9]+.*DONE" "$WORK/$h.log" | grep -oE "cov: [0-9]+" | tail -1)
  echo "fuzz_smoke: fuzz_$h: $runs runs in ${secs}s, $cov, no finding"
done
[ "$fails" -eq 0 ] || { echo "fuzz_smoke: FAIL ($fails harness(es))"; exit 1; }
echo "fuzz_smoke: PASS"
