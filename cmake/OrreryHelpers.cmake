# orrery_module(NAME SOURCES ... DEPS ... PRIVATE_DEPS ...)
# One library per module: public headers in <module>/include, private code in <module>/src.
# Headers other modules may include live in <module>/internal/ and are included as
# "<module>/internal/x.h" from the source root, a build-tree-only include directory that is
# never installed; <module>/src/ is the module's own (scripts/lint.sh checks both rules and
# the direction of every dependency, docs/architecture.md "Modules").
# EXPORT names the export set (default OrreryTargets) and COMPONENT the install component
# (default Unspecified: the Debian package orrery; cmake/OrreryPackage.cmake); a module of
# another component installs its library only.
function(orrery_module name)
  cmake_parse_arguments(M "" "EXPORT;COMPONENT" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  if(NOT M_EXPORT)
    set(M_EXPORT OrreryTargets)
  endif()
  if(NOT M_COMPONENT)
    set(M_COMPONENT Unspecified)
  endif()
  add_library(orrery_${name} ${M_SOURCES})
  add_library(Orrery::${name} ALIAS orrery_${name})
  set_target_properties(orrery_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME orrery_${name})
  target_include_directories(orrery_${name} PRIVATE ${PROJECT_SOURCE_DIR})
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_include_directories(orrery_${name}
      PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    # A module of another component (train_torch) shares its folder's headers, which the
    # folder's main module installs: no file in two packages.
    if(M_COMPONENT STREQUAL "Unspecified")
      install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
    endif()
  endif()
  target_link_libraries(orrery_${name} PUBLIC ${M_DEPS} PRIVATE ${M_PRIVATE_DEPS})
  orrery_warnings(orrery_${name})
  install(TARGETS orrery_${name} EXPORT ${M_EXPORT}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ${M_COMPONENT}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ${M_COMPONENT})
endfunction()

function(orrery_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
  # A unity build includes each source into a generated one, so gcc takes every source for a
  # header and warns of a class that uses a type of the source's anonymous namespace: true of
  # a header, not of a source.
  if(ORRERY_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
  endif()
  if(ORRERY_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
