#!/usr/bin/env bash
# Fuzz smoke test: build the libFuzzer CSV harness with clang in its own build directory and run
# it briefly on the seed corpus; any crash, leak, sanitizer report or round-trip mismatch fails.
# Usage: fuzz_smoke.sh <zbpp-binary> <source-dir>   (FUZZ_SECONDS overrides the 40 s run)
set -u
ZBPP=$1
SRC=$(readlink -f "${2:-.}")
SECONDS_TO_RUN=${FUZZ_SECONDS:-40}

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
if ! cmake --build "$FUZZ_BUILD" --target fuzz_csv -j 2 >>"$FUZZ_BUILD.log" 2>&1; then
  if grep -q "cannot find.*libclang_rt.fuzzer\|fuzzer.*No such file" "$FUZZ_BUILD.log"; then
    echo "fuzz_smoke: SKIP: clang has no libFuzzer runtime (install libclang-rt-dev)"; exit 0
  fi
  echo "fuzz_smoke: FAIL: build failed (see $FUZZ_BUILD.log)"; tail -20 "$FUZZ_BUILD.log"; exit 1
fi

# libFuzzer adds interesting inputs to the first corpus directory: use a scratch copy.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zbpp-fuzz.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/corpus" "$WORK/artifacts"
cp "$SRC"/fuzz/corpus/*.csv "$WORK/corpus/"
echo "fuzz_smoke: running fuzz_csv for ${SECONDS_TO_RUN}s"
if ! "$FUZZ_BUILD/fuzz_csv" -max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=2048 \
     -max_len=8192 -print_final_stats=1 -artifact_prefix="$WORK/artifacts/" \
     "$WORK/corpus" >"$WORK/log" 2>&1; then
  echo "fuzz_smoke: FAIL: the harness found a problem:"
  grep -E "ERROR|SUMMARY|runtime error|abort|==[0-9]+==" "$WORK/log" | head -20
  for a in "$WORK"/artifacts/*; do
    [ -f "$a" ] && { echo "--- input ($a):"; head -c 400 "$a" | od -c | head -20; }
  done
  exit 1
fi
grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$WORK/log"
echo "fuzz_smoke: PASS"
