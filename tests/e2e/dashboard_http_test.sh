#!/usr/bin/env bash
# The dashboard's HTTP API as a browser (or curl) sees it, on one machine:
#   1. redis-server on a loopback port, `orrery head --port 0` and `orrery node --num-cpus 3`,
#      each waited for by its readiness file
#   2. `orrery dashboard --redis-address <redis> --port 0`: prints its URL
#   3. /api/nodes lists the node (alive, CPU 3, used, its object store's four figures),
#      /api/cluster has CPU total 3 and the stores added up,
#      the pages and assets answer with their content types, an unknown /api path and an
#      unknown page answer 404, POST answers 405
#   3b. GET /api/events (server-sent events): an event at once, another after a node
#      joins; a ninth concurrent stream answers 503; streams of clients gone end
#   4. Redis killed: every /api path still answers 200 with redis.ok=false and empty lists
#   5. `orrery start --head --dashboard-port 0` prints the dashboard's URL and serves it;
#      `orrery stop` stops it. A second `orrery start --head` with the same (busy)
#      dashboard port warns and still starts the cluster.
# Waits poll conditions against deadlines. A trap stops everything the test started and
# fails the test if any of its processes outlived that.
# Usage: dashboard_http_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/e2e/session_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/session_lib.sh"
e2e_args "$@"
require_built "$orrery_bin"
require_tools redis-server redis-cli curl python3

start_daemon_test dashboard

# GET $1; writes the body to $tmp/body and prints the HTTP status.
get() { curl -s --max-time 10 -o "$tmp/body" -w '%{http_code}' "$@"; }
# Runs a python assertion on $tmp/body (parsed as JSON into `b`).
check_body() {
  python3 - "$tmp/body" "$1" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
try:
    exec(sys.argv[2])
except AssertionError as e:
    print(f"body: {json.dumps(b)[:2000]}", file=sys.stderr)
    raise
PY
}

# 1. Redis, a head and a node, as daemons of this test.
step "redis-server, orrery head, orrery node --num-cpus 3"
# The cluster's token (docs/security.md), as `orrery start --head` would make one.
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token")
export ORRERY_TOKEN_FILE="$tmp/token"
start_redis "$tmp/redis.log" --save '' --appendonly no
pids+=("$redis_pid")
orrery_bg head --port 0 --redis-address "127.0.0.1:$redis_port" --ready-file "$tmp/head.ready" >"$tmp/head.log" 2>&1
pids+=($!)
wait_ready "$tmp/head.ready" "$!" 15 "$tmp/head.log"
head_port=$(ready_field "$tmp/head.ready" port)
orrery_bg node --address "127.0.0.1:$head_port" --num-cpus 3 --ready-file "$tmp/node.ready" >"$tmp/node.log" 2>&1
pids+=($!)
wait_ready "$tmp/node.ready" "$!" 15 "$tmp/node.log"
node_id=$(ready_field "$tmp/node.ready" node_id)
[[ -n "$node_id" ]] || fail "no node_id in the node's readiness file"

# 2. The dashboard.
step "orrery dashboard --redis-address 127.0.0.1:$redis_port --port 0"
orrery_bg dashboard --redis-address "127.0.0.1:$redis_port" --port 0 --ready-file "$tmp/dashboard.ready" >"$tmp/dashboard.log" 2>&1
dashboard_pid=$!
pids+=("$dashboard_pid")
wait_ready "$tmp/dashboard.ready" "$dashboard_pid" 15 "$tmp/dashboard.log"
url="http://127.0.0.1:$(ready_field "$tmp/dashboard.ready" port)"
grep -qF "Dashboard at $url" "$tmp/dashboard.log" || fail "the dashboard did not print its URL $url"
echo "dashboard at $url"

