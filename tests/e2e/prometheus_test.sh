#!/usr/bin/env bash
# Metrics against a real Prometheus (docs/metrics.md), on loopback:
#   1. orrery start --head (head + node) and a second node, each printing its metrics URL
#   2. tests/e2e/metrics_driver: 3 detached actors that stay alive, 5 calls to each, 5 tasks
#   3. orrery metrics targets --out F: the head and both nodes, as file_sd JSON
#   4. prometheus (scrape_interval 1s, file_sd on F, storage in the test's directory)
#   5. its HTTP API, waited on with a deadline, finds what the cluster itself reports:
#      orrery_nodes_alive = the alive nodes of `orrery status --json`, the ALIVE actors
#      likewise, the tasks the driver submitted, and the calls the nodes' own /metrics count;
#      then examples/train_linear runs and the run's latest loss is found as the run's record
#      (`orrery list runs --json`) has it
#   6. every query of the Grafana dashboard (deploy/grafana/orrery.json) is valid PromQL
# Exits 77 (reported as skipped) when prometheus is not installed. Everything it started is
# stopped on exit.
# Usage: prometheus_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/e2e/session_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/session_lib.sh"
e2e_args "$@"
driver="$build_dir/tests/e2e/metrics_driver"
train_linear="$build_dir/examples/train_linear"
# ORRERY_PROMETHEUS_BIN overrides where prometheus is looked for (a path that is not an
# executable shows the skip).
prometheus_bin=${ORRERY_PROMETHEUS_BIN-$(command -v prometheus || echo /usr/bin/prometheus)}
if [[ ! -x "$prometheus_bin" ]]; then
  echo "SKIP: prometheus is not installed (Debian: apt-get install prometheus)"
  exit 77
fi
require_built "$orrery_bin" "$driver" "$train_linear"
require_tools redis-server python3 curl

start_test_session prometheus
prom_pid=""
stop_prometheus() {
  local rc=$?
  set +e  # a failed test's status is kept, not acted on, while cleaning up
  if [[ -n "$prom_pid" ]] && alive "$prom_pid"; then
    kill -TERM "$prom_pid" 2>/dev/null
    wait_gone 10 "$prom_pid" >/dev/null || kill -KILL "$prom_pid" 2>/dev/null
  fi
  (exit "$rc")  # cleanup_test_session reads the test's status from $?
  cleanup_test_session
}
trap stop_prometheus EXIT

step "orrery start --head --port 0 --num-cpus 4 --no-dashboard"
orrery start --head --port 0 --num-cpus 4 --no-dashboard | tee "$tmp/start_head.out"
head_address=$(sed -nE 's/^Orrery head started at ([0-9.]+:[0-9]+).*/\1/p' "$tmp/start_head.out")
[[ -n "$head_address" ]] || fail "no head address in the output of orrery start --head"
grep -qE "Head metrics: +http://127\.0\.0\.1:[0-9]+/metrics" "$tmp/start_head.out" ||
  fail "orrery start --head printed no head metrics URL"
grep -qE "Node metrics: +http://127\.0\.0\.1:[0-9]+/metrics" "$tmp/start_head.out" ||
  fail "orrery start --head printed no node metrics URL"

step "orrery start --address $head_address --num-cpus 4"
orrery start --address "$head_address" --num-cpus 4 | tee "$tmp/start_node.out"
grep -qE "Node metrics: +http://127\.0\.0\.1:[0-9]+/metrics" "$tmp/start_node.out" ||
  fail "orrery start --address printed no node metrics URL"

step "metrics_driver 3 5 (detached actors that stay alive)"
ORRERY_TMPDIR="$sessions" ORRERY_ADDRESS="$head_address" timeout --kill-after=10 120 \
  "$driver" 3 5 >"$tmp/driver.out" 2>"$tmp/driver.err" || {
  cat "$tmp/driver.err"
  fail "metrics_driver failed"
}
cat "$tmp/driver.out"
submitted=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["submitted"])' "$tmp/driver.out")

step "orrery metrics targets --out targets.json"
orrery metrics targets --out "$tmp/targets.json"
cat "$tmp/targets.json"
python3 - "$tmp/targets.json" <<'EOF2' || fail "orrery metrics targets did not list the head and both nodes"
import json, sys
groups = json.load(open(sys.argv[1]))
roles = sorted(g["labels"]["role"] for g in groups)
assert roles == ["head", "node", "node"], roles
for g in groups:
    assert len(g["targets"]) == 1 and g["targets"][0].startswith("127.0.0.1:"), g
EOF2
orrery metrics targets >"$tmp/targets_stdout.json"
cmp -s "$tmp/targets.json" "$tmp/targets_stdout.json" || fail "orrery metrics targets printed other JSON than --out wrote"

cat >"$tmp/prometheus.yml" <<EOF2
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: orrery
    file_sd_configs:
      - files: ["$tmp/targets.json"]
        refresh_interval: 1s
EOF2

