#!/usr/bin/env bash
# Install the Debian packages zbpp needs, only those missing. Never downloads anything else.
# usage: scripts/setup.sh [run|test]
#   run  — what `make run` needs: compiler, CMake, BLAS, GLPK, Open MPI, oneDNN (bf16 matrix
#          products on CPUs with AVX512-BF16/AMX)
#   test — all of the above plus what only the tests use (default): cmocka, BLIS (the second
#          BLAS the tests compare), clang + its runtime (the fuzzers), python3 (the Python
#          module's tests), Chromium (tests/svg_render.sh checks that the SVG charts render),
#          time (/usr/bin/time: tests/mpi_startup_memory.sh reads each process's peak memory)
set -euo pipefail
run_packages=(build-essential cmake pkg-config libopenblas-dev libglpk-dev libopenmpi-dev
              openmpi-bin libdnnl-dev)
test_packages=(libcmocka-dev libblis-dev clang libclang-rt-14-dev python3 chromium time)
case "${1:-test}" in
  run) packages=("${run_packages[@]}") ;;
  test) packages=("${run_packages[@]}" "${test_packages[@]}") ;;
  *) echo "usage: scripts/setup.sh [run|test]" >&2; exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
