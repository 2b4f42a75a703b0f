#!/usr/bin/env bash
# --advertise-address apart from --bind (docs/cli.md), as a pod uses it: every daemon binds
# 0.0.0.0 and publishes another address. Only loopback addresses are used (127.0.0.0/8).
#   1. orrery start --head --bind 0.0.0.0 --advertise-address 127.0.0.2 --num-cpus 0
#      prints the head at 127.0.0.2:P
#   2. orrery start --address 127.0.0.2:P --bind 0.0.0.0 --advertise-address 127.0.0.3
#      --num-cpus 2 (the only node with CPUs)
#   3. orrery list nodes --json: the nodes are at tcp://127.0.0.2:* and tcp://127.0.0.3:*;
#      the node's metrics and its object data server (its log) are at 127.0.0.3
#   4. a driver (metrics_driver) makes a detached actor and calls it: the actor's record
#      names its worker at its node's advertised address, and the worker's environment
#      holds ORRERY_NODE_IP=0.0.0.0 and ORRERY_ADVERTISE_ADDRESS=<that address>
#   5. hello_actors runs its tasks (on the 127.0.0.3 node: the other has no CPU)
#   6. bad values (0.0.0.0, IPv6, 300.1.1.1, a name with a space) are refused before
#      anything starts, by `orrery start`, `orrery node` and ORRERY_ADVERTISE_ADDRESS
# Usage: advertise_address_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/e2e/session_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/session_lib.sh"
e2e_args "$@"
hello="$build_dir/examples/hello_actors"
driver="$build_dir/tests/e2e/metrics_driver"
require_built "$orrery_bin" "$hello" "$driver"
require_tools redis-server python3

start_test_session advertise_address

step "orrery start --head --port 0 --bind 0.0.0.0 --advertise-address 127.0.0.2 --num-cpus 0"
orrery start --head --port 0 --bind 0.0.0.0 --advertise-address 127.0.0.2 --num-cpus 0 \
  --no-dashboard | tee "$tmp/head.out"
head_address=$(sed -n 's/^Orrery head started at \([^ ]*\) (Redis at .*/\1/p' "$tmp/head.out")
[[ "$head_address" =~ ^127\.0\.0\.2:[0-9]+$ ]] ||
  fail "the head is not advertised at 127.0.0.2 (got '$head_address')"
grep -q 'Join another node:   orrery start --address 127.0.0.2:' "$tmp/head.out" ||
  fail "the join command does not name 127.0.0.2"

step "orrery start --address $head_address --bind 0.0.0.0 --advertise-address 127.0.0.3 --num-cpus 2"
orrery start --address "$head_address" --bind 0.0.0.0 --advertise-address 127.0.0.3 \
  --num-cpus 2 | tee "$tmp/node.out"
grep -q '^  Node metrics:        http://127.0.0.3:[0-9]*/metrics' "$tmp/node.out" ||
  fail "the node's metrics are not advertised at 127.0.0.3"

step "the nodes are registered at their advertised addresses"
orrery list nodes --json >"$tmp/nodes.json"
python3 - "$tmp/nodes.json" <<'PY'
import json, re, sys
nodes = [n for n in json.load(open(sys.argv[1])) if n["alive"]]
hosts = sorted(re.match(r"tcp://([^:]+):\d+$", n["address"]).group(1) for n in nodes)
assert hosts == ["127.0.0.2", "127.0.0.3"], f"node addresses {hosts}: {nodes}"
print("nodes at", ", ".join(n["address"] for n in nodes))
PY
node_log=$(grep -l 'data server 127.0.0.3:' "$sessions"/session_[0-9]*/logs/node.log | head -n 1 || true)
[[ -n "$node_log" ]] || fail "no node log names its object data server at 127.0.0.3"
grep -h -o 'data server 127.0.0.3:[0-9]*' "$node_log"

