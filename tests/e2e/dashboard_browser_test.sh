#!/usr/bin/env bash
# The web dashboard in a real browser (headless Chromium), against a real cluster:
#   1. orrery start --head --port 0 --num-cpus 4 --dashboard-port 0: Redis, a head, a node
#      and the dashboard; the printed "Dashboard" line gives its URL
#   2. two more nodes with orrery start --address <head>
#   3. examples/train_linear --orrery-address=<head>: a training run of 60 reports
#   4. each page loaded in headless Chromium (--dump-dom after 10 s of virtual time, so the
#      page has fetched its API and drawn it), checked with grep:
#        /                  3 alive nodes
#        /nodes             the 3 node ids of `orrery list nodes --json`
#        /actors            the actors of `orrery list actors --json`
#        /placement-groups  /jobs  the page draws (the job of train_linear is listed)
#        /runs              the train_linear run, linking to /runs/<id>
#        /runs/<id>         60 <circle class="point" data-metric="loss"> in #plot-loss, and
#                           the 4 workers
#      and a screenshot of the run page (to ORRERY_DASHBOARD_SCREENSHOT when set)
#   5. `orrery dashboard --host 0.0.0.0` (the session's token): a browser without a login
#      gets the login page; the one-time URL logs it in and shows the overview, and its
#      cookie then opens /nodes in a new browser run with the same profile
#   6. Redis killed: the overview shows the redis-banner instead of failing
# A trap stops the cluster (orrery stop with this test's ORRERY_TMPDIR) and whatever the
# test started, even on failure. Exits 77 (skipped) when no Chromium is installed, and
# fails instead under CI=true, whose setup installs it.
# Usage: dashboard_browser_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/e2e/session_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/session_lib.sh"
e2e_args "$@"
train_linear="$build_dir/examples/train_linear"

browser=""
for b in chromium chromium-browser google-chrome-stable google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then
    browser=$(command -v "$b")
    break
  fi
done
if [[ -z "$browser" ]]; then
  # Under CI the setup installs chromium, so its absence is a broken setup, not a skip.
  if [[ "${CI:-}" == "true" ]]; then
    echo "FAIL: no chromium on PATH although CI=true (scripts/setup.sh installs the chromium package)" >&2
    exit 1
  fi
  echo "SKIP: no chromium on PATH (scripts/setup.sh installs the chromium package)"
  exit 77
fi
require_built "$orrery_bin" "$train_linear"
require_tools redis-server python3

start_test_session dashboard_browser
pages="$tmp/pages"
mkdir -p "$pages" "$tmp/chrome-profile"

# Headless Chromium with this test's own profile; the page gets 10 s of virtual time, so
# its 2 s polling (headless, the page polls: docs/dashboard.md "Live updates") has fetched
# and drawn the API's answer. Extra arguments come first.
# Usage: chrome <args...> <url>
chrome() {
  # The marker in its environment lets the trap find a browser left behind.
  ORRERY_TMPDIR="$sessions" timeout --kill-after=10 90 "$browser" --headless=new --no-sandbox --disable-gpu \
    --no-first-run --no-default-browser-check --disable-extensions --disable-background-networking \
    --user-data-dir="${chrome_profile:-$tmp/chrome-profile}" --virtual-time-budget=10000 "$@" 2>>"$tmp/chrome.err"
}
# Usage: dump <name> <path>: the page's DOM after its scripts ran, in $pages/<name>.html.
dump() {
  local rc=0
  chrome --dump-dom "$dashboard$2" >"$pages/$1.html" || rc=$?
  if [[ $rc -ne 0 || ! -s "$pages/$1.html" ]]; then
    tail -n 20 "$tmp/chrome.err" >&2
    fail "chromium --dump-dom $dashboard$2 exited $rc with $(wc -c <"$pages/$1.html") bytes"
  fi
  echo "loaded $2 ($(wc -c <"$pages/$1.html") bytes of DOM)"
}
# Usage: count <regex> <file>: how many matches (grep -o), 0 for none.
count() { grep -oE "$1" "$2" | wc -l || true; }

