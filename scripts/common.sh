# shellcheck shell=bash
# Shared steps of scripts/setup.sh and scripts/test.sh. Source it; do not run it.
#
#   orrery_install_deps [--product]
#                         apt-get install the Debian packages Orrery and its tests need
#                         (skipped when every one of them is already installed); with
#                         --product only those that building and running Orrery needs
#   orrery_build [TARGET...]
#                         configure build/ with Ninja (first time only) and build the
#                         targets (default: all)
#   orrery_check_no_leftovers MARKER
#                         fails (and lists, then stops them) when a process whose
#                         environment holds ORRERY_CI_RUN_ID=MARKER still runs
#   orrery_list_skipped JUNIT...
#                         prints the skipped ctest entries of ctest --output-junit files
#
# Environment: ORRERY_BUILD_DIR (default build), ORRERY_JOBS (default 2),
# ORRERY_CMAKE_ARGS (extra arguments for the first configure). Under CI=true the first
# configure adds -DORRERY_WITH_TORCH=ON: the setup installs libtorch, so a build without it
# is a broken setup, not a reason to drop the torch tests.

ORRERY_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libzmq3-dev libsodium-dev cppzmq-dev libmsgpack-cxx-dev libhiredis-dev libspdlog-dev
  redis-server
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev
  libcpp-httplib-dev  # the dashboard's HTTP server (dashboard/)
  libyaml-cpp-dev  # the autoscaler's config file (autoscaler/)
  libtorch-dev libgloo-dev  # orrery/train/torch.h (ORRERY_WITH_TORCH=AUTO builds it when found)
)
# Only for the tests (the Docker image leaves them out).
ORRERY_TEST_PACKAGES=(
  curl python3  # tests/e2e/*.sh
  chromium fonts-dejavu-core  # tests/e2e/dashboard_browser_test.sh: the dashboard in a headless browser
  prometheus  # tests/e2e/prometheus_test.sh: a real Prometheus scrapes the cluster
  docker.io docker-compose debootstrap  # tests/e2e/docker_test.sh: the image and compose cluster
  clang llvm libclang-rt-dev  # .ci/run: sanitizer builds, libFuzzer, llvm-symbolizer (docs/testing.md)
  clang-format clang-tidy  # scripts/lint.sh (.ci/run's lint stage)
  python3-yaml kubernetes-client  # tests/deploy: deploy/kubernetes/ parsed offline (kubectl 1.20)
  python3-torch  # examples/train_torch_ddp.py: PyTorch DDP as an Entrypoint (docs/train.md)
)
# A package whose command another package already provides counts as installed: a host
# with Google Cloud SDK's kubectl cannot install Debian's (both ship /usr/bin/kubectl).
declare -gA ORRERY_PACKAGE_COMMANDS=([kubernetes-client]=kubectl)

orrery_log() { printf '==> %s\n' "$*"; }