step "a detached actor is called from a driver; its worker advertises its node's address"
ORRERY_TMPDIR="$sessions" ORRERY_ADDRESS="$head_address" "$driver" 1 3 | tee "$tmp/driver.out"
grep -q '"calls": 6' "$tmp/driver.out" || fail "the driver's calls did not all finish"
orrery list actors --json >"$tmp/actors.json"
read -r worker_pid worker_host < <(python3 - "$tmp/actors.json" "$tmp/nodes.json" <<'PY'
import json, sys
alive = [a for a in json.load(open(sys.argv[1])) if a["state"] == "ALIVE"]
assert len(alive) == 1, f"expected one alive actor: {alive}"
a = alive[0]
nodes = {n["node_id"]: n["address"] for n in json.load(open(sys.argv[2]))}
node_host = nodes[a["node_id"]][len("tcp://"):].rsplit(":", 1)[0]
host = a["address"][len("tcp://"):].rsplit(":", 1)[0]
assert host == node_host and host in ("127.0.0.2", "127.0.0.3"), \
    f"the actor's worker is at {a['address']}, its node at {nodes[a['node_id']]}"
print(a["pid"], host)
PY
)
env_of_worker=$(tr '\0' '\n' <"/proc/$worker_pid/environ")
grep -qx "ORRERY_ADVERTISE_ADDRESS=$worker_host" <<<"$env_of_worker" ||
  fail "the worker was not given ORRERY_ADVERTISE_ADDRESS=$worker_host"
grep -qx 'ORRERY_NODE_IP=0.0.0.0' <<<"$env_of_worker" ||
  fail "the worker was not given ORRERY_NODE_IP=0.0.0.0 (it binds where its node does)"
echo "the actor's worker (pid $worker_pid) binds 0.0.0.0 and advertises $worker_host"

step "hello_actors against the head at $head_address"
ORRERY_TMPDIR="$sessions" ORRERY_ADDRESS="$head_address" "$hello" | tee "$tmp/hello.out"
grep -q 'hello_actors: all good' "$tmp/hello.out" || fail "hello_actors did not pass"

step "bad --advertise-address values are refused before anything starts"
sessions_before=$(ls -d "$sessions"/session_[0-9]* | wc -l)
expect_refused() {
  local what=$1 pattern=$2 rc=0
  shift 2
  "$@" >"$tmp/bad.out" 2>&1 || rc=$?
  if [[ $rc -eq 0 ]]; then
    check_failed "$what was accepted"
  elif ! grep -q -- "$pattern" "$tmp/bad.out"; then
    check_failed "$what: the message does not say '$pattern': $(cat "$tmp/bad.out")"
  else
    echo "refused ($what): $(head -n 1 "$tmp/bad.out")"
  fi
}
expect_refused "start 0.0.0.0" "binds every address" \
  orrery start --address "$head_address" --bind 0.0.0.0 --advertise-address 0.0.0.0
expect_refused "start ::1" "IPv6" orrery start --address "$head_address" --advertise-address ::1
expect_refused "node 300.1.1.1" "not a valid IPv4" \
  orrery node --address "$head_address" --advertise-address 300.1.1.1
expect_refused "head with a space" "neither an IPv4 address nor a host name" \
  orrery head --port 0 --advertise-address 'bad host'
expect_refused "ORRERY_ADVERTISE_ADDRESS=bad_name" "ORRERY_ADVERTISE_ADDRESS" \
  env ORRERY_TMPDIR="$sessions" ORRERY_ADDRESS="$head_address" \
  ORRERY_ADVERTISE_ADDRESS=bad_name "$hello"
sessions_after=$(ls -d "$sessions"/session_[0-9]* | wc -l)
[[ "$sessions_after" -eq "$sessions_before" ]] ||
  check_failed "a refused command left a session behind ($sessions_before -> $sessions_after)"

if [[ ${#failures[@]} -gt 0 ]]; then
  echo "FAIL: ${#failures[@]} check(s) failed" >&2
  exit 1
fi
echo "PASS"
