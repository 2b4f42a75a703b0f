#!/usr/bin/env bash
# The second command: builds (installing the dependencies first when needed, so it works
# on a fresh machine by itself) and runs every test suite (unit, integration, e2e) with ctest.
# Extra arguments are passed to ctest, e.g. `bash scripts/test.sh -L unit`.
# Afterwards it fails if a process the tests started (a daemon, a worker, redis-server) is
# still running, and lists the tests ctest skipped.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

orrery_install_deps
orrery_build

dir="${ORRERY_BUILD_DIR:-build}"
# Marks every process the tests start (.ci/run sets it for all of its stages).
export ORRERY_CI_RUN_ID="${ORRERY_CI_RUN_ID:-test-$$-$RANDOM$RANDOM}"
junit="$dir/Testing/orrery-junit.xml"
args=("$@")
# With no arguments, every suite but the chaos test (label chaos: minutes of killing a
# cluster's processes), which runs on its own: `bash scripts/test.sh -L chaos`.
if [ "$#" -eq 0 ]; then args=(-LE chaos); fi
# ctest takes one --output-junit; keep the caller's when given.
if [[ " $* " != *" --output-junit "* ]]; then
  # The skipped list below reads gtest's summary at the end of each output.
  args+=(--output-junit "$PWD/$junit" --test-output-size-passed 262144 --test-output-truncation middle)
fi
orrery_log "Running the tests in $dir/"
rc=0
ctest --test-dir "$dir" --output-on-failure -j "${ORRERY_JOBS:-2}" --timeout 300 "${args[@]}" || rc=$?
orrery_check_no_leftovers "$ORRERY_CI_RUN_ID" || rc=1
if [[ " $* " != *" --output-junit "* ]]; then
  orrery_log "Skipped tests:"
  orrery_list_skipped "$junit"
fi
exit "$rc"