# Prints the packages of the lists that are not installed (one per line): both lists, or
# with --product ORRERY_PACKAGES only.
orrery_missing_packages() {
  local pkg status
  local -a pkgs=("${ORRERY_PACKAGES[@]}")
  [[ "${1:-}" == "--product" ]] || pkgs+=("${ORRERY_TEST_PACKAGES[@]}")
  for pkg in "${pkgs[@]}"; do
    if [[ -n "${ORRERY_PACKAGE_COMMANDS[$pkg]:-}" ]] &&
      command -v "${ORRERY_PACKAGE_COMMANDS[$pkg]}" >/dev/null 2>&1; then
      continue
    fi
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
  mapfile -t missing < <(orrery_missing_packages "$@")
  if [[ ${#missing[@]} -eq 0 ]]; then
    orrery_log "The Debian packages are installed"
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
    local -a ci_args=()
    [[ "${CI:-}" == "true" ]] && ci_args=(-DORRERY_WITH_TORCH=ON -DORRERY_WERROR=ON)
    # shellcheck disable=SC2086  # user-supplied extra arguments
    cmake -S . -B "$dir" -G Ninja "${ci_args[@]}" ${ORRERY_CMAKE_ARGS:-}
  fi
  local -a targets=()
  [[ $# -gt 0 ]] && targets=(--target "$@")
  orrery_log "Building ${*:-everything} in $dir/ with -j$jobs"
  cmake --build "$dir" -j "$jobs" "${targets[@]}"
}

# Pids of live processes (not zombies) whose environment holds ORRERY_CI_RUN_ID=$1, except
# this shell, its ancestors and its descendants (the scripts doing the checking).
orrery_marked_procs() {
  local marker="ORRERY_CI_RUN_ID=$1" f pid ppid state p
  local -A parent=() mine=()
  local -a marked=()
  while read -r pid ppid state; do
    [[ "$state" == Z* ]] && continue
    parent[$pid]=$ppid
  done < <(ps -e -o pid=,ppid=,stat=)
  p=$$
  while [[ -n "$p" && "$p" != 0 ]]; do
    mine[$p]=1
    p=${parent[$p]:-}
  done
  mapfile -t marked < <(grep -lzxF "$marker" /proc/[0-9]*/environ 2>/dev/null)
  for f in "${marked[@]}"; do
    pid=${f#/proc/}
    pid=${pid%/environ}
    [[ -n "${parent[$pid]:-}" && -z "${mine[$pid]:-}" ]] || continue
    # A descendant of this shell is part of the check itself.
    p=${parent[$pid]}
    while [[ -n "$p" && "$p" != 0 && "$p" != 1 && "$p" != $$ ]]; do p=${parent[$p]:-}; done
    [[ "$p" == $$ ]] && continue
    echo "$pid"
  done
  return 0
}

# Fails when a process started under marker $1 outlived the run (after a 15 s grace for
# processes that are exiting). Lists the leftovers, then stops them (they are this run's).
orrery_check_no_leftovers() {
  local marker=$1 deadline=$((SECONDS + 15)) pid
  local -a left
  while true; do
    mapfile -t left < <(orrery_marked_procs "$marker")
    [[ ${#left[@]} -eq 0 ]] && { orrery_log "No process of this run is left running"; return 0; }
    ((SECONDS >= deadline)) && break
    sleep 0.5
  done
  echo "FAIL: ${#left[@]} process(es) started by this run still run after it:" >&2
  ps -o pid=,ppid=,etime=,args= -p "$(IFS=,; echo "${left[*]}")" 2>/dev/null | sed 's/^/  /' >&2
  for pid in "${left[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  sleep 2
  for pid in "${left[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  return 1
}

# The skipped ctest entries in ctest --output-junit files, with the gtest cases that
# called GTEST_SKIP and the reason a shell test printed ("SKIP: ...").
orrery_list_skipped() {
  local f
  local -a files=()
  for f in "$@"; do [[ -s "$f" ]] && files+=("$f"); done
  if [[ ${#files[@]} -eq 0 ]]; then
    echo "  (no ctest results)"
    return 0
  fi
  python3 - "${files[@]}" <<'PY'
import re, sys, xml.etree.ElementTree as ET
n = 0
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        print(f"  {path}: unreadable ({e})")
        continue
    for tc in root.iter("testcase"):
        if tc.get("status") != "notrun" and tc.find("skipped") is None:
            continue
        n += 1
        out = tc.findtext("system-out") or ""
        # gtest: "[  SKIPPED ] Suite.Name (3 ms)"; shell tests: "SKIP: why".
        why = [m.group(1) for m in re.finditer(r"^\[  SKIPPED \] (\S+\.\S+)", out, re.M)]
        why += [m.group(0) for m in re.finditer(r"^SKIP: .*$", out, re.M)]
        print(f"  {path.rsplit('/', 1)[-1].rsplit('.', 1)[0]}: {tc.get('name')}")
        for w in dict.fromkeys(why):
            print(f"      {w}")
if n == 0:
    print("  none")
PY
}
