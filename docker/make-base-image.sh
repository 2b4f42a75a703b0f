#!/usr/bin/env bash
# Makes a Debian 12 (bookworm) base image without an image registry: debootstrap builds a
# minimal root file system from Debian's archive, and `docker import` turns it into an image.
#
#   docker/make-base-image.sh              # the runtime base: what Orrery's binaries load
#   docker/make-base-image.sh --build      # also the build packages of scripts/common.sh
#   docker/make-base-image.sh --package    # the runtime base, a compiler and CMake: where the
#                                          # Debian package is installed and built against
#
# The runtime base holds the shared libraries Orrery's executables and libraries link
# (`ldd build/cli/orrery`: libzmq5, libsodium23, libhiredis0.14, libspdlog1.10 with libfmt9,
# libcpp-httplib0.11, libyaml-cpp0.7) and redis-server; no compiler, no libtorch (train_torch_mlp and
# liborrery_train_torch need it; train_linear does not). docker/Dockerfile.prebuilt puts an
# installed Orrery on it. The build base (--build) has every package of ORRERY_PACKAGES, so
# `docker build --build-arg BASE=<it> -f docker/Dockerfile .` needs no network at all. The
# package base (--package) holds every Depends of orrery_<version>_amd64.deb
# (docs/packaging.md) and g++, cmake, make and pkg-config, so that `apt-get install
# ./orrery_*.deb` and a build with find_package(Orrery) need no network either.
#
# The image is tagged orrery-base:bookworm-<hash> (orrery-base-build:... with --build,
# orrery-base-package:... with --package), the
# hash being that of the suite, the mirror and the package list: an image with that tag is
# reused (--force makes it again). The tag is the last line printed on stdout.
#
# Environment: ORRERY_DEBIAN_MIRROR (default http://deb.debian.org/debian).
# Needs root, debootstrap and a running dockerd. Exit status 3 when the archive cannot be
# reached (debootstrap failed to download), 1 on any other failure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
suite=bookworm
mirror=${ORRERY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
runtime_packages=(
  libzmq5 libsodium23 libhiredis0.14 libspdlog1.10 libfmt9 libcpp-httplib0.11 libyaml-cpp0.7
  redis-server
)

kind=runtime
force=0
for arg in "$@"; do
  case "$arg" in
    --build) kind=build ;;
    --package) kind=package ;;
    --force) force=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "make-base-image.sh: unknown argument $arg (see --help)" >&2
      exit 2
      ;;
  esac
done

packages=("${runtime_packages[@]}")
repo=orrery-base
if [[ "$kind" == build ]]; then
  # shellcheck source=scripts/common.sh
  source "$here/../scripts/common.sh"
  packages+=("${ORRERY_PACKAGES[@]}")
  repo=orrery-base-build
elif [[ "$kind" == package ]]; then
  packages+=(g++ cmake make pkg-config libmsgpack-cxx-dev nlohmann-json3-dev)
  repo=orrery-base-package
fi
include=$(printf '%s\n' "${packages[@]}" | sort -u | paste -sd, -)
hash=$(printf '%s\n' "$suite" "$mirror" "$include" | sha256sum | cut -c1-12)
tag="$repo:$suite-$hash"

if [[ $force -eq 0 ]] && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "make-base-image.sh: $tag exists, reused" >&2
  echo "$tag"
  exit 0
fi

for tool in debootstrap docker; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "make-base-image.sh: $tool is not installed" >&2
    exit 1
  }
done
[[ $(id -u) -eq 0 ]] || {
  echo "make-base-image.sh: debootstrap needs root" >&2
  exit 1
}

rootfs=$(mktemp -d "${TMPDIR:-/tmp}/orrery-rootfs.XXXXXX")
trap 'rm -rf "$rootfs"' EXIT

echo "make-base-image.sh: debootstrap $suite from $mirror with: $include" >&2
start=$SECONDS
if ! debootstrap --variant=minbase --include="$include" "$suite" "$rootfs" "$mirror" \
  >"$rootfs.log" 2>&1; then
  tail -n 20 "$rootfs.log" >&2
  if grep -qE "Failed getting release file|Couldn't download|Failure trying to run|Temporary failure resolving|Could not resolve" "$rootfs.log"; then
    echo "make-base-image.sh: could not download from $mirror" >&2
    rm -f "$rootfs.log"
    exit 3
  fi
  rm -f "$rootfs.log"
  exit 1
fi
rm -f "$rootfs.log"
echo "make-base-image.sh: debootstrap took $((SECONDS - start)) s" >&2

# What an image does not need: the package caches and lists, documentation, locales.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
  "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*.log "$rootfs"/var/cache/debconf/*-old
# Docker mounts its own; the host's must not end up in the image.
: >"$rootfs/etc/resolv.conf"
: >"$rootfs/etc/hostname"

start=$SECONDS
tar -C "$rootfs" --numeric-owner -c . |
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["bash"]' \
    --change "LABEL org.orrery.base.packages=$include" \
    --message "debootstrap --variant=minbase $suite $mirror" \
    - "$tag" >/dev/null
echo "make-base-image.sh: docker import took $((SECONDS - start)) s;" \
  "$(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1 / 1e6}')" >&2
echo "$tag"
