#!/usr/bin/env bash
# Build zbpp on a machine with a GPU but no package registry (docs/cuda.md).
#
#   scripts/gpu_deps.sh download          here (apt works): the Debian packages zbpp needs to build
#                                          and test (OpenBLAS, cmocka, GLPK, pkgconf and their
#                                          libraries) into .gpu-deps/debs (ignored by git, ~15 MB)
#   scripts/gpu_deps.sh build [DIR] [ARGS] there: unpack them with dpkg -x into .gpu-prefix
#                                          (never into /; ar + tar where dpkg is missing), then
#                                          configure + build DIR (default build-gpu, Release,
#                                          -DZB_WERROR=ON -DZB_CUDA=ON, MPI off) against that
#                                          prefix only; extra ARGS go to cmake
#   scripts/gpu_deps.sh env                print the exports that make the prefix usable (eval it
#                                          before running tests or benches by hand)
#
# The prefix's pkg-config files are rewritten to point into the prefix, and PKG_CONFIG_LIBDIR
# names only the prefix's directories, so the system's own pkg-config files are never used.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
deps=$root/.gpu-deps
prefix=$root/.gpu-prefix # outside .gpu-deps: only the packages travel (64 MiB limit)
multiarch=x86_64-linux-gnu
packages=(libopenblas-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev libgfortran5
          libquadmath0 libcmocka-dev libcmocka0 pkgconf pkgconf-bin libpkgconf3 pkg-config
          libglpk-dev libglpk40 libamd2 libcolamd2 libsuitesparseconfig5 libltdl7 libgmp10)

die() { echo "gpu_deps: $*" >&2; exit 1; }

env_lines() {
    local lib=$prefix/usr/lib/$multiarch
    echo "export PKG_CONFIG=$prefix/usr/bin/pkgconf"
    echo "export PKG_CONFIG_LIBDIR=$lib/pkgconfig:$lib/openblas-pthread/pkgconfig"
    echo "export PKG_CONFIG_PATH="
    echo "export CMAKE_PREFIX_PATH=$prefix/usr"
    echo "export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
    echo "export PATH=/usr/local/cuda/bin:\$PATH"
}

unpack() {
    ls "$deps"/debs/*.deb >/dev/null 2>&1 || die "no packages in $deps/debs: run '$0 download' where apt works"
    rm -rf "$prefix"
    mkdir -p "$prefix"
    for f in "$deps"/debs/*.deb; do
        if command -v dpkg >/dev/null; then
            dpkg -x "$f" "$prefix"
        else # no dpkg: a .deb is an ar archive holding data.tar.*
            local t
            t=$(mktemp -d)
            (cd "$t" && ar x "$f" && tar -xf data.tar.* -C "$prefix")
            rm -rf "$t"
        fi
    done
    # the .pc files name /usr/...: point them into the prefix
    find "$prefix" -name '*.pc' -print0 | xargs -0 sed -i "s#/usr/#$prefix/usr/#g"
}

case "${1:-}" in
download)
    command -v apt-get >/dev/null || die "apt-get not found"
    mkdir -p "$deps/debs"
    (cd "$deps/debs" && rm -f ./*.deb && apt-get download "${packages[@]}")
    du -sh "$deps/debs"
    ;;
env)
    env_lines
    ;;
build)
    shift
    dir=${1:-build-gpu}
    [ $# -gt 0 ] && shift
    unpack
    eval "$(env_lines)"
    gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    # MPI off: whatever MPI the GPU machine may have (e.g. under mpi4py) is not the one tested
    cmake -S "$root" -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DZB_WERROR=ON -DZB_CUDA=ON \
          -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DPKG_CONFIG_EXECUTABLE="$PKG_CONFIG" "$@"
    cmake --build "$dir" -j "$(nproc)"
    ;;
*)
    sed -n '2,16p' "$0" >&2
    exit 2
    ;;
esac
