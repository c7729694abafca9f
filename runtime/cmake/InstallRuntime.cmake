#===-- libfusion: the runtime as a versioned shared library, installed ----===#
# `cmake --install <build> --component fusion_runtime --prefix P` installs
# P/lib/libfusion.so.<version> (SONAME libfusion.so.<major>), the headers of
# fusion/runtime and fusion/contract, and P/lib/cmake/fusion/fusionConfig.cmake
# so that a C++ project can
#   find_package(fusion 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE fusion::runtime)
# runtime/test/install/ is such a project (ctest runtime.install).
option(FUSION_RUNTIME_INSTALL
  "Build libfusion.so and install it with its headers and fusionConfig.cmake" ON)
set(FUSION_RUNTIME_VERSION 0.1.0)
if(NOT FUSION_RUNTIME_INSTALL)
  return()
endif()

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
# The static libraries go into the shared one whole, so they need PIC.
set(_fusion_parts fusion_runtime fusion_model fusion_kvcache fusion_dtype)
set_target_properties(${_fusion_parts} PROPERTIES POSITION_INDEPENDENT_CODE ON)
# Its own source: the version (fusion/runtime/Version.h).
add_library(fusion SHARED src/Version.cpp)
target_compile_definitions(fusion PRIVATE
  FUSION_RUNTIME_VERSION="${FUSION_RUNTIME_VERSION}")
# Whole archives as linker options (LINK_LIBRARY:WHOLE_ARCHIVE refuses
# archives that other targets link without it); relinked when one changes.
set(_fusion_archives)
foreach(_part ${_fusion_parts})
  list(APPEND _fusion_archives $<TARGET_FILE:${_part}>)
endforeach()
add_dependencies(fusion ${_fusion_parts})
target_link_options(fusion PRIVATE
  "LINKER:--whole-archive" ${_fusion_archives} "LINKER:--no-whole-archive")
set_property(TARGET fusion APPEND PROPERTY LINK_DEPENDS ${_fusion_archives})
target_link_libraries(fusion PRIVATE ${CMAKE_DL_LIBS} PUBLIC CUDA::toolkit)
target_include_directories(fusion PUBLIC
  $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(fusion INTERFACE cxx_std_17)
set_target_properties(fusion PROPERTIES
  VERSION ${FUSION_RUNTIME_VERSION}
  SOVERSION 0
  EXPORT_NAME runtime)

install(TARGETS fusion EXPORT fusionTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT fusion_runtime)
# Not the CPU reference's headers (fusion_reference and fusion_tooling are
# not in libfusion).
install(DIRECTORY include/fusion/runtime include/fusion/contract
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fusion COMPONENT fusion_runtime
  PATTERN Compare.h EXCLUDE PATTERN Golden.h EXCLUDE PATTERN Reference.h EXCLUDE)
install(EXPORT fusionTargets NAMESPACE fusion::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fusion COMPONENT fusion_runtime)
configure_package_config_file(cmake/fusionConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/fusionConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fusion)
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/fusionConfigVersion.cmake
  VERSION ${FUSION_RUNTIME_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/fusionConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/fusionConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fusion COMPONENT fusion_runtime)
