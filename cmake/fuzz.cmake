# libFuzzer harnesses (fuzz/fuzz_*.c), built when -DZB_FUZZ=ON with clang (CC=clang).
# fuzz_csv needs only the planner (src/schedule + src/util, libc only) and links a private copy of
# those sources instrumented for coverage + ASan + UBSan. The file-reader harnesses (every other
# fuzz_*.c) link an instrumented copy of the whole library (plus the CLI's option parser for the
# cost file) and the BLAS. docs/reliability.md says how to run them.
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(WARNING "ZB_FUZZ=ON needs clang (configure with CC=clang); no fuzz targets built")
  return()
endif()

set(ZB_FUZZ_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -g)
file(GLOB ZB_FUZZ_LIB_SOURCES CONFIGURE_DEPENDS
     ${CMAKE_SOURCE_DIR}/src/schedule/*.c ${CMAKE_SOURCE_DIR}/src/util/*.c)
list(FILTER ZB_FUZZ_LIB_SOURCES EXCLUDE REGEX ".*_(mpi|glpk)\\.c$")
list(FILTER ZB_FUZZ_LIB_SOURCES EXCLUDE REGEX ".*/blas_setup\\.c$")
add_library(zbpp_fuzzlib STATIC ${ZB_FUZZ_LIB_SOURCES})
target_include_directories(zbpp_fuzzlib PUBLIC ${CMAKE_SOURCE_DIR}/include
                           PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_compile_options(zbpp_fuzzlib PRIVATE ${ZB_FUZZ_FLAGS})
target_link_libraries(zbpp_fuzzlib PUBLIC m Threads::Threads)

# the whole library, instrumented, for the file readers
add_library(zbpp_fuzzfull STATIC ${ZB_LIB_SOURCES} ${CMAKE_SOURCE_DIR}/src/cli/args.c)
target_include_directories(zbpp_fuzzfull PUBLIC ${CMAKE_SOURCE_DIR}/include ${CMAKE_BINARY_DIR}/include
                           ${CMAKE_SOURCE_DIR}/src)
target_compile_options(zbpp_fuzzfull PRIVATE ${ZB_FUZZ_FLAGS})
target_link_libraries(zbpp_fuzzfull PUBLIC m Threads::Threads)
if(COMMAND zb_link_blas)
  zb_link_blas(zbpp_fuzzfull)
endif()

file(GLOB ZB_FUZZ_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/fuzz/fuzz_*.c)
foreach(src ${ZB_FUZZ_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined -g)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_compile_definitions(${name} PRIVATE ZB_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  if(name STREQUAL "fuzz_csv")
    target_link_libraries(${name} PRIVATE zbpp_fuzzlib)
  else()
    target_link_libraries(${name} PRIVATE zbpp_fuzzfull)
  endif()
endforeach()
