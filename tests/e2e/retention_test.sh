#!/usr/bin/env bash
# Retention (docs/redis-schema.md "Retention"), with real daemons and redis-server:
#   1. orrery start --head --port 0 --num-cpus 2 --no-dashboard --history-ttl 1h
#      and a second node (orrery start --address), which is then stopped (SIGTERM) and dead
#   2. tests/e2e/retention_driver: a running job with the live actor "keeper" and the
#      killed actor "doomed"; examples/hello_actors: an ended job and two dead actors
#   3. every ended record has an end_time, and nothing expires within the hour
#   4. the head is killed (SIGKILL) and started again on the same Redis with
#      --history-ttl 2s: the restored ended records (actors, the job, the dead node)
#      disappear from Redis and from `orrery list`, while the live actor, its running job
#      and the alive node stay
#   5. the driver stops: its job and "keeper" end and disappear too
# Every wait is on a condition with a deadline.
# Usage: retention_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/e2e/session_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/session_lib.sh"
e2e_args "$@"
hello="$build_dir/examples/hello_actors"
driver="$build_dir/tests/e2e/e2e_retention_driver"
require_built "$orrery_bin" "$hello" "$driver"
require_tools redis-server redis-cli python3

start_test_session retention

# The live processes of this test's sessions whose command line is `orrery <role> ...`.
pids_of() {
  local pid
  for pid in $(session_pids); do
    alive "$pid" || continue
    if [[ "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" == "$orrery_bin $1 "* ]]; then echo "$pid"; fi
  done
}

