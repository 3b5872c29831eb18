#!/usr/bin/env bash
# The zbpp Python module (python/zbpp) against this build's libzbpp.so: python3 -m unittest.
# Usage: python_api.sh <zbpp-binary> <source-dir>. Skips (77) without python3.
set -u
ZBPP=$(readlink -f "$1")
SRC=$(readlink -f "${2:-.}")
BUILD=$(dirname "$ZBPP")
command -v python3 >/dev/null || { echo "python_api: python3 not found, skipped"; exit 77; }
LIB="$BUILD/libzbpp.so.0"
[ -e "$LIB" ] || { echo "FAIL: $LIB not built"; exit 1; }
export ZBPP_LIBRARY="$LIB" PYTHONPATH="$SRC/python" PYTHONDONTWRITEBYTECODE=1
# A sanitized library needs its runtime loaded first in a non-instrumented python3.
if grep -q '^ZB_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  asan=$(${CC:-cc} -print-file-name=libasan.so) ubsan=$(${CC:-cc} -print-file-name=libubsan.so)
  export LD_PRELOAD="$asan $ubsan" ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
fi
cd "$SRC/python" && python3 -m unittest -v tests.test_zbpp 2>&1
