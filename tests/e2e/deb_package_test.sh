#!/usr/bin/env bash
# The Debian package (docs/packaging.md) in a clean container:
#   1. cpack makes orrery_<version>_amd64.deb from this build; its Depends name the Debian
#      runtime packages (libzmq5, libhiredis, redis-server, ...)
#   2. the package base image (docker/make-base-image.sh --package: debootstrap of the
#      package's Depends, g++ and cmake; kept and reused) starts a container with no network
#   3. docker/Dockerfile.deb builds an image from it on that base (`apt-get install
#      ./orrery_*.deb`, no network)
#   4. in a container of that image, with no network: `orrery --version` names the project
#      and protocol versions; tests/e2e/consumer is built with find_package(Orrery) and runs
#      on the embedded default (real worker processes); `orrery start --head`, `orrery
#      status` and `orrery stop` work, and nothing of the cluster is left running
#   5. the container and the image from the package are removed; the base image is kept
# Exits 77 (reported as skipped) when docker, dockerd, debootstrap or cpack is missing, when
# not root, when dockerd cannot start, or when Debian's archive cannot be reached.
# Usage: deb_package_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/e2e/session_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/session_lib.sh"
e2e_args "$@"
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

skip() {
  echo "SKIP: $*"
  exit 77
}
for tool in docker dockerd debootstrap cpack dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 ||
    skip "$tool is not installed (Debian: apt-get install docker.io debootstrap cmake dpkg)"
done
[[ $(id -u) -eq 0 ]] || skip "not root (dockerd and debootstrap need root)"
require_built "$orrery_bin"

start_test_session deb
container=orrery-e2e-deb-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
image=$container:latest
cleanup_deb() {
  local rc=$?
  set +e
  docker rm -f "$container" >/dev/null 2>&1
  docker rmi -f "$image" >/dev/null 2>&1
  stop_own_dockerd
  (exit "$rc")
  cleanup_test_session
}
trap cleanup_deb EXIT

step "cpack"
cpack --config "$build_dir/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 || {
  tail -n 30 "$tmp/cpack.log"
  fail "cpack failed"
}
deb=$(find "$tmp/pkg" -maxdepth 1 -name 'orrery_*_amd64.deb' -print -quit)
[[ -n "$deb" ]] || fail "cpack made no orrery_<version>_amd64.deb (its log: $(tail -n 3 "$tmp/cpack.log"))"
depends=$(dpkg-deb -f "$deb" Depends)
echo "$(basename "$deb"): Depends: $depends"
for want in libzmq5 libhiredis libsodium23 redis-server libmsgpack-cxx-dev; do
  [[ "$depends" == *"$want"* ]] || fail "the package's Depends lacks $want"
done
[[ "$depends" != *libtorch* ]] || fail "orrery depends on libtorch (only orrery-torch should)"

step "dockerd"
ensure_dockerd

step "the package base image (docker/make-base-image.sh --package)"
base_rc=0
"$source_dir/docker/make-base-image.sh" --package >"$tmp/base.out" || base_rc=$?
[[ $base_rc -eq 3 ]] && skip "Debian's archive could not be reached to make the base image"
[[ $base_rc -eq 0 ]] || fail "docker/make-base-image.sh --package failed ($base_rc)"
base=$(tail -n 1 "$tmp/base.out")

step "an image from the package (docker/Dockerfile.deb, no network)"
mkdir -p "$tmp/image" "$tmp/ctx"
cp "$deb" "$tmp/image/"
docker build --network none -q -f "$source_dir/docker/Dockerfile.deb" --build-arg BASE="$base" \
  -t "$image" "$tmp/image" >"$tmp/image.log" 2>&1 || {
  tail -n 30 "$tmp/image.log"
  fail "docker build -f docker/Dockerfile.deb failed"
}
docker run --rm --network none "$image" --version | grep -Eq '^orrery [0-9.]+ \(protocol' ||
  fail "the image's entrypoint is not a working orrery"

step "used in a container of that image (no network)"
cp -r "$source_dir/tests/e2e/consumer" "$tmp/ctx/consumer"
cat >"$tmp/ctx/inside.sh" <<'INSIDE'
set -euo pipefail
cd /ctx
echo "installed: $(dpkg-query -W -f '${Package} ${Version} ${Status}' orrery)"
dpkg-query -W -f '${Status}' orrery | grep -q 'install ok installed'
[[ -z "$(ls /tmp/orrery_*.deb 2>/dev/null)" ]] || { echo "FAIL: the .deb was left in the image" >&2; exit 1; }
orrery --version
orrery --version | grep -Eq '^orrery [0-9]+\.[0-9]+\.[0-9]+ \(protocol version [0-9]+\)$'
cmake -S /ctx/consumer -B /tmp/consumer -DCMAKE_BUILD_TYPE=Release >/tmp/cmake.log 2>&1 || {
  cat /tmp/cmake.log
  exit 1
}
cmake --build /tmp/consumer -j 2 >/tmp/build.log 2>&1 || {
  cat /tmp/build.log
  exit 1
}
/tmp/consumer/app
orrery start --head --port 0 --no-dashboard
orrery status
orrery stop
# No orrery daemon or redis-server left (zombies aside: bash, PID 1 here, reaps late).
left() {
  local stat
  for stat in /proc/[0-9]*/stat; do
    awk '($2 == "(orrery)" || $2 == "(redis-server)") && $3 != "Z" { print $1, $2 }' "$stat" 2>/dev/null
  done
}
for _ in $(seq 100); do
  [[ -z "$(left)" ]] && break
  sleep 0.1
done
if [[ -n "$(left)" ]]; then
  echo "FAIL: left running after orrery stop: $(left)" >&2
  exit 1
fi
echo "OK"
INSIDE
docker run --name "$container" --network none -v "$tmp/ctx:/ctx:ro" --entrypoint bash "$image" \
  /ctx/inside.sh 2>&1 | tee "$tmp/inside.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || fail "the package did not work in the container (above)"
grep -q '^OK$' "$tmp/inside.log" || fail "the container's script did not finish"
echo "PASS"
