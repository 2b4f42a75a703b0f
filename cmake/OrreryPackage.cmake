# The Debian packages (docs/packaging.md): after a build,
#   cpack --config build/CPackConfig.cmake   # -> build/orrery_<version>_amd64.deb
#                                            #    (and orrery-torch_<version>_amd64.deb)
# orrery holds what `cmake --install` installs (libraries, headers, the CMake package, the
# `orrery` command, the Python module orrery_train and the docs) under /usr; orrery-torch,
# made only from a build that found libtorch, holds Orrery::train_torch (component torch),
# so that orrery itself does not pull libtorch in. Depends are computed from the libraries
# and programs each holds (dpkg-shlibdeps: libzmq5, libhiredis, libsodium, libspdlog, ...),
# plus what the programs start or a program built against them includes: redis-server,
# msgpack-c's and nlohmann-json's headers (libtorch's for orrery-torch).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME orrery)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Orrery")
set(CPACK_PACKAGE_CONTACT "Orrery maintainers <maintainers@orrery.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Actor cluster framework for C++: libraries, headers, CMake package and the orrery command")
set(CPACK_PACKAGE_DESCRIPTION
    "Orrery schedules actors with resource demands (CPUs, GPUs, TPU slices) onto the nodes of a cluster over ZeroMQ, keeps the cluster's state in Redis, and gang-schedules SPMD training across hosts. find_package(Orrery) finds it.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# The packages and their staging trees go to the build directory, wherever cpack runs.
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <package>_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_UNSPECIFIED_PACKAGE_NAME orrery)
set(CPACK_DEBIAN_UNSPECIFIED_PACKAGE_DEPENDS "redis-server, libmsgpack-cxx-dev, nlohmann-json3-dev")
set(CPACK_DEBIAN_UNSPECIFIED_PACKAGE_RECOMMENDS "cmake, g++, pkg-config")
set(CPACK_DEBIAN_TORCH_PACKAGE_NAME orrery-torch)
set(CPACK_DEBIAN_TORCH_PACKAGE_DEPENDS "orrery (= ${PROJECT_VERSION}), libtorch-dev, libgloo-dev")
set(CPACK_DEBIAN_TORCH_DESCRIPTION "Orrery's libtorch integration (Orrery::train_torch)")
# orrery-torch's library links orrery's, which dpkg-shlibdeps looks for here.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
    ${CMAKE_BINARY_DIR}/core ${CMAKE_BINARY_DIR}/actors ${CMAKE_BINARY_DIR}/train
    ${CMAKE_BINARY_DIR}/scheduler ${CMAKE_BINARY_DIR}/objects ${CMAKE_BINARY_DIR}/node)
set(CPACK_COMPONENTS_ALL Unspecified)
if(TARGET orrery_train_torch)
  list(APPEND CPACK_COMPONENTS_ALL torch)
endif()
include(CPack)
