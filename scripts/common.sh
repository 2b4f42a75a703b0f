# shellcheck shell=bash
# Shared steps of scripts/setup.sh and scripts/test.sh. Source it; do not run it.
#
#   orrery_install_deps   apt-get install the Debian packages Orrery needs (skipped when
#                         every one of them is already installed)
#   orrery_build          configure build/ with Ninja (first time only) and build it
#
# Environment: ORRERY_BUILD_DIR (default build), ORRERY_JOBS (default 2),
# ORRERY_CMAKE_ARGS (extra arguments for the first configure).

ORRERY_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libboost-fiber-dev libboost-context-dev libboost-dev
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libhiredis-dev libspdlog-dev
  redis-server
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev
  libcpp-httplib-dev  # the dashboard's HTTP server (dashboard/)
  libtorch-dev libgloo-dev  # orrery/train/torch.h (ORRERY_WITH_TORCH=AUTO builds it when found)
)
# Only for the tests (the Docker image leaves them out).
ORRERY_TEST_PACKAGES=(
  curl  # tests/e2e/dashboard_http_test.sh
  chromium fonts-dejavu-core  # tests/e2e/dashboard_browser_test.sh: the dashboard in a headless browser
)

orrery_log() { printf '==> %s\n' "$*"; }

# Prints the packages of both lists that are not installed (one per line).
orrery_missing_packages() {
  local pkg status
  for pkg in "${ORRERY_PACKAGES[@]}" "${ORRERY_TEST_PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    if [[ "$status" != "installed" ]]; then
      printf '%s\n' "$pkg"
    fi
  done
}

orrery_install_deps() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "error: dpkg-query not found; Orrery's setup script supports Debian 12 (bookworm)." >&2
    return 1
  fi
  local -a missing
  mapfile -t missing < <(orrery_missing_packages)
  if [[ ${#missing[@]} -eq 0 ]]; then
    orrery_log "All $((${#ORRERY_PACKAGES[@]} + ${#ORRERY_TEST_PACKAGES[@]})) Debian packages are installed"
    return 0
  fi
  local -a sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "error: missing packages and not root (no sudo): ${missing[*]}" >&2
      return 1
    fi
  fi
  orrery_log "Installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

orrery_build() {
  local dir="${ORRERY_BUILD_DIR:-build}" jobs="${ORRERY_JOBS:-2}"
  if [[ ! -f "$dir/build.ninja" ]]; then
    orrery_log "Configuring $dir/ (Ninja)"
    # shellcheck disable=SC2086  # user-supplied extra arguments
    cmake -S . -B "$dir" -G Ninja ${ORRERY_CMAKE_ARGS:-}
  fi
  orrery_log "Building $dir/ with -j$jobs"
  cmake --build "$dir" -j "$jobs"
}
