#!/usr/bin/env bash
# A dead head restarted on a host whose node still runs:
#   1. orrery start --head --port 0 --num-cpus 2 --no-dashboard   (Redis, head, node; P: its port)
#   2. orrery start --address <head> --num-cpus 3                  (a second node here)
#   3. the head is killed (SIGKILL); Redis and both nodes run on
#   4. orrery start --head --port P --redis-address <that Redis> --no-dashboard
#   5. no third node is started: two node daemons run, and `orrery list nodes --json`
#      shows two alive nodes with 5 CPUs in all (no host counted twice)
# Usage: head_restart_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/e2e/session_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/session_lib.sh"
e2e_args "$@"
require_built "$orrery_bin"
require_tools redis-server python3

start_test_session head_restart

# The live processes of this test's sessions whose command line is `orrery <role> ...`.
pids_of() {
  local pid
  for pid in $(session_pids); do
    alive "$pid" || continue
    if [[ "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" == "$orrery_bin $1 "* ]]; then echo "$pid"; fi
  done
}

step "orrery start --head --port 0 --num-cpus 2 --no-dashboard"
orrery start --head --port 0 --num-cpus 2 --no-dashboard | tee "$tmp/start1.out"
head_address=$(sed -n 's/^Orrery head started at \([^ ]*\) (Redis at .*/\1/p' "$tmp/start1.out")
[[ "$head_address" =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "no head address in the output of orrery start --head"
# The port the head bound: it starts again on the same one.
port=${head_address##*:}
redis_address=$(sed -n 's/^Orrery head started at [^ ]* (Redis at \([^)]*\)).*/\1/p' "$tmp/start1.out")
[[ -n "$redis_address" ]] || fail "no Redis address in the output of orrery start --head"

step "orrery start --address $head_address --num-cpus 3"
orrery start --address "$head_address" --num-cpus 3 >/dev/null

step "kill -9 the head"
mapfile -t heads < <(pids_of head)
[[ ${#heads[@]} -eq 1 ]] || fail "expected one head process, found ${#heads[@]}"
kill -KILL "${heads[0]}"
wait_gone 10 "${heads[0]}" >/dev/null || fail "the head did not die"

step "orrery start --head --port $port --redis-address $redis_address --no-dashboard"
orrery start --head --port "$port" --redis-address "$redis_address" --no-dashboard | tee "$tmp/start2.out"

step "two node daemons, two alive nodes, 5 CPUs"
mapfile -t nodes < <(pids_of node)
[[ ${#nodes[@]} -eq 2 ]] || fail "expected 2 node daemons after the head restart, found ${#nodes[@]}"
orrery list nodes --json >"$tmp/nodes.json"
python3 - "$tmp/nodes.json" <<'PY'
import json, sys
nodes = json.load(open(sys.argv[1]))
alive = [n for n in nodes if n["alive"]]
assert len(alive) == 2, f"expected 2 alive nodes, got {len(alive)}: {nodes}"
cpus = sum(n["total"].get("CPU", 0) for n in alive)
assert cpus == 5, f"expected 5 CPUs in all, got {cpus}: {nodes}"
PY
echo "PASS"
