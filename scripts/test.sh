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
ctest --test-dir "$dir" --output-on-failure -j "${ORRERY_JOBS:-2}" --timeout 300 "$@"
