# Installation: `cmake --install build [--prefix DIR]` puts in place
#   bin/zbpp, lib/libzbpp.so.<version> (SONAME libzbpp.so.<major>) + libzbpp.so, lib/libzbpp.a,
#   include/zbpp/*.h,
#   lib/pkgconfig/zbpp.pc, lib/cmake/zbpp/{zbppConfig,zbppConfigVersion,zbppTargets}.cmake
#   (imported target zbpp::zbpp) and the Python planner module (python/zbpp).
# The shared library is built from the same sources as the static `zbpp` the tests link (sources,
# private include dirs, definitions and dependencies are read off that target, so the optional
# GLPK/MPI/BLAS snippets need to know about one target only). Its dependencies are private: the
# shared object records them (DT_NEEDED), so users link -lzbpp alone; pkg-config --static and
# Libs.private give the full list for static linking. See docs/install.md.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(zbpp_shared SHARED $<TARGET_PROPERTY:zbpp,SOURCES>)
set_target_properties(zbpp_shared PROPERTIES
  OUTPUT_NAME zbpp
  VERSION ${ZB_VERSION_STRING}
  SOVERSION ${PROJECT_VERSION_MAJOR}
  EXPORT_NAME zbpp
  C_VISIBILITY_PRESET default)
target_include_directories(zbpp_shared
  PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}/include>
         $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  PRIVATE ${CMAKE_SOURCE_DIR}/src $<TARGET_PROPERTY:zbpp,INCLUDE_DIRECTORIES>)
target_compile_definitions(zbpp_shared PRIVATE $<TARGET_PROPERTY:zbpp,COMPILE_DEFINITIONS>)
target_compile_options(zbpp_shared PRIVATE $<TARGET_PROPERTY:zbpp,COMPILE_OPTIONS>)
target_link_libraries(zbpp_shared PRIVATE $<TARGET_PROPERTY:zbpp,LINK_LIBRARIES>)
target_link_options(zbpp_shared PRIVATE -Wl,--no-undefined)
add_library(zbpp::zbpp ALIAS zbpp_shared)

install(TARGETS zbpp_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The static archive too, for `pkg-config --static` users (not part of the CMake package).
install(TARGETS zbpp ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS zbpp_shared EXPORT zbppTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/zbpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES ${CMAKE_BINARY_DIR}/include/zbpp/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zbpp)
install(FILES ${CMAKE_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/zbpp)

# CMake package: find_package(zbpp) gives zbpp::zbpp.
set(ZB_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/zbpp)
install(EXPORT zbppTargets NAMESPACE zbpp:: DESTINATION ${ZB_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/zbppConfig.cmake.in
  ${CMAKE_BINARY_DIR}/zbppConfig.cmake INSTALL_DESTINATION ${ZB_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/zbppConfigVersion.cmake
  VERSION ${ZB_VERSION_STRING} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/zbppConfig.cmake ${CMAKE_BINARY_DIR}/zbppConfigVersion.cmake
  DESTINATION ${ZB_CMAKE_DIR})

# pkg-config: the private dependencies as flags, for `pkg-config --static`.
set(ZB_PC_REQUIRES_PRIVATE "")
set(ZB_PC_LIBS_PRIVATE "")
if(ZB_BLAS STREQUAL "openblas")
  set(ZB_PC_REQUIRES_PRIVATE "openblas")
elseif(ZB_BLIS_LIBRARY)
  get_filename_component(_zb_blis_dir ${ZB_BLIS_LIBRARY} DIRECTORY)
  string(APPEND ZB_PC_LIBS_PRIVATE " -L${_zb_blis_dir} -lblis")
endif()
if(ZB_HAVE_GLPK)
  string(APPEND ZB_PC_LIBS_PRIVATE " ${GLPK_LIBRARY}")
endif()
if(ZB_HAVE_ONEDNN)
  string(APPEND ZB_PC_LIBS_PRIVATE " ${DNNL_LIBRARY}")
endif()
if(ZB_HAVE_MPI)
  foreach(_zb_lib ${MPI_C_LIBRARIES})
    string(APPEND ZB_PC_LIBS_PRIVATE " ${_zb_lib}")
  endforeach()
endif()
string(APPEND ZB_PC_LIBS_PRIVATE " -pthread -lm")
string(STRIP "${ZB_PC_LIBS_PRIVATE}" ZB_PC_LIBS_PRIVATE)
file(RELATIVE_PATH ZB_PC_PREFIX_REL /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${CMAKE_SOURCE_DIR}/cmake/zbpp.pc.in ${CMAKE_BINARY_DIR}/zbpp.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/zbpp.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Python planner module (ctypes over libzbpp.so): python/zbpp -> <prefix>/<ZB_PYTHON_DIR>/zbpp,
# with _install.py recording where the library was installed so `import zbpp` finds it.
# Default: Debian's system-wide directory for prefix /usr (on python3's path there); for other
# prefixes add <prefix>/lib/python3/dist-packages to PYTHONPATH, or set ZB_PYTHON_DIR.
set(ZB_PYTHON_DIR "lib/python3/dist-packages" CACHE STRING
    "where `cmake --install` puts the zbpp Python package (relative to the prefix)")
install(DIRECTORY ${CMAKE_SOURCE_DIR}/python/zbpp DESTINATION ${ZB_PYTHON_DIR}
  FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(CODE "
  set(_zb_py \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${ZB_PYTHON_DIR}/zbpp/_install.py\")
  file(WRITE \${_zb_py} \"# written by cmake --install: where libzbpp was installed\\nLIBRARY = '\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libzbpp.so.${PROJECT_VERSION_MAJOR}'\\n\")
")
