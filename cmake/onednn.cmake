# oneDNN (Debian's libdnnl-dev) runs the CPU's bf16 matrix products (`--precision bf16` without a
# GPU; docs/compute.md, "bf16 on the CPU"). Found: src/nn/gemm_bf16_onednn.c joins libzbpp and
# ZB_HAVE_ONEDNN is defined. Missing, or -DZB_ONEDNN=OFF: bf16 on the CPU is refused with a
# line that says zbpp was built without it; everything else is unchanged.
option(ZB_ONEDNN "use oneDNN for bf16 matrix products on CPUs with AVX512-BF16/AMX" ON)
set(ZB_HAVE_ONEDNN OFF)
if(ZB_ONEDNN)
  find_path(DNNL_INCLUDE_DIR dnnl.h)
  find_library(DNNL_LIBRARY NAMES dnnl)
endif()
if(ZB_ONEDNN AND DNNL_INCLUDE_DIR AND DNNL_LIBRARY)
  message(STATUS "oneDNN: ${DNNL_LIBRARY}")
  target_sources(zbpp PRIVATE ${CMAKE_SOURCE_DIR}/src/nn/gemm_bf16_onednn.c)
  target_include_directories(zbpp PRIVATE ${DNNL_INCLUDE_DIR})
  target_compile_definitions(zbpp PRIVATE ZB_HAVE_ONEDNN)
  target_link_libraries(zbpp PUBLIC ${DNNL_LIBRARY} ${CMAKE_DL_LIBS})
  set(ZB_HAVE_ONEDNN ON)
else()
  message(STATUS "oneDNN not used: --precision bf16 on the CPU will say so")
endif()
