#!/usr/bin/env bash
# The dashboard's authentication as curl sees it (docs/dashboard.md, "Authentication"):
#   1. redis-server on a loopback port and a token file (0600)
#   2. `orrery dashboard --host 0.0.0.0 --token-file F` (bound to every interface, reached
#      here through 127.0.0.1: the bind address decides): prints a one-time login URL
#   3. without credentials every page, asset and /api route answers 401 (HTML login page,
#      JSON error for /api); a wrong bearer token, a wrong cookie and a wrong login form get
#      401; the right bearer token reads /api
#   4. the login form with the token sets an HttpOnly SameSite=Strict cookie (not the token)
#      with which pages and /api answer 200; logout ends it
#   5. the one-time URL logs in once; a second use answers 401
#   6. no token and no --insecure on 0.0.0.0: refuses to start; --insecure: warns and
#      serves open; bound to 127.0.0.1 it stays open
#   7. `orrery start --head --dashboard-host 0.0.0.0` prints a one-time URL (read from a
#      0600 file, not the log) that works once; the session's token works as bearer
# Waits poll conditions against deadlines. A trap stops everything the test started.
# Usage: dashboard_auth_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/e2e/session_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/session_lib.sh"
e2e_args "$@"
require_built "$orrery_bin"
require_tools redis-server redis-cli curl python3

start_daemon_test dashboard_auth
unset ORRERY_TOKEN_FILE ORRERY_INSECURE

