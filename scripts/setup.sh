#!/usr/bin/env bash
# The first command on a fresh Debian 12 machine: installs Orrery's dependencies (Debian
# packages only), builds what a user runs into build/ (the libraries, the `orrery` command
# and the examples: the target orrery_product) and runs the hello_actors example. The tests,
# their packages, benchmarks and fuzzers come with the second command, scripts/test.sh.
# Re-running it is fast: installed packages and an up-to-date build are skipped.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

orrery_install_deps --product
orrery_build orrery_product

dir="${ORRERY_BUILD_DIR:-build}"
orrery_log "Running $dir/examples/hello_actors"
"$dir/examples/hello_actors"
orrery_log "Done. Run the test suite with: bash scripts/test.sh"
