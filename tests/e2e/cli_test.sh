#!/usr/bin/env bash
# The `orrery` command as a user types it, on one machine:
#   1. orrery start --head --port 0 --num-cpus 2 --labels zone=a --dashboard-port 0
#   2. orrery start --address <head> --num-cpus 3 --resources '{"GPU": 2}'   (a second node)
#   3. orrery status: both nodes, GPU 0/2
#   4. orrery list nodes --json: two alive nodes with the resources and labels given
#   5. examples/hello_actors with ORRERY_ADDRESS=<head>: exits 0
#   6. orrery list actors: shows the example's actors (as typed, and with --redis-address)
#      and, once the driver has exited, every node's resources are free again
#   7. bad input (malformed --resources JSON, an unknown flag, an unknown table): a message
#      and a non-zero exit, and nothing started; a failed `orrery start --head` (port taken)
#      and a failed `orrery start --address` (wrong token) leave the cluster reachable:
#      orrery status, orrery list and a driver still work, session_latest has not moved
#   8. orrery stop: every head, node and redis-server of this test exits (pids from the
#      session files, checked with kill -0 against a deadline), and no process started
#      by this test remains (zygotes and workers included)
# Checks after step 5 do not stop the test: it runs to the end and then fails, listing them.
# Every `orrery` runs with ORRERY_TMPDIR set to a fresh directory, so the test never sees
# or stops another session on this host. A trap stops what the test started, even on
# failure.
# Usage: cli_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/e2e/session_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/session_lib.sh"
e2e_args "$@"
hello="$build_dir/examples/hello_actors"
require_built "$orrery_bin" "$hello"
require_tools redis-server python3

start_test_session cli