step "prometheus on a loopback port"
for attempt in 1 2 3 4 5; do
  prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$prometheus_bin" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/prometheus_data" \
    --web.listen-address="127.0.0.1:$prom_port" >"$tmp/prometheus.log" 2>&1 &
  prom_pid=$!
  deadline=$((SECONDS + 30))
  while alive "$prom_pid" && ! curl -fsS "http://127.0.0.1:$prom_port/-/ready" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "prometheus was not ready within 30 s; see $tmp/prometheus.log"
    sleep 0.2
  done
  alive "$prom_pid" && break
  echo "prometheus exited on port $prom_port (attempt $attempt); trying another port" >&2
  tail -n 5 "$tmp/prometheus.log" >&2
  prom_pid=""
done
[[ -n "$prom_pid" ]] || fail "prometheus did not start"

# The value of a PromQL query ("" while it has no result).
query() {
  curl -fsS -G "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" 2>/dev/null |
    python3 -c 'import json,sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")' 2>/dev/null || true
}
# Waits (at most 60 s) until query $1 gives the number $2 (compared as numbers).
expect_query() {
  local deadline=$((SECONDS + 60)) got=""
  while ((SECONDS < deadline)); do
    got=$(query "$1")
    if [[ -n "$got" ]] && python3 -c 'import sys; sys.exit(float(sys.argv[1]) != float(sys.argv[2]))' "$got" "$2"; then
      echo "ok: $1 = $got"
      return 0
    fi
    sleep 0.5
  done
  check_failed "prometheus: $1 = '${got}', expected $2"
}

orrery status --json >"$tmp/status.json"
read -r nodes_alive actors_alive < <(python3 -c 'import json,sys
s = json.load(open(sys.argv[1]))
print(sum(1 for n in s["nodes"] if n["alive"]), sum(1 for a in s["actors"] if a["state"] == "ALIVE"))' "$tmp/status.json")
[[ "$nodes_alive" -eq 2 ]] || fail "orrery status --json shows $nodes_alive alive nodes, expected 2"
[[ "$actors_alive" -eq 3 ]] || fail "orrery status --json shows $actors_alive alive actors, expected 3"

step "prometheus finds what the cluster reports"
expect_query 'count(up{job="orrery"} == 1)' 3
expect_query 'orrery_nodes_alive' "$nodes_alive"
expect_query 'orrery_actors{state="ALIVE"}' "$actors_alive"
expect_query 'orrery_tasks_submitted_total' "$submitted"
expect_query 'sum(orrery_worker_processes{kind="actor"})' 3
expect_query 'count(orrery_node_resources_total{resource="CPU"} == 4)' 2

# The calls counted by the nodes themselves (their /metrics), once they stopped changing.
node_calls() {
  python3 - "$tmp/targets.json" <<'EOF2'
import json, sys, urllib.request
total = 0
for g in json.load(open(sys.argv[1])):
    if g["labels"]["role"] != "node":
        continue
    text = urllib.request.urlopen("http://%s/metrics" % g["targets"][0], timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith("orrery_call_latency_seconds_count{"):
            total += int(float(line.split()[-1]))
print(total)
EOF2
}
deadline=$((SECONDS + 30))
calls=$(node_calls)
until [[ "$calls" -ge 15 ]]; do
  ((SECONDS < deadline)) || fail "the nodes' /metrics count $calls calls, expected at least the 15 actor calls"
  sleep 0.5
  calls=$(node_calls)
done
echo "the nodes' own /metrics count $calls calls"
expect_query 'sum(orrery_call_latency_seconds_count)' "$calls"
expect_query 'sum(orrery_tasks_finished_total)' "$calls"
expect_query 'count(orrery_redis_write_latency_seconds_count > 0)' 1

step "examples/train_linear: its run's latest loss, as orrery list runs --json shows it"
# Its checkpoints go under $TMPDIR: the test's directory, removed at the end.
TMPDIR="$tmp" ORRERY_TMPDIR="$sessions" ORRERY_ADDRESS="$head_address" timeout --kill-after=10 180 \
  "$train_linear" >"$tmp/train.out" 2>&1 || {
  tail -n 20 "$tmp/train.out"
  fail "train_linear failed"
}
tail -n 2 "$tmp/train.out"
orrery list runs --json >"$tmp/runs.json"
loss=$(python3 -c 'import json,sys
runs = [r for r in json.load(open(sys.argv[1])) if r.get("name") == "train_linear"]
print(repr(float(runs[0]["latest_metrics"]["loss"])) if runs else "")' "$tmp/runs.json")
[[ -n "$loss" ]] || fail "orrery list runs --json shows no train_linear run with a loss"
expect_query 'orrery_train_metric{name="train_linear",metric="loss"}' "$loss"

step "every query of deploy/grafana/orrery.json is valid PromQL to this Prometheus"
if ! python3 - "$(dirname "${BASH_SOURCE[0]}")/../../deploy/grafana/orrery.json" "$prom_port" <<'EOF2'
import json, sys, urllib.parse, urllib.request
dashboard, port = json.load(open(sys.argv[1])), sys.argv[2]
exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
assert exprs, "the dashboard has no queries"
for e in exprs:
    url = "http://127.0.0.1:%s/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": e}))
    r = json.load(urllib.request.urlopen(url, timeout=10))
    assert r["status"] == "success", (e, r)
    print("ok:", e)
EOF2
then
  check_failed "a query of the Grafana dashboard is not valid PromQL"
fi

if [[ ${#failures[@]} -gt 0 ]]; then
  tail -n 20 "$tmp/prometheus.log"
  fail "${#failures[@]} check(s) failed"
fi
echo "PASS"