# 3. The API and the pages. The head writes the node's record shortly after it registers.
step "GET /api/nodes, /api/cluster, pages, 404s"
node_listed() {
  [[ $(get "$url/api/nodes") == 200 ]] &&
    check_body "assert any(n['node_id'] == '$node_id' and n['alive'] for n in b['nodes'])" 2>/dev/null
}
wait_for 15 node_listed || { get "$url/api/nodes" >/dev/null; cat "$tmp/body"; fail "/api/nodes does not list node $node_id"; }
check_body "
assert b['redis'] == {'address': '127.0.0.1:$redis_port', 'ok': True, 'error': ''}, b['redis']
n = [n for n in b['nodes'] if n['node_id'] == '$node_id'][0]
assert n['total']['CPU'] == 3, n
assert n['used']['CPU'] == 0, n
assert n['labels']['orrery.io/node-id'] == '$node_id', n
store = n['object_store']
assert set(store) == {'capacity_bytes', 'used_bytes', 'spilled_bytes', 'num_objects'}, store
assert all(isinstance(v, int) and v >= 0 for v in store.values()), store
assert store['used_bytes'] <= store['capacity_bytes'], store
print('ok: /api/nodes lists', n['node_id'], n['total'], n['object_store'])"
[[ $(get "$url/api/cluster") == 200 ]] || fail "/api/cluster did not answer 200"
check_body "
assert b['redis']['ok'] is True, b['redis']
assert b['nodes'] == {'alive': 1, 'dead': 0}, b['nodes']
assert b['resources']['CPU'] == {'total': 3, 'used': 0}, b['resources']
assert b['tpu_slices'] == [], b['tpu_slices']
assert set(b['object_store']) == {'capacity_bytes', 'used_bytes', 'spilled_bytes', 'num_objects'}, b
print('ok: /api/cluster', b['resources']['CPU'], b['object_store'])"
for path in actors placement_groups jobs runs; do
  [[ $(get "$url/api/$path") == 200 ]] || fail "/api/$path did not answer 200"
  check_body "assert isinstance(b['$path'], list) and b['redis']['ok'] is True"
done
code=$(get "$url/api/runs/0123456789abcdef0123456789abcdef")
[[ "$code" == 404 ]] || fail "/api/runs/<unknown id> answered $code, expected 404"
code=$(get "$url/api/no-such-thing")
[[ "$code" == 404 ]] || fail "/api/no-such-thing answered $code, expected 404"
check_body "assert 'error' in b"
code=$(get "$url/no-such-page")
[[ "$code" == 404 ]] || fail "/no-such-page answered $code, expected 404"
code=$(get -X POST "$url/api/nodes")
[[ "$code" == 405 ]] || fail "POST /api/nodes answered $code, expected 405"
for page in / /nodes /actors /placement-groups /jobs /runs /runs/0123456789abcdef0123456789abcdef; do
  type=$(curl -s --max-time 10 -o /dev/null -w '%{http_code} %{content_type}' "$url$page")
  [[ "$type" == "200 text/html"* ]] || fail "page $page answered '$type'"
