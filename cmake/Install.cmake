# Install rules, a CMake package (find_package(conflux)) and a pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS conflux EXPORT confluxTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES $<TARGET_FILE:conflux_static> DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/conflux DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT confluxTargets NAMESPACE conflux:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/conflux)

write_basic_package_version_file(${PROJECT_BINARY_DIR}/confluxConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
file(WRITE ${PROJECT_BINARY_DIR}/confluxConfig.cmake
  "include(\${CMAKE_CURRENT_LIST_DIR}/confluxTargets.cmake)\n")
install(FILES ${PROJECT_BINARY_DIR}/confluxConfig.cmake ${PROJECT_BINARY_DIR}/confluxConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/conflux)

set(PC_LIBS_PRIVATE "-lhwloc -lpugixml -lcrypto -lpthread")
if(CONFLUX_OFI_ENABLED)
  string(APPEND PC_LIBS_PRIVATE " -ldl")  # libfabric is loaded at run time
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/conflux.pc.in ${PROJECT_BINARY_DIR}/conflux.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/conflux.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
