# BLAS selection for zbpp (why: docs/blas.md).
#
#   -DZB_BLAS=openblas  (default) Debian's OpenBLAS (pthread build); zb_blas_init() pins it to one
#                       thread. Fastest on the measured machine.
#   -DZB_BLAS=blis      Debian's BLIS (openmp build), single-threaded unless BLIS_NUM_THREADS says
#                       otherwise; kept so the comparison in bench_gemm can be repeated.
#
# zb_link_blas(target) adds the include path, the library and ZB_BLAS_<NAME>=1 to target (PUBLIC,
# so every executable linking libzbpp gets the same BLAS).
set(ZB_BLAS "openblas" CACHE STRING "BLAS implementation: openblas or blis")
set_property(CACHE ZB_BLAS PROPERTY STRINGS openblas blis)

function(zb_link_blas target)
  if(ZB_BLAS STREQUAL "openblas")
    pkg_check_modules(ZB_OPENBLAS REQUIRED IMPORTED_TARGET openblas)
    target_link_libraries(${target} PUBLIC PkgConfig::ZB_OPENBLAS)
    target_compile_definitions(${target} PUBLIC ZB_BLAS_OPENBLAS=1)
  elseif(ZB_BLAS STREQUAL "blis")
    find_path(ZB_BLIS_INCLUDE cblas.h
              PATHS /usr/include/x86_64-linux-gnu/blis-openmp /usr/include/x86_64-linux-gnu/blis-pthread
                    /usr/include/x86_64-linux-gnu/blis-serial /usr/include/blis
              NO_DEFAULT_PATH REQUIRED)
    find_library(ZB_BLIS_LIBRARY blis
                 PATHS /usr/lib/x86_64-linux-gnu/blis-openmp /usr/lib/x86_64-linux-gnu/blis-pthread
                       /usr/lib/x86_64-linux-gnu/blis-serial
                 NO_DEFAULT_PATH REQUIRED)
    target_include_directories(${target} BEFORE PUBLIC ${ZB_BLIS_INCLUDE})
    target_link_libraries(${target} PUBLIC ${ZB_BLIS_LIBRARY})
    target_compile_definitions(${target} PUBLIC ZB_BLAS_BLIS=1)
  else()
    message(FATAL_ERROR "ZB_BLAS must be openblas or blis, not '${ZB_BLAS}'")
  endif()
  message(STATUS "zbpp BLAS: ${ZB_BLAS}")
endfunction()
