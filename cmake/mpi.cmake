# Open MPI (or any MPI-3) for `zbpp train --transport mpi`: one pipeline rank per process.
# Found: src/comm/transport_mpi.c joins libzbpp and ZB_HAVE_MPI is defined (and the test
# scripts tests/mpi_*.sh run under mpirun). Missing: src/comm/transport_nompi.c makes every
# zb_mpi_* call fail with a clear "built without MPI" message.
find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  message(STATUS "MPI: ${MPI_C_LIBRARIES}")
  target_sources(zbpp PRIVATE ${CMAKE_SOURCE_DIR}/src/comm/transport_mpi.c)
  target_compile_definitions(zbpp PRIVATE ZB_HAVE_MPI)
  target_link_libraries(zbpp PUBLIC MPI::MPI_C)
  set(ZB_HAVE_MPI ON)
else()
  message(STATUS "MPI not found: --transport mpi will report that it is unavailable")
  set(ZB_HAVE_MPI OFF)
endif()

# tests/mpi_*.sh exit 77 when mpirun (or MPI in this build) is missing: ctest shows them as
# skipped, not passed. Deferred: the tests are declared after this file is included.
if(ZB_TESTS)
  file(GLOB ZB_MPI_SHELL_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/mpi_*.sh)
  foreach(script ${ZB_MPI_SHELL_TESTS})
    get_filename_component(name ${script} NAME_WE)
    # EVAL bakes the name in: DEFER CALL would expand ${name} only when it runs (then every
    # deferred call hit whichever test the variable named last)
    cmake_language(EVAL CODE "cmake_language(DEFER CALL set_tests_properties [[${name}]] PROPERTIES SKIP_RETURN_CODE 77)")
  endforeach()
endif()
