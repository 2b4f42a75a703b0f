#!/usr/bin/env bash
# Installs a build tree into a staging prefix laid out as /usr/local is in the images: the
# build context of docker/Dockerfile.prebuilt.
#
#   docker/stage.sh BUILD_DIR STAGE_DIR
#
# STAGE_DIR gets `cmake --install BUILD_DIR --strip` (bin/orrery, lib/liborrery_*.so, the
# headers and the CMake package) and the example programs of BUILD_DIR/examples in
# libexec/orrery/examples/, stripped. (A build with libtorch installs liborrery_train_torch
# too; it stays, unused: the runtime base image, make-base-image.sh, has no libtorch.)
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR STAGE_DIR" >&2
  exit 2
fi
build=$1
stage=$2
[[ -f "$build/cmake_install.cmake" ]] || {
  echo "stage.sh: $build is not a configured build directory" >&2
  exit 1
}
mkdir -p "$stage"
stage=$(cd "$stage" && pwd)

cmake --install "$build" --prefix "$stage" --strip >/dev/null
install -d "$stage/libexec/orrery/examples"
find "$build/examples" -maxdepth 1 -type f -perm -u+x -print0 |
  while IFS= read -r -d '' exe; do
    install -s -m 755 "$exe" "$stage/libexec/orrery/examples/"
  done