done
type=$(curl -s --max-time 10 -o /dev/null -w '%{http_code} %{content_type}' "$url/static/app.js")
[[ "$type" == "200 text/javascript"* ]] || fail "/static/app.js answered '$type'"
type=$(curl -s --max-time 10 -o /dev/null -w '%{http_code} %{content_type}' "$url/static/app.css")
[[ "$type" == "200 text/css"* ]] || fail "/static/app.css answered '$type'"
# A malformed request gets an error answer and the server stays up.
printf 'GARBAGE\r\n\r\n' | timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/${url##*:}; cat >&3; cat <&3" >/dev/null 2>&1 || true
alive "$dashboard_pid" || fail "the dashboard died on a malformed request"
echo "ok: pages, assets, 404s and 405"

# 3b. Live updates: GET /api/events streams an event at once and another after a change.
step "GET /api/events: an event, another once a node joins, 503 beyond 8 streams"
# Opens a stream in the background, writing what arrives to $tmp/events.$1; sets stream_pid.
open_stream() {
  curl -s -N --max-time 120 -D "$tmp/events.$1.headers" "$url/api/events" >"$tmp/events.$1" 2>/dev/null &
  stream_pid=$!
  pids+=("$stream_pid")
}
# The number of events stream $1 received.
events_in() { grep -c '^event: change$' "$tmp/events.$1" 2>/dev/null || true; }
has_events() { (($(events_in "$1") >= $2)); }
# The data of the last event of stream $1, parsed, run through the python assertion $2.
check_last_event() {
  python3 - "$tmp/events.$1" "$2" <<'PY'
import json, sys
data = [l[len("data: "):] for l in open(sys.argv[1]).read().splitlines() if l.startswith("data: ")]
e = json.loads(data[-1])
exec(sys.argv[2])
PY
}
open_stream 0
observer=$stream_pid
wait_for 15 has_events 0 1 || fail "GET /api/events sent no event within 15 s: $(cat "$tmp/events.0")"
grep -qi '^content-type: text/event-stream' "$tmp/events.0.headers" || fail "the stream is not text/event-stream: $(cat "$tmp/events.0.headers")"
check_last_event 0 "assert e['redis'] == {'ok': True, 'error': ''} and e['version'] >= 1, e"
orrery_bg node --address "127.0.0.1:$head_port" --num-cpus 1 --ready-file "$tmp/node2.ready" >"$tmp/node2.log" 2>&1
pids+=($!)
wait_ready "$tmp/node2.ready" "$!" 15 "$tmp/node2.log"
wait_for 15 has_events 0 2 || fail "no event within 15 s after a node joined: $(cat "$tmp/events.0")"
check_last_event 0 "assert 'nodes' in e['changed'], e"
echo "ok: $(events_in 0) events; the last: $(grep '^data: ' "$tmp/events.0" | tail -1)"
# Seven more streams make eight: the ninth is refused.
extra=()
for i in 1 2 3 4 5 6 7; do
  open_stream "$i"
  extra+=("$stream_pid")
done
for i in 1 2 3 4 5 6 7; do wait_for 15 has_events "$i" 1 || fail "stream $i got no event"; done
code=$(get --max-time 5 "$url/api/events")
[[ "$code" == 503 ]] || fail "a ninth stream answered $code, expected 503"
check_body "assert 'error' in b"
# Streams end when their clients go away: once a change has been written to the closed
# connections (the second write fails), a stream can be opened again.
kill "${extra[@]}" 2>/dev/null
wait_gone 10 "${extra[@]}" >/dev/null || fail "curl did not stop"
touch_redis() {
  local n
  n=$(events_in 0)
  redis-cli -p "$redis_port" HSET orrery:default:jobs ffffffffffffffffffffffffffffff0$1 '{"state":"FINISHED"}' >/dev/null
  wait_for 15 has_events 0 $((n + 1)) || fail "no event after a change in Redis"
}
stream_accepted() {
  [[ "$(curl -s -o /dev/null --max-time 2 -w '%{http_code}' "$url/api/events" 2>/dev/null)" == 200 ]]
}
touch_redis 1
touch_redis 2
wait_for 15 stream_accepted || fail "the streams of clients that went away were not closed"
kill "$observer" 2>/dev/null
redis-cli -p "$redis_port" DEL orrery:default:jobs >/dev/null
echo "ok: the ninth stream got 503; closed clients' streams ended"

# 4. Redis down: answers, with redis.ok=false.
step "kill redis-server; the API answers with redis.ok=false"
kill -KILL "$redis_pid"
wait "$redis_pid" 2>/dev/null || true  # reaps it (and keeps bash's "Killed" notice quiet)
for path in cluster nodes actors placement_groups jobs runs runs/0123456789abcdef0123456789abcdef; do
  code=$(get "$url/api/$path")
  [[ "$code" == 200 ]] || fail "/api/$path answered $code with Redis down, expected 200"
  check_body "
assert b['redis']['ok'] is False and b['redis']['error'], b['redis']
for k, v in b.items():
    assert not isinstance(v, list) or v == [], (k, v)"
done
check_body "print('ok: with Redis down:', b['redis']['error'])"
alive "$dashboard_pid" || fail "the dashboard exited when Redis went away"

# 5. orrery start --head starts a dashboard, orrery stop stops it; a busy port only warns.
step "orrery start --head --port 0 --num-cpus 1 --dashboard-port 0"
orrery start --head --port 0 --num-cpus 1 --dashboard-port 0 | tee "$tmp/start.out"
start_url=$(sed -n 's/^  Dashboard: *\(http[^ ]*\)$/\1/p' "$tmp/start.out")
[[ "$start_url" =~ ^http://127\.0\.0\.1:[0-9]+$ ]] || fail "orrery start --head printed no dashboard URL"
[[ $(get "$start_url/api/cluster") == 200 ]] || fail "the session's dashboard does not answer"
check_body "assert b['redis']['ok'] is True and b['nodes']['alive'] == 1, b"
busy_port=${start_url##*:}
step "orrery start --head --port 0 --dashboard-port $busy_port (busy)"
orrery start --head --port 0 --num-cpus 1 --dashboard-port "$busy_port" >"$tmp/start2.out" 2>"$tmp/start2.err" ||
  fail "orrery start --head failed on a busy dashboard port: $(cat "$tmp/start2.err")"
grep -q "warning: no dashboard" "$tmp/start2.err" || fail "no warning about the busy dashboard port"
grep -q "Dashboard:" "$tmp/start2.out" && fail "a dashboard URL was printed although its port was busy"
step "orrery stop"
orrery stop
wait_for 10 bash -c "! curl -s --max-time 1 -o /dev/null '$start_url/'" || fail "the dashboard still answers after orrery stop"

echo
echo "PASS: dashboard HTTP API"
