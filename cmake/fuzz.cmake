# libFuzzer harnesses (fuzz/fuzz_*.c), built when -DZB_FUZZ=ON with clang (CC=clang).
# The harnesses only need the planner (src/schedule + src/util, libc only), so they link a
# private copy of those sources instrumented for coverage + ASan + UBSan instead of the whole
# library: faster to build, and independent of BLAS/MPI.
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(WARNING "ZB_FUZZ=ON needs clang (configure with CC=clang); no fuzz targets built")
  return()
endif()

set(ZB_FUZZ_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -g)
file(GLOB ZB_FUZZ_LIB_SOURCES CONFIGURE_DEPENDS
     ${CMAKE_SOURCE_DIR}/src/schedule/*.c ${CMAKE_SOURCE_DIR}/src/util/*.c)
list(FILTER ZB_FUZZ_LIB_SOURCES EXCLUDE REGEX ".*_(mpi|glpk)\\.c$")
add_library(zbpp_fuzzlib STATIC ${ZB_FUZZ_LIB_SOURCES})
target_include_directories(zbpp_fuzzlib PUBLIC ${CMAKE_SOURCE_DIR}/include
                           PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_compile_options(zbpp_fuzzlib PRIVATE ${ZB_FUZZ_FLAGS})
target_link_libraries(zbpp_fuzzlib PUBLIC m Threads::Threads)

file(GLOB ZB_FUZZ_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/fuzz/fuzz_*.c)
foreach(src ${ZB_FUZZ_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined -g)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(${name} PRIVATE zbpp_fuzzlib)
endforeach()