# curl $@; the body goes to $tmp/body, the headers to $tmp/headers; prints the HTTP status.
req() { curl -s --max-time 10 -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' "$@"; }
expect() {  # expect <status> <what> <curl args...>
  local want=$1 what=$2 code
  shift 2
  code=$(req "$@")
  [[ "$code" == "$want" ]] || fail "$what answered $code, expected $want: $(head -c 300 "$tmp/body")"
}
header_has() { grep -qi "$1" "$tmp/headers"; }

pages=(/ /nodes /actors /placement-groups /jobs /runs /runs/0123456789abcdef0123456789abcdef
  /static/app.js /static/app.css /no-such-page)
apis=(/api/cluster /api/nodes /api/actors /api/placement_groups /api/jobs /api/runs
  /api/runs/0123456789abcdef0123456789abcdef /api/no-such-thing /api/events)

# 1. Redis and a token.
step "redis-server and a token file"
start_redis "$tmp/redis.log" --save '' --appendonly no
pids+=("$redis_pid")
(umask 077 && python3 -c 'import secrets; print(secrets.token_hex(32))' >"$tmp/token")
token=$(cat "$tmp/token")
# The token with its last character changed.
wrong_token=${token%?}$([[ ${token: -1} == 0 ]] && echo 1 || echo 0)

# Starts `orrery dashboard ARGS...` with its output in $tmp/$1.log; sets dash_pid and base
# (http://127.0.0.1:PORT).
start_dashboard() {
  local log="$tmp/$1.log" ready="$tmp/$1.ready"
  shift
  orrery_bg dashboard --redis-address "127.0.0.1:$redis_port" --port 0 --ready-file "$ready" "$@" >"$log" 2>&1
  dash_pid=$!
  pids+=("$dash_pid")
  wait_ready "$ready" "$dash_pid" 15 "$log"
  base="http://127.0.0.1:$(ready_field "$ready" port)"
  grep -q "^Dashboard at http://[^ ]*:[0-9]*" "$log" || fail "the dashboard printed no URL"
}

# 2. Bound to every interface, with the token.
step "orrery dashboard --host 0.0.0.0 --token-file F"
start_dashboard auth --host 0.0.0.0 --token-file "$tmp/token"
login_url=$(grep -o 'http://[^ ]*/login?ticket=[0-9a-f]*' "$tmp/auth.log" | head -1)
[[ -n "$login_url" ]] || fail "no one-time login URL printed: $(cat "$tmp/auth.log")"
ticket_path="/login?${login_url#*/login?}"
grep -q "$token" "$tmp/auth.log" && fail "the dashboard printed the token itself"
echo "dashboard at $base, one-time path $ticket_path"

# 3. Nothing without credentials.
step "without credentials: 401 everywhere"
for p in "${pages[@]}"; do
  expect 401 "GET $p" "$base$p"
  header_has '^content-type: text/html' || fail "$p: the 401 is not the HTML login page"
  grep -q 'action="/login"' "$tmp/body" || fail "$p: no login form in the 401 page"
done
for p in "${apis[@]}"; do
  expect 401 "GET $p" "$base$p"
  header_has '^content-type: application/json' || fail "$p: the 401 is not JSON"
  python3 -c 'import json,sys; assert "error" in json.load(open(sys.argv[1]))' "$tmp/body" || fail "$p: no JSON error"
done
expect 401 "POST /api/nodes" -X POST "$base/api/nodes"
expect 401 "HEAD /api/cluster" -I "$base/api/cluster"
expect 401 "a wrong bearer token" -H "Authorization: Bearer $wrong_token" "$base/api/cluster"
expect 401 "the token as a cookie" -H "Cookie: orrery_dashboard_session=$token" "$base/api/cluster"
expect 401 "a wrong login form" -d "token=wrong" "$base/login"
header_has '^set-cookie' && fail "a wrong login set a cookie"
# Oversized and garbage credentials are refused, and the server stays up.
expect 401 "a huge bearer header" -H "Authorization: Bearer $(head -c 6000 /dev/zero | tr '\0' a)" "$base/api/nodes"
printf 'GET /api/nodes HTTP/1.1\r\nCookie: \x01\xff;;==\r\n\r\n' |
  timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/${base##*:}; cat >&3; cat <&3" >/dev/null 2>&1 || true
alive "$dash_pid" || fail "the dashboard died on a garbage cookie"
echo "ok: 401 for every page and /api route"

step "the bearer token reads /api"
expect 200 "/api/cluster with the bearer token" -H "Authorization: Bearer $token" "$base/api/cluster"
python3 -c 'import json,sys; b=json.load(open(sys.argv[1])); assert b["redis"]["ok"] is True, b' "$tmp/body" ||
  fail "/api/cluster with the bearer token did not read Redis"

# 4. The login form.
step "POST /login with the token sets the session cookie"
expect 303 "the login form" -c "$tmp/jar" --data-urlencode "token@$tmp/token" "$base/login"
header_has '^set-cookie: orrery_dashboard_session=.*HttpOnly' || fail "no HttpOnly session cookie"
header_has '^set-cookie: .*SameSite=Strict' || fail "the session cookie is not SameSite=Strict"
grep -q "$token" "$tmp/headers" && fail "the cookie holds the token"
for p in / /nodes /static/app.js; do expect 200 "GET $p with the cookie" -b "$tmp/jar" "$base$p"; done
for p in /api/cluster /api/nodes; do expect 200 "GET $p with the cookie" -b "$tmp/jar" "$base$p"; done
expect 303 "logout" -b "$tmp/jar" -c "$tmp/jar" -X POST "$base/logout"
expect 401 "GET / after logout" -b "$tmp/jar" "$base/"
echo "ok: the login form, the cookie and logout"

# 5. The one-time URL.
step "the one-time URL works once"
expect 303 "the one-time URL" -c "$tmp/jar2" "$base$ticket_path"
expect 200 "/api/nodes after the one-time URL" -b "$tmp/jar2" "$base/api/nodes"
expect 401 "the one-time URL a second time" -c "$tmp/jar3" "$base$ticket_path"
header_has '^set-cookie' && fail "a used ticket set a cookie"
echo "ok: one-time URL"

# 6. Refusals, --insecure and loopback.
step "0.0.0.0 without a token refuses to start"
if ORRERY_TMPDIR="$sessions" timeout 20 "$orrery_bin" dashboard --redis-address "127.0.0.1:$redis_port" \
  --host 0.0.0.0 --port 0 >"$tmp/refused.log" 2>&1; then
  fail "the dashboard started on 0.0.0.0 without a token"
fi
grep -q "requires the cluster token" "$tmp/refused.log" || fail "unclear refusal: $(cat "$tmp/refused.log")"
step "0.0.0.0 --insecure warns and serves open"
start_dashboard insecure --host 0.0.0.0 --insecure
grep -q "WARNING: --insecure" "$tmp/insecure.log" || fail "no warning for --insecure"
expect 200 "/api/cluster of an --insecure dashboard" "$base/api/cluster"
step "127.0.0.1 stays open"
start_dashboard loopback --host 127.0.0.1 --token-file "$tmp/token"
expect 200 "/api/cluster on loopback" "$base/api/cluster"
expect 200 "/ on loopback" "$base/"

# 7. The dashboard of `orrery start --head`.
step "orrery start --head --dashboard-host 0.0.0.0"
orrery start --head --port 0 --num-cpus 1 --dashboard-host 0.0.0.0 --dashboard-port 0 | tee "$tmp/start.out"
start_url=$(sed -n 's/^  Dashboard: *\(http[^ ]*\)$/\1/p' "$tmp/start.out")
[[ "$start_url" =~ ^http://[^/]+:[0-9]+/login\?ticket=[0-9a-f]+$ ]] || fail "orrery start printed no one-time URL"
port=${start_url#http://*:}
port=${port%%/*}
sbase="http://127.0.0.1:$port"
session_dir=$(ls -d "$sessions"/session_* | tail -1)
grep -q "${start_url#*ticket=}" "$session_dir/logs/dashboard.log" && fail "the ticket is in the log"
[[ ! -e "$session_dir/dashboard_url" ]] || fail "the URL file was left behind"
expect 401 "the session's dashboard without credentials" "$sbase/api/cluster"
expect 303 "the session's one-time URL" -c "$tmp/jar4" "$sbase/${start_url#http://*/}"
expect 200 "the session's dashboard with the cookie" -b "$tmp/jar4" "$sbase/api/cluster"
expect 401 "the session's one-time URL again" "$sbase/${start_url#http://*/}"
expect 200 "the session's dashboard with its token" -H "Authorization: Bearer $(cat "$session_dir/token")" \
  "$sbase/api/cluster"
orrery stop

echo
echo "PASS: dashboard authentication"
