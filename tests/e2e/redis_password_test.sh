#!/usr/bin/env bash
# The Redis that `orrery start --head` starts has a password (docs/redis-schema.md
# "Password"):
#   1. orrery start --head: <session>/redis_password and <session>/redis.conf are mode 0600,
#      and the password is on no process's command line (/proc/*/cmdline)
#   2. redis-cli without a password gets NOAUTH and with a wrong one WRONGPASS, and reads
#      nothing; with the session's password (REDISCLI_AUTH) it reads the node's record
#   3. the head, the dashboard and `orrery status` / `orrery list` work with it
#   4. a head or dashboard given a wrong password, or none, exits at start with a message
#      naming Redis's answer, and the password in no message
# Usage: redis_password_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/e2e/session_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/session_lib.sh"
e2e_args "$@"
require_built "$orrery_bin"
require_tools redis-server redis-cli python3

start_test_session redis_password
# Nothing of the caller's environment may choose the password for this test.
unset ORRERY_REDIS_PASSWORD_FILE REDISCLI_AUTH

value_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["values"].get(sys.argv[2], ""))' "$1" "$2"; }
mode_of() { stat -c '%a' "$1"; }

step "orrery start --head --port 0 --num-cpus 1 --dashboard-port 0"
orrery start --head --port 0 --num-cpus 1 --dashboard-port 0 | tee "$tmp/start.out"
session=$(ls -d "$sessions"/session_*/ | head -n 1)
session=${session%/}
redis_address=$(value_of "$session/session.json" redis_address)
password_file=$(value_of "$session/session.json" redis_password_file)
[[ -n "$redis_address" ]] || fail "no redis_address in $session/session.json"
[[ "$password_file" == "$session/redis_password" ]] || fail "redis_password_file is '$password_file', expected $session/redis_password"
redis_port=${redis_address##*:}
password=$(cat "$password_file")
[[ ${#password} -ge 32 ]] || fail "the Redis password has ${#password} characters, expected a random token"
grep -qF "$password_file" "$tmp/start.out" || check_failed "orrery start does not say where the Redis password is"
grep -qF "$password" "$tmp/start.out" && check_failed "orrery start printed the Redis password itself"

step "the password file and redis.conf are mode 0600"
[[ "$(mode_of "$password_file")" == 600 ]] || check_failed "$password_file has mode $(mode_of "$password_file")"
[[ "$(mode_of "$session/redis.conf")" == 600 ]] || check_failed "$session/redis.conf has mode $(mode_of "$session/redis.conf")"

step "the password is on no process's command line"
found_redis=0
for d in /proc/[0-9]*; do
  cmdline=$({ tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null) || continue
  [[ "$cmdline" == *redis-server* ]] && found_redis=1
  if [[ "$cmdline" == *"$password"* ]]; then check_failed "pid ${d#/proc/} has the password on its command line"; fi
done
[[ $found_redis -eq 1 ]] || fail "no redis-server process found in /proc"

step "redis-cli without a password: NOAUTH, nothing read"
out=$(redis-cli -h 127.0.0.1 -p "$redis_port" HGETALL orrery:default:nodes 2>&1 || true)
[[ "$out" == *NOAUTH* ]] || check_failed "HGETALL without a password answered: $out"
out=$(redis-cli -h 127.0.0.1 -p "$redis_port" KEYS '*' 2>&1 || true)
[[ "$out" == *NOAUTH* && "$out" != *orrery:* ]] || check_failed "KEYS without a password answered: $out"

step "redis-cli with a wrong password: WRONGPASS, nothing read"
out=$(REDISCLI_AUTH=not-the-password redis-cli -h 127.0.0.1 -p "$redis_port" HGETALL orrery:default:nodes 2>&1 || true)
[[ "$out" == *WRONGPASS* && "$out" == *NOAUTH* ]] || check_failed "HGETALL with a wrong password answered: $out"

step "redis-cli with the session's password reads the node's record"
out=$(REDISCLI_AUTH="$password" redis-cli -h 127.0.0.1 -p "$redis_port" --no-auth-warning HLEN orrery:default:nodes 2>&1)
[[ "$out" == 1 ]] || check_failed "HLEN orrery:default:nodes with the password answered: $out"

step "orrery status and orrery list actors --json find the password"
orrery status >"$tmp/status.out" 2>&1 || { cat "$tmp/status.out"; fail "orrery status failed"; }
orrery list actors --json --redis-address "$redis_address" >"$tmp/actors.json" 2>"$tmp/actors.err" \
  || { cat "$tmp/actors.err"; fail "orrery list actors failed"; }
python3 -c 'import json,sys; assert isinstance(json.load(open(sys.argv[1])), list)' "$tmp/actors.json" \
  || check_failed "orrery list actors --json did not print a JSON list"

step "the dashboard that orrery start started reads Redis"
dashboard_url=$(sed -n 's/^ *Dashboard: *\(http[^ ]*\).*/\1/p' "$tmp/start.out")
[[ -n "$dashboard_url" ]] || fail "no dashboard URL in the output of orrery start"
python3 - "$dashboard_url" <<'PY' || check_failed "the dashboard does not read Redis"
import json, sys, urllib.request
body = json.load(urllib.request.urlopen(sys.argv[1].rstrip("/") + "/api/nodes", timeout=10))
assert body["redis"]["ok"] and len(body["nodes"]) == 1, body
PY

echo "$password" | tr 'a-f0-9' 'b-f0-9a' >"$tmp/wrong_password"
chmod 600 "$tmp/wrong_password"

step "orrery head with a wrong password exits at start, naming Redis's answer"
rc=0
timeout 20 "$orrery_bin" head --port 0 --redis-address "$redis_address" \
  --redis-password-file "$tmp/wrong_password" --insecure >"$tmp/head_wrong.out" 2>&1 || rc=$?
cat "$tmp/head_wrong.out"
[[ $rc -eq 1 ]] || check_failed "orrery head with a wrong password exited $rc, expected 1"
grep -q "refused the password (WRONGPASS" "$tmp/head_wrong.out" || check_failed "no WRONGPASS message from orrery head"
grep -qF "$(cat "$tmp/wrong_password")" "$tmp/head_wrong.out" && check_failed "orrery head printed the password"

step "orrery head with no password exits at start: Redis requires one"
rc=0
timeout 20 "$orrery_bin" head --port 0 --redis-address "$redis_address" --insecure \
  >"$tmp/head_none.out" 2>&1 || rc=$?
cat "$tmp/head_none.out"
[[ $rc -eq 1 ]] || check_failed "orrery head without a password exited $rc, expected 1"
grep -q "requires a password" "$tmp/head_none.out" || check_failed "no 'requires a password' message from orrery head"

step "orrery dashboard with a wrong password exits at start"
rc=0
timeout 20 "$orrery_bin" dashboard --redis-address "$redis_address" --redis-password-file "$tmp/wrong_password" \
  --port 0 >"$tmp/dash_wrong.out" 2>&1 || rc=$?
cat "$tmp/dash_wrong.out"
[[ $rc -eq 1 ]] || check_failed "orrery dashboard with a wrong password exited $rc, expected 1"
grep -q "refused the password (WRONGPASS" "$tmp/dash_wrong.out" || check_failed "no WRONGPASS message from orrery dashboard"

step "orrery stop"
orrery stop >/dev/null
check_none_left || fail "processes left behind"

if [[ ${#failures[@]} -gt 0 ]]; then
  echo "FAILED: ${#failures[@]} check(s)" >&2
  exit 1
fi
echo "PASS"
