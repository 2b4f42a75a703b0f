#!/usr/bin/env bash
# Object store usage and `orrery list objects` as a user sees them, on one machine:
#   1. orrery start --head --port 0 --num-cpus 1 --no-dashboard, and a second node
#   2. orrery status: an `objects: ...` line under each alive node, and the four
#      object_store_* fields (whole numbers, used <= capacity) in `orrery status --json`
#   3. orrery list objects: exits 0 within the 5 s deadline (plus start-up), one line per
#      alive node (its 8-char id) saying either its store's usage or "did not answer within
#      5 s", and "0 objects listed from N of 2 nodes": nothing was put
#   4. orrery list objects --json: the two alive nodes, each either answered with its usage
#      and no objects, or not answered with that error
#   5. orrery list tasks with no job running: (none); an unknown kind: a message naming the
#      supported kinds, exit 2
# A node that knows kListObjects answers; one that does not is reported, not waited for:
# the test accepts both, per node.
# Usage: list_objects_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/e2e/session_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/session_lib.sh"
e2e_args "$@"
require_built "$orrery_bin"
require_tools redis-server python3

start_test_session list_objects

step "orrery start --head --port 0 --num-cpus 1 --no-dashboard, and a second node"
orrery start --head --port 0 --num-cpus 1 --no-dashboard | tee "$tmp/start_head.out"
head_address=$(sed -n 's/^Orrery head started at \([^ ]*\) .*/\1/p' "$tmp/start_head.out")
[[ "$head_address" =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "no head address in the output of orrery start --head"
orrery start --address "$head_address" --num-cpus 2 >/dev/null

step "orrery status"
orrery status | tee "$tmp/status.out"
n_alive=$(grep -c ' ALIVE ' "$tmp/status.out" || true)
[[ "$n_alive" -eq 2 ]] || fail "orrery status shows $n_alive alive nodes, expected 2"
n_lines=$(grep -cE '^      objects: (no object store|[0-9.]+ [KMGTPE]?i?B / [0-9.]+ [KMGTPE]?i?B \([0-9]+ objects?, [0-9.]+ [KMGTPE]?i?B spilled\))$' "$tmp/status.out" || true)
[[ "$n_lines" -eq 2 ]] || fail "orrery status shows $n_lines object store lines, expected one per alive node (2)"
orrery status --json >"$tmp/status.json"
python3 - "$tmp/status.json" <<'PY'
import json, sys
nodes = json.load(open(sys.argv[1]))["nodes"]
fields = ["object_store_used_bytes", "object_store_capacity_bytes",
          "object_store_spilled_bytes", "object_store_num_objects"]
for n in nodes:
    for f in fields:
        assert isinstance(n.get(f), int) and n[f] >= 0, f"{f} of {n['node_id']}: {n.get(f)!r}"
    assert n["object_store_used_bytes"] <= n["object_store_capacity_bytes"], n
    print("ok:", n["node_id"][:12], {f: n[f] for f in fields})
PY

step "orrery list objects"
mapfile -t alive_ids < <(python3 -c '
import json, sys
for n in json.load(open(sys.argv[1]))["nodes"]:
    if n["alive"]: print(n["node_id"])' "$tmp/status.json")
rc=0
start=$SECONDS
ORRERY_TMPDIR="$sessions" timeout --kill-after=5 60 "$orrery_bin" list objects >"$tmp/objects.out" 2>"$tmp/objects.err" || rc=$?
cat "$tmp/objects.out" "$tmp/objects.err"
[[ $rc -eq 0 ]] || fail "orrery list objects exited $rc"
((SECONDS - start < 30)) || fail "orrery list objects took $((SECONDS - start)) s: did it wait past its deadline?"
for id in "${alive_ids[@]}"; do
  grep -qE "^${id:0:8}  tcp://[^ ]+  ([0-9.]+ [KMGTPE]?i?B / |no object store$|did not answer within 5 s$)" "$tmp/objects.out" ||
    fail "orrery list objects has no line for node ${id:0:8} with its usage or 'did not answer'"
done
grep -qF "(no objects)" "$tmp/objects.out" || fail "orrery list objects lists objects, but none were put"
grep -qE "^0 objects listed from [0-2] of 2 nodes" "$tmp/objects.out" || fail "orrery list objects has no summary line"

step "orrery list objects --json"
ORRERY_TMPDIR="$sessions" timeout --kill-after=5 60 "$orrery_bin" list objects --json >"$tmp/objects.json"
python3 - "$tmp/objects.json" "${alive_ids[@]}" <<'PY'
import json, sys
nodes = json.load(open(sys.argv[1]))["nodes"]
assert sorted(n["node_id"] for n in nodes) == sorted(sys.argv[2:]), nodes
for n in nodes:
    assert n["objects"] == [], n
    if n["answered"]:
        assert set(n["usage"]) == {"capacity_bytes", "used_bytes", "spilled_bytes", "num_objects"}, n
        assert n["usage"]["num_objects"] == 0, n
        print("ok:", n["node_id"][:8], "answered", n["usage"])
    else:
        assert n["error"] == "did not answer within 5 s", n
        print("ok:", n["node_id"][:8], "did not answer (a node without kListObjects)")
PY

step "orrery list tasks (no job runs) and an unknown kind"
orrery list tasks | tee "$tmp/tasks.out"
grep -qx "(none)" "$tmp/tasks.out" || fail "orrery list tasks without a running job lists something"
rc=0
orrery list shoes >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
cat "$tmp/bad.err"
[[ $rc -eq 2 ]] || fail "orrery list shoes exited $rc, expected 2"
grep -qF "supported: nodes, actors, placement-groups, jobs, runs, objects, workers, tasks" "$tmp/bad.err" ||
  fail "orrery list shoes does not name the supported kinds"

step "orrery stop"
orrery stop
echo "PASS"
