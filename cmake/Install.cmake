# `cmake --install build --prefix P` installs what C users expect:
#   P/bin/tmm                           the command (self-contained: linked with the static library)
#   P/lib/libtmm.so*                    the library: the public API of include/tmm/ alone
#   P/include/tmm/*.h                   its headers
#   P/lib/pkgconfig/tmm.pc              pkg-config --cflags --libs tmm (relocatable: paths from pcfiledir)
#   P/lib/cmake/tmm/tmmConfig.cmake     find_package(tmm) gives the imported target tmm::tmm
# tests/install_test.sh builds examples/generate.c against an installed copy both ways.
include(CMakePackageConfigHelpers)

install(TARGETS tmm_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS tmm_shared EXPORT tmmTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/tmm DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

set(_tmm_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/tmm)
install(EXPORT tmmTargets NAMESPACE tmm:: DESTINATION ${_tmm_cmake_dir})
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/tmmConfig.cmake
     "include(\"\${CMAKE_CURRENT_LIST_DIR}/tmmTargets.cmake\")\n")
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tmmConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tmmConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/tmmConfigVersion.cmake
        DESTINATION ${_tmm_cmake_dir})

# The .pc file finds the prefix from its own location, so it stays right for
# any --prefix given at install time.
file(RELATIVE_PATH _tmm_pc_to_prefix /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/tmm.pc
"prefix=\${pcfiledir}/${_tmm_pc_to_prefix}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}

Name: tmm
Description: Vulkan runtime for Toeplitz MLP Mixer language models
Version: ${PROJECT_VERSION}
Libs: -L\${libdir} -ltmm
Cflags: -I\${includedir}
")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tmm.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
