#!/usr/bin/env bash
# The second command: builds (installing the dependencies first when needed, so it works
# on a fresh machine by itself) and runs every test suite (unit, integration, e2e) with ctest.
# Extra arguments are passed to ctest, e.g. `bash scripts/test.sh -L unit`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

orrery_install_deps
orrery_build

dir="${ORRERY_BUILD_DIR:-build}"
orrery_log "Running the tests in $dir/"
# With no arguments, every suite but the chaos test (label chaos: minutes of killing a
# cluster's processes), which runs on its own: `bash scripts/test.sh -L chaos`.
if [ "$#" -eq 0 ]; then set -- -LE chaos; fi
ctest --test-dir "$dir" --output-on-failure -j "${ORRERY_JOBS:-2}" --timeout 300 "$@"
