#!/usr/bin/env bash
# find_package(Orrery) from an installed tree:
#   1. cmake --install <build dir> --prefix <tmp>/prefix
#   2. checks that the Python module orrery_train was installed and imports, and that the
#      installed public headers include no internal or transport headers
#   3. configures and builds tests/e2e/consumer against <tmp>/prefix
#   4. runs the consumer program (real worker processes; non-zero exit on any mismatch)
# Usage: find_package_test.sh <build dir> <source dir>
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <build dir> <source dir>" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/orrery_e2e_find_package.XXXXXX")
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT

step() { printf '\n==> %s\n' "$*"; }

step "Installing $build_dir into $tmp/prefix"
cmake --install "$build_dir" --prefix "$tmp/prefix" >"$tmp/install.log" || {
  cat "$tmp/install.log"
  exit 1
}
tail -n 5 "$tmp/install.log"

config=$(find "$tmp/prefix" -name OrreryConfig.cmake -print -quit)
if [[ -z "$config" ]]; then
  echo "FAIL: no OrreryConfig.cmake was installed" >&2
  exit 1
fi
echo "package config: ${config#"$tmp/prefix/"}"
if [[ ! -f "$tmp/prefix/include/orrery/orrery.h" ]]; then
  echo "FAIL: include/orrery/orrery.h was not installed" >&2
  exit 1
fi

if [[ ! -f "$tmp/prefix/share/orrery/python/orrery_train/__init__.py" ]]; then
  echo "FAIL: share/orrery/python/orrery_train (the module an Entrypoint imports) was not installed" >&2
  exit 1
fi
PYTHONPATH="$tmp/prefix/share/orrery/python" python3 -c 'import orrery_train' ||
  { echo "FAIL: the installed orrery_train does not import" >&2; exit 1; }

step "Checking the installed public headers"
# docs/architecture.md "Layout": no ZeroMQ, hiredis, spdlog or boost type in a public
# header, and public headers never include private ones (<module>/src/...).
if grep -rnE '#[[:space:]]*include[[:space:]]*[<"](zmq|hiredis/|spdlog/|boost/|[a-z_]+/src/)' \
    "$tmp/prefix/include/orrery"; then
  echo "FAIL: an installed public header includes an internal or third-party transport header" >&2
  exit 1
fi
echo "ok: $(find "$tmp/prefix/include/orrery" -name '*.h' | wc -l) headers"

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

step "Configuring tests/e2e/consumer with CMAKE_PREFIX_PATH=$tmp/prefix"
cmake -S "$source_dir/tests/e2e/consumer" -B "$tmp/consumer" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$tmp/prefix"

step "Building the consumer"
cmake --build "$tmp/consumer" -j 2

step "Running the consumer"
# The consumer's workers re-run the consumer executable from the build directory.
export ORRERY_LOG_LEVEL="${ORRERY_LOG_LEVEL:-warn}"
timeout --kill-after=10 240 "$tmp/consumer/app"
echo "PASS: find_package(Orrery) consumer"
