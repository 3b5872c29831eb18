# CUDA stage backend (docs/cuda.md). -DZB_CUDA=AUTO (default: on when the CUDA toolkit's nvcc is
# found), ON (fail without it) or OFF.
#
# The .cu files (device kernels only) are compiled by nvcc through custom commands into objects
# that join libzbpp; everything else in src/cuda/ is plain C compiled like the rest of the
# library against the toolkit's headers. This keeps the project a C project: no CUDA language in
# CMake, so the C flags (-Wall, the sanitizers) never reach nvcc, and executables still link with
# the C compiler. nvcc objects are built without sanitizer flags (ASan cannot see device code, and
# host code in the .cu files is only launch wrappers). Host code is built without exceptions,
# RTTI or thread-safe statics, so the objects need no C++ runtime.
#
# Off: src/cuda/none.c makes every zb_cuda_* call report that the build has no CUDA, and
# zb_cuda_device_count() says 0 devices. Either way the tests labelled `gpu` exit 77 (skipped)
# where no device is usable.
set(ZB_CUDA "AUTO" CACHE STRING "CUDA stage backend: AUTO, ON or OFF")
set_property(CACHE ZB_CUDA PROPERTY STRINGS AUTO ON OFF)
set(ZB_CUDA_ARCH "90" CACHE STRING "GPU architecture for nvcc (sm_XX machine code + compute_XX PTX)")

set(ZB_HAVE_CUDA OFF)
if(NOT ZB_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND CUDAToolkit_NVCC_EXECUTABLE AND TARGET CUDA::cublasLt)
    set(ZB_HAVE_CUDA ON)
  elseif(ZB_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ZB_CUDA=ON but the CUDA toolkit (nvcc, cudart, cuBLASLt) was not found; "
                        "set CUDAToolkit_ROOT or use -DZB_CUDA=AUTO/OFF")
  endif()
endif()

if(NOT ZB_HAVE_CUDA)
  message(STATUS "CUDA: off (ZB_CUDA=${ZB_CUDA}): --device cuda will report that it is unavailable")
  target_sources(zbpp PRIVATE ${CMAKE_SOURCE_DIR}/src/cuda/none.c ${CMAKE_SOURCE_DIR}/src/cuda/args.c)
  # SM partitions: the plan is host code (every build); creation and event timing are stubs
  target_sources(zbpp PRIVATE ${CMAKE_SOURCE_DIR}/src/cuda/green_plan.c
                 ${CMAKE_SOURCE_DIR}/src/cuda/none_green.c)