# 1. The head, with the dashboard on a free port.
step "orrery start --head --port 0 --num-cpus 4 --dashboard-port 0"
orrery start --head --port 0 --num-cpus 4 --dashboard-port 0 | tee "$tmp/start_head.out"
head_address=$(sed -n 's/^Orrery head started at \([^ ]*\) .*/\1/p' "$tmp/start_head.out")
[[ "$head_address" =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "no head address in the output of orrery start --head"
dashboard=$(grep -i 'dashboard' "$tmp/start_head.out" | grep -oE 'https?://[^[:space:]]+' | head -n 1 || true)
dashboard=${dashboard%/}
[[ "$dashboard" =~ ^http://[^/]+:[0-9]+$ ]] || fail "no dashboard URL (a 'Dashboard ... http://host:port' line) in the output of orrery start --head"
head_session=$(readlink -f "$sessions/session_latest")
echo "head at $head_address; dashboard at $dashboard"

# 2. Two more nodes.
for n in 1 2; do
  step "orrery start --address $head_address --num-cpus 2 (node $n)"
  orrery start --address "$head_address" --num-cpus 2 | tee "$tmp/start_node$n.out"
  grep -qF "joined the head at $head_address" "$tmp/start_node$n.out" || fail "orrery start --address did not report joining"
done
deadline=$((SECONDS + 20))
while true; do
  orrery list nodes --json --address "$head_address" >"$tmp/nodes.json"
  n_alive=$(python3 -c 'import json,sys; print(sum(1 for n in json.load(open(sys.argv[1])) if n["alive"]))' "$tmp/nodes.json")
  [[ "$n_alive" -eq 3 ]] && break
  ((SECONDS < deadline)) || fail "orrery list nodes shows $n_alive alive nodes 20 s after starting 3, expected 3"
  sleep 0.5
done
mapfile -t node_ids < <(python3 -c 'import json,sys; print("\n".join(sorted(n["node_id"] for n in json.load(open(sys.argv[1])))))' "$tmp/nodes.json")
echo "nodes: ${node_ids[*]}"

# 3. A training run of 60 reports.
step "examples/train_linear --orrery-address=$head_address"
rc=0
ORRERY_TMPDIR="$sessions" timeout --kill-after=10 150 "$train_linear" --orrery-address="$head_address" \
  >"$tmp/train.out" 2>&1 || rc=$?
cat "$tmp/train.out"
[[ $rc -eq 0 ]] || fail "train_linear against the cluster exited $rc"
orrery list runs --json --address "$head_address" >"$tmp/runs.json"
run_id=$(python3 - "$tmp/runs.json" <<'EOF'
import json, sys
runs = [r for r in json.load(open(sys.argv[1])) if r.get("name") == "train_linear"]
assert len(runs) == 1, f"expected one train_linear run, got {runs}"
assert runs[0]["status"] == "FINISHED" and runs[0]["iterations"] == 60, runs[0]
print(runs[0]["id"])
EOF
)
[[ "$run_id" =~ ^[0-9a-f]{32}$ ]] || fail "no run id for train_linear in orrery list runs --json"
echo "run $run_id"
orrery list actors --json --address "$head_address" >"$tmp/actors.json"
mapfile -t actor_ids < <(python3 -c 'import json,sys; print("\n".join(sorted(a["actor_id"] for a in json.load(open(sys.argv[1])))))' "$tmp/actors.json")
[[ ${#actor_ids[@]} -ge 4 ]] || fail "expected train_linear's 4 worker actors in orrery list actors, found ${#actor_ids[@]}"

# 4. The pages.
step "the overview ($dashboard/)"
dump overview /
grep -qE 'id="nodes-alive">3<' "$pages/overview.html" || check_failed "the overview does not show 3 alive nodes"
grep -qE 'id="nodes-dead">0<' "$pages/overview.html" || check_failed "the overview does not show 0 dead nodes"
grep -qE '<tr data-resource="CPU"><td>CPU</td><td class="num used-total">[0-9.]+/8<' "$pages/overview.html" ||
  check_failed "the overview does not show the 8 CPUs of the 3 nodes"
if ! grep -q 'id="run-statuses"' "$pages/overview.html" || ! grep -q 'data-status="FINISHED"' "$pages/overview.html"; then
  check_failed "the overview does not count the FINISHED run"
fi
grep -q 'id="actor-states"' "$pages/overview.html" || check_failed "the overview does not count actors by state"
grep -q 'id="redis-banner"' "$pages/overview.html" && check_failed "the overview shows the Redis banner while Redis is up"

step "the nodes page"
dump nodes /nodes
grep -q 'id="nodes-table"' "$pages/nodes.html" || check_failed "the nodes page has no #nodes-table"
grep -q '<th>Object store</th>' "$pages/nodes.html" || check_failed "the nodes table has no Object store column"
n=$(count 'class="object-store"' "$pages/nodes.html")
[[ "$n" -eq 3 ]] || check_failed "the nodes table shows $n object store cells, expected 3"
mapfile -t page_nodes < <(grep -oE 'data-node-id="[0-9a-f]{32}"' "$pages/nodes.html" | sed 's/.*="\(.*\)"/\1/' | sort -u)
if [[ "${page_nodes[*]}" != "${node_ids[*]}" ]]; then
  check_failed "the nodes page lists nodes [${page_nodes[*]}], orrery list nodes --json [${node_ids[*]}]"
else
  echo "ok: the 3 node ids of orrery list nodes"
fi
n=$(count 'data-alive="true"' "$pages/nodes.html")
[[ "$n" -eq 3 ]] || check_failed "the nodes page shows $n alive nodes, expected 3"

step "the actors page"
dump actors /actors
grep -q 'id="actors-table"' "$pages/actors.html" || check_failed "the actors page has no #actors-table"
mapfile -t page_actors < <(grep -oE 'data-actor-id="[0-9a-f]{32}"' "$pages/actors.html" | sed 's/.*="\(.*\)"/\1/' | sort -u)
if [[ "${page_actors[*]}" != "${actor_ids[*]}" ]]; then
  check_failed "the actors page lists ${#page_actors[@]} actors, orrery list actors --json ${#actor_ids[@]}"
else
  echo "ok: the ${#actor_ids[@]} actors of orrery list actors"
fi

step "the placement groups and jobs pages"
dump placement_groups /placement-groups
grep -qE 'id="placement-groups-table"|id="placement-groups-table-empty"' "$pages/placement_groups.html" ||
  check_failed "the placement groups page draws neither a table nor its empty message"
dump jobs /jobs
grep -q 'id="jobs-table"' "$pages/jobs.html" || check_failed "the jobs page has no #jobs-table"
grep -q 'train_linear</code>' "$pages/jobs.html" || check_failed "the jobs page does not show train_linear's job"

step "the runs page"
dump runs /runs
grep -q 'id="runs-table"' "$pages/runs.html" || check_failed "the runs page has no #runs-table"
grep -q "data-run-id=\"$run_id\"" "$pages/runs.html" || check_failed "the runs page does not list run $run_id"
grep -q "href=\"/runs/$run_id\">train_linear<" "$pages/runs.html" || check_failed "the runs page has no link train_linear -> /runs/$run_id"

step "the run page"
dump run "/runs/$run_id"
grep -q 'id="plot-loss"' "$pages/run.html" || check_failed "the run page has no #plot-loss"
n=$(count '<circle class="point" data-metric="loss"' "$pages/run.html")
[[ "$n" -eq 60 ]] || check_failed "the run page plots $n loss points, expected 60"
echo "loss points: $n"
n=$(count '<tr data-rank="[0-9]+"' "$pages/run.html")
[[ "$n" -eq 4 ]] || check_failed "the run page's #workers-table has $n workers, expected 4"
grep -q 'id="workers-table"' "$pages/run.html" || check_failed "the run page has no #workers-table"
grep -q 'id="run-config"' "$pages/run.html" || check_failed "the run page does not show the config"
grep -q 'id="checkpoints-table"' "$pages/run.html" || check_failed "the run page does not show the checkpoints"

step "a screenshot of the run page"
chrome --window-size=1280,1400 --hide-scrollbars --screenshot="$tmp/dashboard-run.png" "$dashboard/runs/$run_id" >/dev/null ||
  check_failed "chromium --screenshot failed"
if [[ -s "$tmp/dashboard-run.png" ]]; then
  echo "ok: $(wc -c <"$tmp/dashboard-run.png") bytes"
  if [[ -n "${ORRERY_DASHBOARD_SCREENSHOT:-}" ]]; then
    cp "$tmp/dashboard-run.png" "$ORRERY_DASHBOARD_SCREENSHOT"
    echo "copied to $ORRERY_DASHBOARD_SCREENSHOT"
  fi
else
  check_failed "no screenshot written"
fi

# 5. Logging in with a browser, to a dashboard bound to every interface. It finds the
# session's token itself (the session whose Redis it serves).
step "orrery dashboard --host 0.0.0.0: the login page, then the one-time URL"
orrery_bg dashboard --host 0.0.0.0 --port 0 --ready-file "$tmp/auth_dashboard.ready" >"$tmp/auth_dashboard.log" 2>&1
wait_ready "$tmp/auth_dashboard.ready" "$!" 15 "$tmp/auth_dashboard.log"
grep -q 'login?ticket=' "$tmp/auth_dashboard.log" ||
  fail "orrery dashboard --host 0.0.0.0 printed no one-time URL: $(cat "$tmp/auth_dashboard.log")"
auth_port=$(ready_field "$tmp/auth_dashboard.ready" port)
auth_ticket=$(grep -o 'login?ticket=[0-9a-f]*' "$tmp/auth_dashboard.log" | head -1)
auth_base="http://127.0.0.1:$auth_port"
mkdir -p "$tmp/chrome-login"
chrome_profile="$tmp/chrome-login" chrome --dump-dom "$auth_base/" >"$pages/login.html" || true
grep -q 'id="login"' "$pages/login.html" || check_failed "without a login the browser did not get the login page"
grep -q 'id="nodes-alive"' "$pages/login.html" && check_failed "without a login the browser got the overview"
chrome_profile="$tmp/chrome-login" chrome --dump-dom "$auth_base/$auth_ticket" >"$pages/after_login.html" || true
grep -qE 'id="nodes-alive">3<' "$pages/after_login.html" ||
  check_failed "the one-time URL did not lead to the overview with 3 alive nodes"
chrome_profile="$tmp/chrome-login" chrome --dump-dom "$auth_base/nodes" >"$pages/nodes_cookie.html" || true
grep -q 'id="nodes-table"' "$pages/nodes_cookie.html" ||
  check_failed "the session cookie did not open /nodes in the next browser run"
echo "ok: login page, one-time URL, cookie"

# 6. Redis gone: the page stays up and says why it is empty.
step "Redis killed: the overview shows the Redis banner"
redis_pid=$(python3 - "$head_session/session.json" <<'EOF'
import json, os, sys
for p in json.load(open(sys.argv[1]))["pids"]:
    try:
        if "redis-server" in open(f"/proc/{p}/cmdline").read():
            print(p)
    except OSError:
        pass
EOF
)
if [[ -z "$redis_pid" ]]; then
  check_failed "no redis-server pid in $head_session/session.json"
else
  kill -KILL "$redis_pid"
  wait_gone 10 "$redis_pid" >/dev/null || fail "redis-server $redis_pid did not die"
  dump overview_no_redis /
  grep -q 'id="redis-banner"' "$pages/overview_no_redis.html" ||
    check_failed "with Redis killed, the overview shows no #redis-banner"
  grep -q 'id="nodes-alive">0<' "$pages/overview_no_redis.html" ||
    check_failed "with Redis killed, the overview does not show 0 alive nodes"
fi

echo
if [[ ${#failures[@]} -gt 0 ]]; then
  for f in "$pages"/*.html; do
    echo "--- $(basename "$f"): $(grep -o '<main id="content">.\{0,600\}' "$f" | head -c 600)"
  done
  echo "FAIL: ${#failures[@]} check(s) failed:" >&2
  printf '  - %s\n' "${failures[@]}" >&2
  exit 1
fi
echo "PASS: the dashboard in a browser"