# 1. The head.
step "orrery start --head --port 0 --num-cpus 2 --labels zone=a --dashboard-port 0"
orrery start --head --port 0 --num-cpus 2 --labels zone=a --dashboard-port 0 | tee "$tmp/start_head.out"
head_address=$(sed -n 's/^Orrery head started at \([^ ]*\) .*/\1/p' "$tmp/start_head.out")
[[ "$head_address" =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "no head address in the output of orrery start --head"
grep -qF "orrery start --address $head_address" "$tmp/start_head.out" || fail "orrery start --head printed no join command"
grep -q "Logs: " "$tmp/start_head.out" || fail "orrery start --head printed no log directory"
grep -qE "Dashboard: +http://127\.0\.0\.1:[0-9]+$" "$tmp/start_head.out" || fail "orrery start --head printed no dashboard URL"
head_session=$(readlink -f "$sessions/session_latest")
[[ -f "$head_session/session.json" ]] || fail "no session.json in $head_session"
n_head_pids=$(session_pids | wc -l)
[[ "$n_head_pids" -eq 4 ]] || fail "expected 4 processes (redis-server, head, node, dashboard) in $head_session/session.json, found $n_head_pids"
echo "head at $head_address; session $head_session"

# 2. A second node on the same host.
step "orrery start --address $head_address --num-cpus 3 --resources '{\"GPU\": 2}'"
orrery start --address "$head_address" --num-cpus 3 --resources '{"GPU": 2}' | tee "$tmp/start_node.out"
grep -qF "joined the head at $head_address" "$tmp/start_node.out" || fail "orrery start --address did not report joining"

# 3. orrery status: both nodes, the second one's GPUs unused.
step "orrery status"
orrery status | tee "$tmp/status.out"
n_alive=$(grep -c ' ALIVE ' "$tmp/status.out" || true)
[[ "$n_alive" -eq 2 ]] || fail "orrery status shows $n_alive alive nodes, expected 2"
grep -qE 'CPU 0/2([,[:space:]]|$)' "$tmp/status.out" || fail "orrery status does not show the head node's CPU 0/2"
grep -qE 'CPU 0/3([,[:space:]]|$)' "$tmp/status.out" || fail "orrery status does not show the second node's CPU 0/3"
grep -qE 'GPU 0/2([,[:space:]]|$)' "$tmp/status.out" || fail "orrery status does not show GPU 0/2"

# 4. orrery list nodes --json.
step "orrery list nodes --json"
orrery list nodes --json >"$tmp/nodes.json"
python3 - "$tmp/nodes.json" <<'EOF'
import json, sys
nodes = json.load(open(sys.argv[1]))
alive = [n for n in nodes if n["alive"]]
assert len(alive) == 2, f"expected 2 alive nodes, got {len(alive)}: {nodes}"
by_cpu = {n["total"].get("CPU"): n for n in alive}
assert set(by_cpu) == {2, 3}, f"expected nodes with 2 and 3 CPUs, got {sorted(by_cpu)}"
assert by_cpu[2]["labels"].get("zone") == "a", f"the head's node lacks zone=a: {by_cpu[2]['labels']}"
assert by_cpu[3]["total"].get("GPU") == 2, f"the second node lacks GPU 2: {by_cpu[3]['total']}"
assert by_cpu[3]["available"].get("GPU") == 2, f"the second node's GPUs are in use: {by_cpu[3]['available']}"
assert "GPU" not in by_cpu[2]["total"], f"the head's node offers GPUs: {by_cpu[2]['total']}"
for n in alive:
    print(f"ok: {n['node_id'][:12]} {n['address']} total={n['total']} labels={n['labels']}")
EOF

# 5. A driver joins the cluster.
step "ORRERY_ADDRESS=$head_address examples/hello_actors"
rc=0
ORRERY_TMPDIR="$sessions" ORRERY_ADDRESS="$head_address" timeout --kill-after=10 120 "$hello" \
  >"$tmp/hello.out" 2>&1 || rc=$?
cat "$tmp/hello.out"
[[ $rc -eq 0 ]] || fail "hello_actors against the cluster exited $rc"
grep -q "hello_actors: all good" "$tmp/hello.out" || fail "hello_actors did not report success"

# 6. The driver's actors are in the cluster's state. `orrery list` finds the cluster from
# the latest session on this host, which is now the second node's.
step "orrery list actors"
orrery list actors | tee "$tmp/actors.out"
if ! grep -q "Counter" "$tmp/actors.out" || ! grep -q "greeter_count" "$tmp/actors.out"; then
  check_failed "orrery list actors (after orrery start --address) does not show hello_actors' actors (Counter, greeter_count)"
fi
redis_address=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["values"].get("redis_address", ""))' \
  "$head_session/session.json")
[[ -n "$redis_address" ]] || fail "no redis_address in $head_session/session.json"
step "orrery list actors --json --redis-address $redis_address"
orrery list actors --json --redis-address "$redis_address" >"$tmp/actors.json"
if ! python3 - "$tmp/actors.json" <<'EOF2'
import json, sys
actors = json.load(open(sys.argv[1]))
names = [a.get("name", "") for a in actors]
assert len(actors) >= 2, f"expected hello_actors' 2 actors, got {len(actors)}: {actors}"
assert "greeter_count" in names, f"no actor named greeter_count: {names}"
for a in actors:
    print(f"ok: {a.get('actor_id', '?')[:12]} {a.get('state')} {a.get('class')} {a.get('name', '')}")
EOF2
then
  check_failed "orrery list actors --json --redis-address $redis_address does not show hello_actors' actors"
fi

# 6b. The driver has exited: every resource it held (its task leases) is free again.
step "resources are released after the driver exits"
deadline=$((SECONDS + 15))
while true; do
  orrery list nodes --json >"$tmp/nodes_after.json"
  if used=$(python3 - "$tmp/nodes_after.json" <<'EOF2'
import json, sys
used = []
for n in json.load(open(sys.argv[1])):
    for k, t in n["total"].items():
        a = n["available"].get(k, 0)
        if a != t:
            used.append(f"{n['node_id'][:12]} {k} {t - a:g}/{t:g}")
print(", ".join(used))
sys.exit(1 if used else 0)
EOF2
  ); then
    echo "ok: every node's resources are free"
    break
  fi
  if ((SECONDS >= deadline)); then
    check_failed "15 s after hello_actors exited, resources are still in use: $used"
    ps -o pid,ppid,args --ppid "$(echo $(session_pids) | tr ' ' ',')" 2>/dev/null || true
    break
  fi
  sleep 0.5
done

# 7. Bad input: a clear message, a non-zero exit, and nothing started.
# Usage: expect_error "<what the message must contain>" <orrery arguments...>
expect_error() {
  local needle=$1 rc=0
  shift
  orrery "$@" >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
  echo "\$ orrery $* -> exit $rc: $(head -n 3 "$tmp/bad.err" | tr '\n' ' ')"
  [[ $rc -ne 0 ]] || fail "orrery $* exited 0"
  [[ $rc -lt 128 ]] || fail "orrery $* died of a signal (exit $rc)"
  grep -qiF -- "$needle" "$tmp/bad.err" || fail "orrery $*: the message does not mention '$needle'"
}
step "bad input"
n_sessions=$(find "$sessions" -maxdepth 1 -name 'session_*' -type d | wc -l)
expect_error "resources" start --head --resources '{bad'
expect_error "--bogus" start --bogus
expect_error "bogus" list bogus
[[ $(find "$sessions" -maxdepth 1 -name 'session_*' -type d | wc -l) -eq $n_sessions ]] ||
  fail "a rejected orrery start created a session"

step "orrery start --head again on the same port: it fails, and orrery status still finds the cluster"
before=$(find "$sessions" -maxdepth 1 -name 'session_*' -type d | sort)
expect_error "did not start" start --head --port "${head_address##*:}" --no-dashboard
# The message says why, from the end of the head's log: its port is taken.
grep -qF "Address already in use" "$tmp/bad.err" || fail "the failed start did not show the head's log: $(cat "$tmp/bad.err")"
orrery status >"$tmp/status_after_failed_start.out" 2>&1 ||
  fail "orrery status failed after a failed start: $(cat "$tmp/status_after_failed_start.out")"
grep -qF "Cluster at $head_address" "$tmp/status_after_failed_start.out" ||
  fail "orrery status does not show the running cluster after a failed start"
# The failed start stopped its own processes; its directory goes, so that the count below is
# the running cluster's.
comm -13 <(echo "$before") <(find "$sessions" -maxdepth 1 -name 'session_*' -type d | sort) | xargs -r rm -rf

step "orrery start --address with a wrong token: it fails, and leaves no session that later commands pick"
before=$(find "$sessions" -maxdepth 1 -name 'session_*' -type d | sort)
latest_before=$(readlink -f "$sessions/session_latest")
(umask 077 && python3 -c 'import secrets; print(secrets.token_hex(32))' >"$tmp/wrong_token")
expect_error "refused the cluster token" start --address "$head_address" --token-file "$tmp/wrong_token"
[[ $(readlink -f "$sessions/session_latest") == "$latest_before" ]] ||
  fail "the failed orrery start moved session_latest to $(readlink -f "$sessions/session_latest")"
for dir in $(comm -13 <(echo "$before") <(find "$sessions" -maxdepth 1 -name 'session_*' -type d | sort)); do
  [[ ! -e "$dir/token" ]] || fail "the failed orrery start left its token in $dir"
done
for cmd in status "list nodes"; do
  # shellcheck disable=SC2086
  orrery $cmd >"$tmp/after_wrong_token.out" 2>&1 ||
    fail "orrery $cmd failed after a failed start with a wrong token: $(cat "$tmp/after_wrong_token.out")"
done
rc=0
ORRERY_TMPDIR="$sessions" ORRERY_ADDRESS="$head_address" timeout --kill-after=10 120 "$hello" \
  >"$tmp/hello2.out" 2>&1 || rc=$?
[[ $rc -eq 0 ]] || fail "hello_actors exited $rc after a failed start with a wrong token: $(tail -n 5 "$tmp/hello2.out")"
echo "ok: orrery status, orrery list and a driver still reach $head_address"
comm -13 <(echo "$before") <(find "$sessions" -maxdepth 1 -name 'session_*' -type d | sort) | xargs -r rm -rf

# 8. orrery stop, and nothing of this test remains.
step "orrery stop"
mapfile -t pids < <(session_pids)
[[ ${#pids[@]} -eq 5 ]] || fail "expected 5 processes in the session files (redis-server, head, dashboard, 2 nodes), found ${#pids[@]}"
for pid in "${pids[@]}"; do alive "$pid" || fail "process $pid of the cluster died before orrery stop"; done
orrery stop | tee "$tmp/stop.out"
grep -q "stopped" "$tmp/stop.out" || fail "orrery stop reported nothing stopped"
if ! left=$(wait_gone 20 "${pids[@]}"); then
  ps -o pid,stat,args -p "${left// /,}" || true
  fail "still running 20 s after orrery stop: $left"
fi
echo "ok: ${pids[*]} exited"
if ! left=$(wait_gone 20 $(marked_pids)); then
  ps -o pid,stat,args -p "${left// /,}" || true
  fail "processes started by this test (zygotes or workers) still run after orrery stop: $left"
fi
echo "ok: no process started by this test remains"
rc=0
orrery stop >"$tmp/stop2.out" 2>&1 || rc=$?
[[ $rc -eq 0 ]] && grep -q "nothing to stop" "$tmp/stop2.out" || fail "a second orrery stop did not say 'nothing to stop'"

echo
if [[ ${#failures[@]} -gt 0 ]]; then
  echo "FAIL: ${#failures[@]} check(s) failed:" >&2
  printf '  - %s\n' "${failures[@]}" >&2
  exit 1
fi
echo "PASS: orrery CLI end to end"
