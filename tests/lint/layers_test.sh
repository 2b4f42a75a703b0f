#!/usr/bin/env bash
# scripts/lint.sh's `layers` check (docs/testing.md "Lint"):
#   1. on a small planted tree (a git repository in a temporary directory, with a copy of
#      scripts/lint.sh), a module that includes another module's src/, includes a module
#      above it (by its directory, or by a public header orrery/... that module's include/
#      holds, with "" or <>), or links one in its CMakeLists.txt fails the check, each with a
#      line that names the file, the line and the rule; what the layering allows (a module's
#      own src/, a lower module's internal/ and public headers, cli on anything, bench/ and
#      tests/ on anything) is not reported;
#   2. the same tree with those includes and links taken out passes;
#   3. the real tree passes.
# Usage: layers_test.sh <source dir>
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 <source dir>" >&2
  exit 2
fi
source_dir=$(cd "$1" && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/orrery_layers_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# put FILE LINE...: writes the lines to $tmp/tree/FILE.
put() {
  local file=$tmp/tree/$1
  shift
  mkdir -p "$(dirname "$file")"
  printf '%s\n' "$@" >"$file"
}

mkdir -p "$tmp/tree/scripts"
cp "$source_dir/scripts/lint.sh" "$tmp/tree/scripts/lint.sh"
put core/CMakeLists.txt 'orrery_module(core SOURCES src/c.cc DEPS Threads::Threads)'
put core/include/orrery/status.h '#pragma once'
put core/internal/log.h '#pragma once' '#include "orrery/status.h"'
put core/src/c.cc '#include "core/internal/log.h"' '#include <orrery/orrery.h>'
put scheduler/CMakeLists.txt 'orrery_module(scheduler SOURCES src/s.cc DEPS Orrery::core)'
put scheduler/include/orrery/scheduler/policy.h '#pragma once' '#include "orrery/status.h"'
put scheduler/src/s.cc '#include "scheduler/src/s.h"' '#include "core/internal/log.h"'
put objects/CMakeLists.txt 'orrery_module(objects SOURCES src/o.cc DEPS Orrery::core)'
put objects/src/o.cc '#include "core/internal/log.h"' '#include "node/internal/node.h"'
put node/CMakeLists.txt 'orrery_module(node SOURCES src/n.cc DEPS Orrery::core Orrery::objects)'
put node/internal/node.h '#pragma once' '#include "node/src/parts.h"'
put node/src/parts.h '#pragma once'
put actors/CMakeLists.txt 'orrery_module(actors SOURCES src/a.cc DEPS Orrery::core Orrery::node)'
put actors/include/orrery/orrery.h '#pragma once' '#include "orrery/scheduler/policy.h"'
put actors/src/a.cc '#include "node/internal/node.h"' '#include "node/src/parts.h"'
put train/CMakeLists.txt 'orrery_module(train SOURCES src/t.cc DEPS Orrery::orrery)'
put train/src/t.cc '#include "orrery/orrery.h"' '#include "core/internal/log.h"'
put dashboard/CMakeLists.txt 'orrery_module(dashboard SOURCES src/d.cc DEPS Orrery::core)'
put dashboard/src/d.cc '#include "orrery/status.h"' '  #  include "orrery/scheduler/policy.h"'
put autoscaler/CMakeLists.txt 'add_library(orrery_autoscaler STATIC src/p.cc)' \
  'target_link_libraries(orrery_autoscaler PUBLIC Orrery::core Orrery::scheduler)'
put autoscaler/src/p.cc '#include "core/internal/log.h"'
put cli/CMakeLists.txt 'target_link_libraries(orrery_cli PRIVATE Orrery::orrery orrery_autoscaler)'
put cli/src/main.cc '#include "node/internal/node.h"' '#include "orrery/orrery.h"'
put bench/b.cc '#include "node/src/parts.h"' '#include "actors/src/a.h"'
put tests/t.cc '#include "scheduler/src/s.h"'
git -C "$tmp/tree" init -q
git -C "$tmp/tree" add -A

echo "== the planted tree"
rc=0
bash "$tmp/tree/scripts/lint.sh" layers >"$tmp/out" 2>&1 || rc=$?
cat "$tmp/out"
[[ $rc -eq 1 ]] || fail "lint.sh layers exited $rc on the planted tree, not 1"
expect() {
  grep -qF -- "$1" "$tmp/out" || fail "no line with: $1"
}
expect "actors/src/a.cc:2: includes node/src/parts.h: node/src/ is private to module node"
expect "objects/src/o.cc:2: includes node/internal/node.h: module objects must not depend on module node (objects may use: core scheduler)"
expect "core/src/c.cc:2: includes orrery/orrery.h: module core must not depend on module actors (core may use: no other module)"
expect "dashboard/src/d.cc:2: includes orrery/scheduler/policy.h: module dashboard must not depend on module scheduler (dashboard may use: core)"
expect "autoscaler/CMakeLists.txt:2: links Orrery::scheduler: module autoscaler must not depend on module scheduler (autoscaler may use: core)"
expect "FAIL: 5 include(s) or link(s) against the layering"
# Reported lines start with two spaces and the file.
for allowed in scheduler/src/s.cc: node/internal/node.h: actors/include/ train/ cli/ bench/ \
  tests/ actors/src/a.cc:1: actors/CMakeLists.txt node/CMakeLists.txt; do
  if grep -qF -- "  $allowed" <(grep -E '^  [a-z]' "$tmp/out" | cut -c1-$((${#allowed} + 2))); then
    fail "reported, though the layering allows it: $(grep -F -- "  $allowed" "$tmp/out" | head -n 1)"
  fi
done

echo "== the planted tree without the violations"
put core/src/c.cc '#include "core/internal/log.h"'
put objects/src/o.cc '#include "core/internal/log.h"'
put actors/src/a.cc '#include "node/internal/node.h"'
put dashboard/src/d.cc '#include "orrery/status.h"'
put autoscaler/CMakeLists.txt 'add_library(orrery_autoscaler STATIC src/p.cc)' \
  'target_link_libraries(orrery_autoscaler PUBLIC Orrery::core)'
git -C "$tmp/tree" add -A
bash "$tmp/tree/scripts/lint.sh" layers || fail "lint.sh layers failed on the fixed tree"

echo "== the real tree"
bash "$source_dir/scripts/lint.sh" layers || fail "lint.sh layers failed on $source_dir"

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "PASS"