step "orrery start --head --port 0 --num-cpus 2 --no-dashboard --history-ttl 1h"
orrery start --head --port 0 --num-cpus 2 --no-dashboard --history-ttl 1h | tee "$tmp/start1.out"
head_address=$(sed -n 's/^Orrery head started at \([^ ]*\) (Redis at .*/\1/p' "$tmp/start1.out")
[[ "$head_address" =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "no head address in the output of orrery start --head"
port=${head_address##*:}
redis_address=$(sed -n 's/^Orrery head started at [^ ]* (Redis at \([^)]*\)).*/\1/p' "$tmp/start1.out")
[[ -n "$redis_address" ]] || fail "no Redis address in the output of orrery start --head"
head_session=$(readlink -f "$sessions/session_latest")
redis_password_file="$head_session/redis_password"
[[ -f "$redis_password_file" ]] || fail "no $redis_password_file"
mapfile -t first_node < <(pids_of node)
[[ ${#first_node[@]} -eq 1 ]] || fail "expected one node daemon, found ${#first_node[@]}"

# The records of one table, as `orrery list` prints them from Redis.
list() { orrery list "$1" --json --address "$head_address" --redis-address "$redis_address" --redis-password-file "$redis_password_file"; }
# HEXISTS of a record in Redis itself (1 or 0).
in_redis() {
  REDISCLI_AUTH=$(cat "$redis_password_file") redis-cli -h "${redis_address%:*}" -p "${redis_address##*:}" \
    --no-auth-warning HEXISTS "orrery:default:$1" "$2"
}

step "a second node, stopped: dead"
orrery start --address "$head_address" --num-cpus 1 >/dev/null
mapfile -t nodes < <(pids_of node)
second=""
for pid in "${nodes[@]}"; do [[ "$pid" != "${first_node[0]}" ]] && second=$pid; done
[[ -n "$second" ]] || fail "the second node daemon is not running"
kill -TERM "$second"
wait_gone 15 "$second" >/dev/null || fail "the second node did not stop"
# Dead at once when its goodbye arrives, else after the head's health check (about 5 s).
one_dead() {
  orrery list nodes --json --address "$head_address" |
    python3 -c 'import json,sys; sys.exit(0 if [n["alive"] for n in json.load(sys.stdin)].count(False) == 1 else 1)'
}
wait_for 30 one_dead || fail "the head did not mark the stopped node dead"

step "the driver: a running job, actor keeper alive, actor doomed killed"
stop_file="$tmp/stop_driver"
ORRERY_TMPDIR="$sessions" ORRERY_ADDRESS="$head_address" "$driver" "$stop_file" >"$tmp/driver.out" 2>&1 &
driver_pid=$!
wait_for 60 grep -q '^ready 2$' "$tmp/driver.out" || fail "the driver did not get ready: $(tail -5 "$tmp/driver.out")"

step "examples/hello_actors: an ended job, two dead actors"
ORRERY_TMPDIR="$sessions" ORRERY_ADDRESS="$head_address" timeout --kill-after=10 120 "$hello" \
  >"$tmp/hello.out" 2>&1 || fail "hello_actors exited non-zero: $(tail -5 "$tmp/hello.out")"

# Prints the ids of the ended records that must expire and the live ones that must stay,
# as "table id expect" lines (expect: gone or kept), from Redis's records; fails when a
# record is not as step 3 says.
snapshot() {
  list nodes >"$tmp/nodes.json"
  list actors >"$tmp/actors.json"
  list jobs >"$tmp/jobs.json"
  python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
nodes = json.load(open(f"{d}/nodes.json"))
actors = json.load(open(f"{d}/actors.json"))
jobs = json.load(open(f"{d}/jobs.json"))
out = []
# `orrery list nodes` asks the head: it knows both nodes until the dead one expires.
dead = [n for n in nodes if not n["alive"]]
alive = [n for n in nodes if n["alive"]]
assert len(dead) == 1 and len(alive) == 1, f"expected one dead and one alive node: {nodes}"
out += [f"nodes {dead[0]['node_id']} gone", f"nodes {alive[0]['node_id']} kept"]
for a in actors:
    if a["state"] == "DEAD":
        assert a["end_time"] > 1e9, f"a DEAD actor without an end_time: {a}"
        out.append(f"actors {a['actor_id']} gone")
    else:
        assert a["end_time"] == 0, f"a live actor with an end_time: {a}"
        out.append(f"actors {a['actor_id']} kept")
names = {a["name"]: a["state"] for a in actors}
assert names.get("keeper") == "ALIVE" and names.get("doomed") == "DEAD", names
assert names.get("greeter_count") == "DEAD", names
for j in jobs:
    if j["state"] == "FINISHED":
        assert j["end_time"] > 1e9, f"an ended job without an end_time: {j}"
        out.append(f"jobs {j['job_id']} gone")
    else:
        assert j["end_time"] == 0, f"a running job with an end_time: {j}"
        out.append(f"jobs {j['job_id']} kept")
assert sum(l.endswith("gone") for l in out) >= 5, out
print("\n".join(out))
PY
}

step "every ended record has an end_time; nothing expires within the hour"
snapshot >"$tmp/expect.txt" || fail "the records are not as expected"
cat "$tmp/expect.txt"
while read -r table id expect; do
  [[ "$(in_redis "$table" "$id")" == 1 ]] || fail "$table $id is not in Redis"
done <"$tmp/expect.txt"

step "kill -9 the head; start it again on the same Redis with --history-ttl 2s"
mapfile -t heads < <(pids_of head)
[[ ${#heads[@]} -eq 1 ]] || fail "expected one head process, found ${#heads[@]}"
kill -KILL "${heads[0]}"
wait_gone 10 "${heads[0]}" >/dev/null || fail "the head did not die"
orrery start --head --port "$port" --redis-address "$redis_address" --no-dashboard --history-ttl 2s >/dev/null

# True once every record marked `gone` in $1 is gone from Redis; fails the test when a
# record marked `kept` is missing.
settled() {
  local table id expect pending=0
  while read -r table id expect; do
    if [[ "$expect" == kept ]]; then
      [[ "$(in_redis "$table" "$id")" == 1 ]] || fail "$table $id was deleted, but it is live"
    elif [[ "$(in_redis "$table" "$id")" == 1 ]]; then
      pending=1
    fi
  done <"$1"
  return $pending
}

step "the restored ended records expire; the live ones stay"
wait_for 30 settled "$tmp/expect.txt" || fail "ended records are still in Redis 30 s after the head restarted"
list actors >"$tmp/actors2.json"
python3 - "$tmp/actors2.json" <<'PY'
import json, sys
actors = json.load(open(sys.argv[1]))
assert [a["name"] for a in actors] == ["keeper"], f"expected only keeper: {actors}"
assert actors[0]["state"] == "ALIVE", actors
PY
orrery list nodes --json --address "$head_address" >"$tmp/nodes2.json"
python3 -c 'import json,sys; n=json.load(open(sys.argv[1])); assert len(n)==1 and n[0]["alive"], n' \
  "$tmp/nodes2.json" || fail "the head still lists the expired dead node: $(cat "$tmp/nodes2.json")"

step "the driver stops: its job and keeper end and expire"
touch "$stop_file"
wait_gone 30 "$driver_pid" >/dev/null || fail "the driver did not stop"
wait "$driver_pid" || fail "the driver exited non-zero: $(tail -5 "$tmp/driver.out")"
sed -i 's/ kept$/ gone/; /^nodes /d' "$tmp/expect.txt"
wait_for 30 settled "$tmp/expect.txt" || fail "the driver's job and actor are still in Redis 30 s after it stopped"
[[ "$(list actors)" == "[]" ]] || fail "actors left: $(list actors)"
[[ "$(list jobs)" == "[]" ]] || fail "jobs left: $(list jobs)"
echo "PASS"
