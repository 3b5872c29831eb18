# GLPK (GNU Linear Programming Kit) for `-s optimal`: the exact MILP scheduler.
# Found: src/schedule/optimal*_glpk.c join libzbpp and ZB_HAVE_GLPK is defined.
# Missing: the registry keeps "optimal", which then fails with a clear message.
find_path(GLPK_INCLUDE_DIR glpk.h)
find_library(GLPK_LIBRARY NAMES glpk)
if(GLPK_INCLUDE_DIR AND GLPK_LIBRARY)
  message(STATUS "GLPK: ${GLPK_LIBRARY}")
  target_sources(zbpp PRIVATE ${CMAKE_SOURCE_DIR}/src/schedule/optimal_glpk.c
    ${CMAKE_SOURCE_DIR}/src/schedule/optimal_bounds_glpk.c ${CMAKE_SOURCE_DIR}/src/schedule/optimal_model_glpk.c)
  target_include_directories(zbpp PRIVATE ${GLPK_INCLUDE_DIR})
  target_compile_definitions(zbpp PRIVATE ZB_HAVE_GLPK)
  target_link_libraries(zbpp PUBLIC ${GLPK_LIBRARY})
  set(ZB_HAVE_GLPK ON)
else()
  message(STATUS "GLPK not found: -s optimal will report that it is unavailable")
  set(ZB_HAVE_GLPK OFF)
endif()