else()
  message(STATUS "CUDA: ${CUDAToolkit_NVCC_EXECUTABLE} (${CUDAToolkit_VERSION}), sm_${ZB_CUDA_ARCH}")
  file(GLOB ZB_CUDA_C_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cuda/*.c)
  list(FILTER ZB_CUDA_C_SOURCES EXCLUDE REGEX ".*/none(_[a-z]+)?\\.c$")
  target_sources(zbpp PRIVATE ${ZB_CUDA_C_SOURCES})
  target_compile_definitions(zbpp PUBLIC ZB_HAVE_CUDA=1)
  # cuBLASLt (500+ MB) is opened on first use by src/cuda/cublaslt_lazy.c, not linked: a linked
  # one would be mapped into every zbpp process, CPU runs and `ulimit -v` runs included
  target_link_libraries(zbpp PUBLIC CUDA::cudart ${CMAKE_DL_LIBS})
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/cuda/cublaslt_lazy.c PROPERTIES
    COMPILE_DEFINITIONS "ZB_CUBLASLT_PATH=\"$<TARGET_FILE:CUDA::cublasLt>\";ZB_CUBLASLT_SONAME=\"libcublasLt.so.${CUDAToolkit_VERSION_MAJOR}\"")
  target_include_directories(zbpp PRIVATE $<TARGET_PROPERTY:CUDA::cublasLt,INTERFACE_INCLUDE_DIRECTORIES>)

  set(ZB_NVCC_FLAGS -std=c++17 -gencode=arch=compute_${ZB_CUDA_ARCH},code=sm_${ZB_CUDA_ARCH}
      -gencode=arch=compute_${ZB_CUDA_ARCH},code=compute_${ZB_CUDA_ARCH}
      -Xcompiler=-Wall,-Wextra,-fno-exceptions,-fno-threadsafe-statics,-fno-rtti -Xptxas=-warn-spills,-warn-lmem-usage
      -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/src)
  if(ZB_WERROR)
    list(APPEND ZB_NVCC_FLAGS --Werror=all-warnings -Xcompiler=-Werror)
  endif()
  if(CMAKE_BUILD_TYPE STREQUAL "Debug")
    list(APPEND ZB_NVCC_FLAGS -O0 -g -lineinfo)
  elseif(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
    list(APPEND ZB_NVCC_FLAGS -O2 -g -lineinfo)
  else()
    list(APPEND ZB_NVCC_FLAGS -O3 -lineinfo)
  endif()
  file(GLOB ZB_CUDA_CU_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cuda/*.cu)
  foreach(cu ${ZB_CUDA_CU_SOURCES})
    get_filename_component(name ${cu} NAME_WE)
    set(obj ${CMAKE_BINARY_DIR}/cuda_objs/${name}.o)
    add_custom_command(
      OUTPUT ${obj}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/cuda_objs
      COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} ${ZB_NVCC_FLAGS} -MD -MF ${obj}.d -c ${cu} -o ${obj}
      DEPENDS ${cu}
      DEPFILE ${obj}.d
      COMMENT "nvcc ${name}.cu"
      VERBATIM)
    set_source_files_properties(${obj} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
    target_sources(zbpp PRIVATE ${obj})
  endforeach()

  # The flash-attention kernels built as plain C++ for the CPU (tests/flash_emulation.h supplies
  # threads, barriers and the warp-wide operations), each linked into its test
  # (flash_attn.cu: test_flash_emulated, flash_attn32.cu: test_flash32_emulated,
  # flash_attn_tf32.cu: test_flash_tf32_emulated; layernorm_rows.cu:
  # test_layernorm_rows_emulated): the kernels'
  # indexing runs in CI without a GPU. The C compiler driver compiles it (-x c++): the object
  # needs no C++ runtime (no exceptions, RTTI or thread-safe statics).
  if(ZB_TESTS)
    list(GET CUDAToolkit_INCLUDE_DIRS 0 ZB_CUDA_INCLUDE)
    set(ZB_FLASH_EMU_FLAGS -x c++ -std=c++17 -O2 -fno-exceptions -fno-rtti -fno-threadsafe-statics
        -Wall -Wextra -Wno-attributes -Wno-unknown-pragmas)
    if(ZB_WERROR)
      list(APPEND ZB_FLASH_EMU_FLAGS -Werror)
    endif()
    foreach(pair "flash_attn:test_flash_emulated" "flash_attn32:test_flash32_emulated"
                 "flash_attn_tf32:test_flash_tf32_emulated"
                 "layernorm_rows:test_layernorm_rows_emulated")
      string(REPLACE ":" ";" pair ${pair})
      list(GET pair 0 cu)
      list(GET pair 1 test)
      set(obj ${CMAKE_BINARY_DIR}/cuda_objs/${cu}_emulated.o)
      add_custom_command(
        OUTPUT ${obj}
        COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/cuda_objs
        COMMAND ${CMAKE_C_COMPILER} ${ZB_FLASH_EMU_FLAGS} -DZB_FLASH_EMULATE
                -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/src -I${ZB_CUDA_INCLUDE}
                -include ${CMAKE_SOURCE_DIR}/tests/flash_emulation.h -MD -MF ${obj}.d
                -c ${CMAKE_SOURCE_DIR}/src/cuda/${cu}.cu -o ${obj}
        DEPENDS ${CMAKE_SOURCE_DIR}/src/cuda/${cu}.cu ${CMAKE_SOURCE_DIR}/tests/flash_emulation.h
        DEPFILE ${obj}.d
        COMMENT "${cu}.cu as C++ for the CPU emulation"
        VERBATIM)
      set_source_files_properties(${obj} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
      # EVAL bakes the names in: DEFER CALL would expand ${test} and ${obj} only when it runs
      cmake_language(EVAL CODE "cmake_language(DEFER CALL target_sources [[${test}]] PRIVATE [[${obj}]])
        cmake_language(DEFER CALL target_compile_definitions [[${test}]] PRIVATE ZB_FLASH_EMU=1)")
    endforeach()
  endif()
endif()

# Tests that need a GPU: label `gpu`, exit code 77 = skipped ("skipped: no CUDA device").
# Deferred: the tests are declared after this file is included.
if(ZB_TESTS)
  file(GLOB ZB_GPU_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/test_cuda_gpu_*.c)
  foreach(src ${ZB_GPU_TESTS})
    get_filename_component(name ${src} NAME_WE)
    # EVAL bakes the name in: DEFER CALL would expand ${name} only when it runs
    cmake_language(EVAL CODE "cmake_language(DEFER CALL set_tests_properties [[${name}]] PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)")
  endforeach()
  # shell tests that need a GPU (tests/cli_cuda_gpu_*.sh, exit 77 without one): label `gpu` too
  file(GLOB ZB_GPU_SHELL_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/cli_cuda_gpu_*.sh)
  foreach(script ${ZB_GPU_SHELL_TESTS})
    get_filename_component(name ${script} NAME_WE)
    cmake_language(EVAL CODE "cmake_language(DEFER CALL set_tests_properties [[${name}]] PROPERTIES LABELS gpu)")
  endforeach()
  # the trainer on the fake device, like the stage: skipped without CUDA
  cmake_language(DEFER CALL set_tests_properties test_cuda_fake_train PROPERTIES SKIP_RETURN_CODE 77)
  # pipeline ranks on the fake device (issue 13): skipped without CUDA
  cmake_language(DEFER CALL set_tests_properties test_cuda_fake_pipeline PROPERTIES SKIP_RETURN_CODE 77)
  # MPI ranks on the fake device (issue 13): skipped without CUDA, mpirun or MPI
  cmake_language(DEFER CALL set_tests_properties test_cuda_fake_mpi PROPERTIES SKIP_RETURN_CODE 77)
  cmake_language(DEFER CALL set_tests_properties test_cuda_fake_mpi_recovery PROPERTIES SKIP_RETURN_CODE 77)
  cmake_language(DEFER CALL set_tests_properties test_cuda_lazy PROPERTIES SKIP_RETURN_CODE 77)
  # the typed matrix product's host logic against a fake cuBLASLt: skipped without CUDA
  cmake_language(DEFER CALL set_tests_properties test_cuda_gemm_fake PROPERTIES SKIP_RETURN_CODE 77)
  # the flash-attention kernels on the CPU emulation: skipped without the CUDA headers
  cmake_language(DEFER CALL set_tests_properties test_flash_emulated test_flash32_emulated
                 test_flash_tf32_emulated test_layernorm_rows_emulated
                 PROPERTIES SKIP_RETURN_CODE 77)
  # the stage on a fake CPU device needs only the toolkit's headers: skipped without CUDA
  cmake_language(DEFER CALL set_tests_properties test_cuda_fake_stage test_cuda_fake_stage16
                 PROPERTIES SKIP_RETURN_CODE 77)
  # SM partitions and event timing against a fake driver / runtime: skipped without CUDA
  cmake_language(DEFER CALL set_tests_properties test_cuda_green_fake test_cuda_timing_fake
                 PROPERTIES SKIP_RETURN_CODE 77)
endif()
