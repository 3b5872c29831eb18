#!/usr/bin/env bash
# The README's commands, run exactly as the README writes them (extracted from README.md, not
# copied here, so the two cannot drift apart): the `zbpp generate` example (train a model, then
# 100 tokens from a --seq 64 model) and the library's install + pkg-config + run lines, with HOME
# a temporary directory and `build` the tree under test.
# usage: readme_commands.sh <zbpp binary> <source dir>
set -u
ZBPP=$(readlink -f "$1")
SRC=$(readlink -f "${2:-.}")
BUILD=$(dirname "$ZBPP")
T=$(mktemp -d "${TMPDIR:-/tmp}/zbpp-readme.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# block <heading text>: the first fenced block after the line containing it
block() {
  awk -v h="$1" 'index($0, h) { on = 1; next }
                 on && /^```/ { if (inside) exit; inside = 1; next }
                 inside { print }' "$SRC/README.md"
}

mkdir -p bin home
ln -s "$ZBPP" bin/zbpp
ln -s "$BUILD" build
export PATH="$T/bin:$PATH" HOME="$T/home"

# ---- zbpp generate ----
block '### `zbpp generate`' >generate.sh
grep -q "zbpp generate --init-from model.bin" generate.sh || fail "no generate example in README: $(cat generate.sh)"
if timeout 600 bash -eu generate.sh >gen.out 2>gen.err; then
  grep -q "^Once upon a time" gen.out || fail "generate printed: $(head -c 300 gen.out)"
  # the prompt (16 bytes) and 100 byte-level tokens (each at least one byte)
  [ "$(wc -c <gen.out)" -gt 116 ] || fail "generate printed too little: $(wc -c <gen.out) bytes"
else
  fail "the README's generate example failed: $(tail -3 gen.err)"
fi

# ---- install, pkg-config, run ----
block '## The library: install, C, pkg-config, CMake' >pkgconfig.sh
grep -q "pkg-config" pkgconfig.sh || fail "no pkg-config lines in README: $(cat pkgconfig.sh)"
if grep -q '^ZB_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  echo "note: sanitizer build: a plain cc program cannot link it; install.sh covers this build"
elif ! command -v pkg-config >/dev/null; then
  echo "note: no pkg-config; the install lines are not checked"
else
  cp "$SRC/tests/install_consumer/consumer.c" app.c
  if timeout 300 bash -eu pkgconfig.sh >pc.out 2>pc.err; then
    grep -q "^zb-h1 makespan " pc.out || fail "./app printed: $(head -c 300 pc.out)"
  else
    fail "the README's install/pkg-config lines failed: $(tail -3 pc.err) $(tail -3 pc.out)"
  fi
fi

[ "$fails" -eq 0 ] && echo "readme_commands: all passed"
exit $((fails > 0))
