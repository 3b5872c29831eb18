#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then build and run a small C program against the
# installed copy, via pkg-config and via find_package(zbpp) with the shared library, and via
# pkg-config --static with libzbpp.a; check the installed CLI and Python module, and that
# nothing of the build tree is used.
# Usage: install.sh <zbpp-binary> <source-dir>
set -u
ZBPP=$(readlink -f "$1")
SRC=$(readlink -f "${2:-.}")
BUILD=$(dirname "$ZBPP")
T=$(mktemp -d "${TMPDIR:-/tmp}/zbpp-install.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

P="$T/prefix"
if ! cmake --install "$BUILD" --prefix "$P" >"$T/install.log" 2>&1; then
  cat "$T/install.log"; echo "FAIL: cmake --install"; exit 1
fi
LIBDIR=$(dirname "$(find "$P" -name 'libzbpp.so.*.*' | head -1)")
[ -n "$LIBDIR" ] || { echo "FAIL: no libzbpp.so.X.Y installed"; exit 1; }
for f in "$P/bin/zbpp" "$LIBDIR/libzbpp.so" "$LIBDIR/libzbpp.a" "$P/include/zbpp/schedule.h" \
         "$P/include/zbpp/version.h" "$P/include/zbpp/planner_api.h" "$LIBDIR/pkgconfig/zbpp.pc" \
         "$LIBDIR/cmake/zbpp/zbppConfig.cmake" "$LIBDIR/cmake/zbpp/zbppConfigVersion.cmake"; do
  [ -e "$f" ] || fail "not installed: ${f#"$P"/}"
done
soname=$(readelf -d "$LIBDIR/libzbpp.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libzbpp.so.0" ] || fail "SONAME is '$soname', expected libzbpp.so.0"
"$P/bin/zbpp" --version | grep -Eq '^zbpp [0-9]+\.[0-9]+\.[0-9]+$' || fail "installed zbpp --version"

# A sanitized build's library needs the sanitizer runtime in the program too.
# (and python3, not instrumented, gets the runtime preloaded).
CC=${CC:-cc}
EXTRA="" PRELOAD=""
if grep -q '^ZB_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  EXTRA="-fsanitize=address,undefined"
  PRELOAD="$($CC -print-file-name=libasan.so) $($CC -print-file-name=libubsan.so)"
fi
expected=$("$ZBPP" schedule -s zb-h1 -p 4 -m 8 --cost 1,1,1,0 --format json |
           sed -n 's/.*"makespan": *\([0-9.eE+-]*\).*/\1/p' | head -1)

check_run() { # NAME BINARY
  local name=$1 bin=$2
  if ! "$bin" >"$T/$name.out" 2>&1; then fail "$name: exit $? ($(head -c 300 "$T/$name.out"))"; return; fi
  grep -q "^zb-h1 makespan $expected " "$T/$name.out" ||
    fail "$name: expected makespan $expected, got: $(cat "$T/$name.out")"
  grep -q "^optimal " "$T/$name.out" || fail "$name: no line for optimal"
  # the library it loads is the installed one
  ldd "$bin" | grep -q "libzbpp.so.0 => $LIBDIR/" || fail "$name: does not load $LIBDIR/libzbpp.so.0"
}

# 1. pkg-config (only the installed .pc on the path; shared library, rpath to the prefix)
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
flags=$(pkg-config --cflags --libs zbpp) || fail "pkg-config --cflags --libs zbpp"
pkg-config --static --libs zbpp >/dev/null || fail "pkg-config --static --libs zbpp"
[ "$(pkg-config --modversion zbpp)" = "$("$ZBPP" --version | cut -d' ' -f2)" ] || fail "pkg-config version"
# shellcheck disable=SC2086
if $CC -std=c11 $EXTRA "$SRC/tests/install_consumer/consumer.c" -o "$T/consumer_pc" $flags \
     -Wl,-rpath,"$LIBDIR" 2>"$T/pc.err"; then
  check_run pkg-config "$T/consumer_pc"
else
  fail "pkg-config build: $(head -c 600 "$T/pc.err")"
fi

# 1b. pkg-config --static against libzbpp.a: the private dependencies (GLPK, BLAS, MPI, threads,
#     m) come from Requires.private / Libs.private — linking libzbpp.a alone used to miss glp_ios_*
sflags=$(pkg-config --static --cflags --libs zbpp | sed -E "s#(^| )-lzbpp( |\$)#\1$LIBDIR/libzbpp.a\2#")
# shellcheck disable=SC2086
if $CC -std=c11 $EXTRA "$SRC/tests/install_consumer/consumer.c" -o "$T/consumer_static" $sflags \
     2>"$T/static.err"; then
  "$T/consumer_static" >"$T/static.out" 2>&1 || fail "static: exit $? ($(head -c 300 "$T/static.out"))"
  grep -q "^zb-h1 makespan $expected " "$T/static.out" || fail "static: $(cat "$T/static.out")"
  ! ldd "$T/consumer_static" | grep -q libzbpp || fail "static: still loads libzbpp.so"
else
  fail "pkg-config --static build: $(head -c 600 "$T/static.err")"
fi

# 2. find_package(zbpp) from a fresh CMake project
if cmake -S "$SRC/tests/install_consumer" -B "$T/cm" -DCMAKE_PREFIX_PATH="$P" \
     -DCMAKE_C_FLAGS="$EXTRA" -DCMAKE_BUILD_TYPE=Release >"$T/cm.log" 2>&1 &&
   cmake --build "$T/cm" >>"$T/cm.log" 2>&1; then
  check_run find_package "$T/cm/consumer"
else
  fail "find_package build: $(tail -20 "$T/cm.log")"
fi

# 3. the installed Python module finds the installed library
PYDIR=$(dirname "$(find "$P" -path '*/zbpp/__init__.py' | head -1)")
if [ -n "$PYDIR" ] && command -v python3 >/dev/null; then
  out=$(cd "$T" && env -u ZBPP_LIBRARY PYTHONPATH="$(dirname "$PYDIR")" LD_PRELOAD="$PRELOAD" \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
        python3 -c 'import zbpp; print(zbpp.version(), zbpp.library_path())' 2>&1) ||
    fail "python import: $out"
  case "$out" in *"$LIBDIR/libzbpp.so"*) ;; *) fail "python uses '$out', not $LIBDIR" ;; esac
else
  fail "python module not installed"
fi

if [ "$fails" -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "install: ok (prefix layout, pkg-config, find_package, python)"
