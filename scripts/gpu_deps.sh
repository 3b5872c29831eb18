#!/usr/bin/env bash
# Build zbpp on a machine with a GPU but no package registry (docs/cuda.md).
#
#   scripts/gpu_deps.sh download          here (apt works): the Debian packages zbpp needs to build
#                                          and test (OpenBLAS, cmocka, GLPK, pkgconf, Open MPI and
#                                          their libraries) into .gpu-deps/debs (ignored by git,
#                                          ~22 MB)
#   scripts/gpu_deps.sh build [DIR] [ARGS] there: unpack them with dpkg -x into .gpu-prefix
#                                          (never into /; ar + tar where dpkg is missing), then
#                                          configure + build DIR (default build-gpu, Release,
#                                          -DZB_CUDA=ON, warnings not errors, the prefix's MPI)
#                                          against that prefix only; extra ARGS go to cmake
#   scripts/gpu_deps.sh env                print the exports that make the prefix usable (eval it
#                                          before running tests or benches by hand)
#
# The prefix's pkg-config files are rewritten to point into the prefix, and PKG_CONFIG_LIBDIR
# names only the prefix's directories, so the system's own pkg-config files are never used.
# Open MPI is relocated with OPAL_PREFIX, OPAL_SYSCONFDIR and PMIx's PMIX_PKG*DIR (its binaries,
# components, help and config files are found under the prefix); docs/cuda.md says how that was
# checked.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
deps=$root/.gpu-deps
prefix=$root/.gpu-prefix # outside .gpu-deps: only the packages travel (64 MiB limit)
multiarch=x86_64-linux-gnu
# Open MPI 4.1 (mpirun, mpicc, headers) and every library its programs and components link
# (ldd over the packages' files), so that `--transport mpi --device cuda` can run on the GPU machine
mpi_packages=(openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15
              libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libibverbs1 librdmacm1
              libnl-3-200 libnl-route-3-200 libnuma1 libpsm-infinipath1 libpsm2-2 libucx0 libmunge2
              libatomic1 libudev1 libuuid1)
# oneDNN: the CPU's bf16 products (issue 32), measured on the GPU machine's AMX Xeon
onednn_packages=(libdnnl-dev libdnnl2 ocl-icd-libopencl1 libgomp1)
packages=(libopenblas-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev libgfortran5
          libquadmath0 libcmocka-dev libcmocka0 pkgconf pkgconf-bin libpkgconf3 pkg-config
          libglpk-dev libglpk40 libamd2 libcolamd2 libsuitesparseconfig5 libltdl7 libgmp10
          "${mpi_packages[@]}" "${onednn_packages[@]}")

die() { echo "gpu_deps: $*" >&2; exit 1; }

env_lines() {
    local lib=$prefix/usr/lib/$multiarch
    echo "export PKG_CONFIG=$prefix/usr/bin/pkgconf"
    echo "export PKG_CONFIG_LIBDIR=$lib/pkgconfig:$lib/openblas-pthread/pkgconfig"
    echo "export PKG_CONFIG_PATH="
    echo "export CMAKE_PREFIX_PATH=$prefix/usr"
    # Open MPI components find libmca_common_* by a RUNPATH into /usr; libnl-3-200 uses /lib
    echo "export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread:$lib/openmpi/lib:$prefix/lib/$multiarch\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
    echo "export PATH=$prefix/usr/bin:/usr/local/cuda/bin:\$PATH"
    echo "export OPAL_PREFIX=$prefix/usr"
    echo "export OPAL_SYSCONFDIR=$prefix/etc/openmpi"
    # PMIx (Open MPI's launcher) bakes absolute paths: its components and help files by name
    echo "export PMIX_PKGLIBDIR=$prefix/usr/lib/$multiarch/pmix2/lib/pmix"
    echo "export PMIX_PKGDATADIR=$prefix/usr/lib/$multiarch/pmix2/share/pmix"
    # no single-copy (CMA) in Open MPI's shared-memory transport: the GPU machine's sandbox may
    # not allow process_vm_readv between processes; copies through the shared segment always work
    echo "export OMPI_MCA_btl_vader_single_copy_mechanism=none"
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
    # the links Debian's postinst scripts make with update-alternatives
    ln -sf orterun "$prefix/usr/bin/mpirun"
    ln -sf orterun "$prefix/usr/bin/mpiexec"
    ln -sf opal_wrapper "$prefix/usr/bin/mpicc"
    local psm
    for psm in "$prefix"/usr/lib/libpsm1/libpsm_infinipath.so.1.*; do
        [ -f "$psm" ] && ln -sf "../libpsm1/${psm##*/}" "$prefix/usr/lib/$multiarch/libpsm_infinipath.so.1"
    done
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
    # the prefix's Open MPI by name: whatever MPI the GPU machine may have is not the one tested.
    # Debian 12's libevent needs glibc >= 2.36: where the prefix's mpirun cannot start a process,
    # say why and build without MPI (its tests then skip: no mpirun)
    mpi=(-DMPI_C_COMPILER="$prefix/usr/bin/mpicc" -DMPIEXEC_EXECUTABLE="$prefix/usr/bin/mpirun")
    if ! why=$(timeout 60 mpirun --allow-run-as-root -np 1 true 2>&1); then
        echo "gpu_deps: the carried Open MPI does not run here, building without MPI:" \
             "$(echo "$why" | grep -v '^-*$' | head -1)" >&2
        rm -f "$prefix"/usr/bin/{mpirun,mpiexec,mpicc}
        mpi=(-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON)
    fi
    # warnings do not fail this build: the GPU machine's compilers may warn where CI's do not,
    # and a device call lost to a new warning cannot be given back (CI builds with -Werror).
    # Tests time out after 200 s (shell tests 300 s): a hung one must not eat the call
    cmake -S "$root" -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DZB_WERROR=OFF -DZB_CUDA=ON \
          -DZB_TEST_TIMEOUT=200 "${mpi[@]}" -DPKG_CONFIG_EXECUTABLE="$PKG_CONFIG" "$@"
    cmake --build "$dir" -j "$(nproc)"
    ;;
*)
    sed -n '2,20p' "$0" >&2
    exit 2
    ;;
esac
