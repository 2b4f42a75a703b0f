#!/usr/bin/env bash
# Jobs and logs as a user sees them (docs/jobs.md, docs/logs.md), on one machine:
#   1. orrery start --head --port 0 --num-cpus 2 --no-dashboard, and a second node labelled
#      pool=b
#   2. a driver run by hand with ORRERY_ADDRESS: its actor's std::cout and std::cerr lines
#      reach the driver's stdout and stderr, prefixed "(Speaker pid=N, node=xxxxxx)"
#   3. orrery job submit -- ./driver exit 3, from another directory: the job's output (with
#      the actor's prefixed line) comes back and the command exits 3; job status says
#      FAILED with exit code 3; job list and job logs know it
#   4. orrery logs --actor ID finds the actor's lines; exit 0 gives SUCCEEDED and 0
#   4b. a job that prints 32 MiB as fast as it can: orrery job submit prints its last line,
#      and every line it did not print is counted in notes on stderr (the counts and the
#      lines printed add up to the lines written); orrery job logs shows the notes too
#   5. a sleeping job submitted --no-wait is RUNNING, `orrery list workers --job` shows its
#      driver, `orrery list tasks` its finished and failed tasks (the dashboard's
#      /api/workers and /api/tasks too), then it is STOPPED by orrery job stop
#   6. a job pinned to the second node (--label pool=b) is FAILED naming the node once that
#      node is killed with SIGKILL
#   4c. a job submitted with --env K=V --working-dir DIR sees the variable and starts there
#   5b. a job that waits for a resource while its --working-dir is moved away starts in its
#      node's copy of the folder, fetched from the head
#   7. bad input: unknown job ids, a missing executable, malformed --resources, --label and
#      --env, a --working-dir that is no folder, resources no node has: a clear message
#      and a non-zero exit each
# Usage: jobs_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/e2e/session_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/session_lib.sh"
e2e_args "$@"
driver_bin="$build_dir/tests/e2e/e2e_job_driver"
require_built "$orrery_bin" "$driver_bin"
require_tools redis-server python3 curl

start_test_session jobs

json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1]))' "$1"; }
job_state() { orrery job status "$1" --json 2>/dev/null | json_field state; }
state_is() { [[ "$(job_state "$1")" == "$2" ]]; }

step "orrery start --head (with a dashboard), and a second node labelled pool=b"
orrery start --head --port 0 --num-cpus 2 --dashboard-port 0 | tee "$tmp/start_head.out"
dashboard=$(sed -n 's|^  Dashboard: *\(http://127\.0\.0\.1:[0-9]*\).*|\1|p' "$tmp/start_head.out")
[[ -n "$dashboard" ]] || fail "no dashboard URL in the output of orrery start --head"
head_address=$(sed -n 's/^Orrery head started at \([^ ]*\) .*/\1/p' "$tmp/start_head.out")
[[ "$head_address" =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "no head address in the output of orrery start --head"
orrery start --address "$head_address" --num-cpus 1 --labels pool=b --resources '{"Slot": 1}' >/dev/null

step "a driver run by hand prints its actor's lines with their prefix"
ORRERY_TMPDIR="$sessions" ORRERY_ADDRESS="$head_address" timeout 60 "$driver_bin" exit 0 \
  >"$tmp/direct.out" 2>"$tmp/direct.err" || fail "the driver run by hand failed: $(tail -5 "$tmp/direct.err")"
cat "$tmp/direct.out"
grep -qE '^\(Speaker pid=[0-9]+, node=[0-9a-f]{6}\) speaker says hello$' "$tmp/direct.out" ||
  fail "the actor's std::cout line did not reach the driver's stdout with its prefix"
grep -qE '^\(Speaker pid=[0-9]+, node=[0-9a-f]{6}\) speaker warns hello$' "$tmp/direct.err" ||
  fail "the actor's std::cerr line did not reach the driver's stderr with its prefix"
ORRERY_TMPDIR="$sessions" ORRERY_ADDRESS="$head_address" ORRERY_LOG_TO_DRIVER=0 timeout 60 \
  "$driver_bin" exit 0 >"$tmp/quiet.out" 2>&1 || true
if grep -q 'speaker says' "$tmp/quiet.out"; then
  fail "ORRERY_LOG_TO_DRIVER=0 still printed the actor's lines"
fi

step "orrery job submit -- ./driver exit 3, from another directory"
mkdir -p "$tmp/elsewhere"
cp "$driver_bin" "$tmp/elsewhere/driver"
rc=0
(cd "$tmp/elsewhere" && ORRERY_TMPDIR="$sessions" timeout 120 "$orrery_bin" job submit -- ./driver exit 3) \
  >"$tmp/submit.out" 2>"$tmp/submit.err" || rc=$?
cat "$tmp/submit.out" "$tmp/submit.err"
[[ $rc -eq 3 ]] || fail "orrery job submit exited $rc, expected the job's exit code 3"
job_id=$(sed -n 's/^orrery: job \(job_[0-9a-f]*\) submitted$/\1/p' "$tmp/submit.err")
[[ -n "$job_id" ]] || fail "orrery job submit did not print the job id"
actor_id=$(sed -n 's/^driver called actor \([0-9a-f]*\)$/\1/p' "$tmp/submit.out")
[[ -n "$actor_id" ]] || fail "the job's own output did not come back"
grep -qE '^\(Speaker pid=[0-9]+, node=[0-9a-f]{6}\) speaker says hello$' "$tmp/submit.out" ||
  fail "the actor's line did not come back in the job's output"
grep -q "job $job_id RUNNING" "$tmp/submit.err" || check_failed "no RUNNING state change printed"
grep -q "job $job_id FAILED" "$tmp/submit.err" || check_failed "no FAILED state change printed"

step "orrery job status, list and logs"
orrery job status "$job_id" --json | tee "$tmp/status.json"
[[ "$(json_field state <"$tmp/status.json")" == FAILED ]] || fail "job $job_id is not FAILED"
[[ "$(json_field exit_code <"$tmp/status.json")" == 3 ]] || fail "job $job_id has no exit code 3"
orrery job list | grep -q "$job_id" || fail "orrery job list does not show $job_id"
orrery job logs "$job_id" >"$tmp/logs.out"
grep -q "driver called actor $actor_id" "$tmp/logs.out" || fail "orrery job logs lacks the job's output"

step "orrery logs --actor finds the actor's lines"
orrery logs --actor "$actor_id" >"$tmp/actor_logs.out" 2>&1
cat "$tmp/actor_logs.out"
grep -qE '^\(Speaker pid=[0-9]+, node=[0-9a-f]{6}\) speaker says hello$' "$tmp/actor_logs.out" ||
  fail "orrery logs --actor $actor_id did not find the actor's line"
if orrery logs --actor 0000ffff >"$tmp/none.out" 2>&1 && grep -q speaker "$tmp/none.out"; then
  fail "orrery logs --actor with another id printed this actor's lines"
fi

step "a job that exits 0 SUCCEEDED"
rc=0
(cd "$tmp/elsewhere" && ORRERY_TMPDIR="$sessions" timeout 120 "$orrery_bin" job submit -- ./driver exit 0) \
  >"$tmp/ok.out" 2>"$tmp/ok.err" || rc=$?
[[ $rc -eq 0 ]] || fail "a job exiting 0 made orrery job submit exit $rc: $(cat "$tmp/ok.err")"
ok_id=$(sed -n 's/^orrery: job \(job_[0-9a-f]*\) submitted$/\1/p' "$tmp/ok.err")
state_is "$ok_id" SUCCEEDED || fail "job $ok_id is $(job_state "$ok_id"), not SUCCEEDED"

step "a job with --env and --working-dir starts with that variable, in that folder"
mkdir -p "$tmp/job wd"
job_wd=$(cd "$tmp/job wd" && pwd -P)  # as the driver's getcwd() will say it
rc=0
(cd "$tmp/elsewhere" && ORRERY_TMPDIR="$sessions" timeout 120 "$orrery_bin" job submit \
  --env JOB_ENV_TEST=hello --working-dir "$job_wd" -- ./driver env) \
  >"$tmp/env.out" 2>"$tmp/env.err" || rc=$?
[[ $rc -eq 0 ]] || fail "the job with --env exited $rc: $(cat "$tmp/env.err")"
grep -qxF "env JOB_ENV_TEST=hello cwd=$job_wd" "$tmp/env.out" ||
  fail "the job did not see its --env and --working-dir: $(cat "$tmp/env.out")"

step "a flood of output: the last line comes back and what did not is counted"
flood_mib=32
flood_lines=$((flood_mib * 1048576 / 100 + 1))
rc=0
(cd "$tmp/elsewhere" && ORRERY_TMPDIR="$sessions" timeout 120 "$orrery_bin" job submit -- ./driver flood "$flood_mib") \
  >"$tmp/flood.out" 2>"$tmp/flood.err" || rc=$?
[[ $rc -eq 0 ]] || fail "the flooding job made orrery job submit exit $rc: $(tail -5 "$tmp/flood.err")"
[[ "$(tail -n 1 "$tmp/flood.out")" == "the flood's last line" ]] ||
  fail "orrery job submit did not print the job's last line; it ended with: $(tail -n 1 "$tmp/flood.out")"
printed=$(grep -c '^line [0-9]* x*$' "$tmp/flood.out" || true)
noted=$(sed -n 's/^\[orrery\] \([0-9]*\) line(s) of stdout not forwarded .*/\1/p' "$tmp/flood.err" |
  awk '{ n += $1 } END { print n + 0 }')
echo "flood: $printed line(s) printed, $noted noted as not forwarded, of $flood_lines"
[[ $noted -gt 0 ]] || fail "orrery job submit printed no note of the lines it did not forward"
[[ $((printed + noted + 1)) -eq $flood_lines ]] ||
  fail "printed ($printed) and noted ($noted) lines do not add up to the $flood_lines written"
flood_id=$(sed -n 's/^orrery: job \(job_[0-9a-f]*\) submitted$/\1/p' "$tmp/flood.err")
orrery job logs "$flood_id" >"$tmp/flood_logs.out" 2>&1
grep -q 'line(s) of stdout not forwarded' "$tmp/flood_logs.out" ||
  fail "orrery job logs does not show the note of the lines not forwarded"

step "orrery job stop"
sleep_id=$(cd "$tmp/elsewhere" && ORRERY_TMPDIR="$sessions" "$orrery_bin" job submit --no-wait -- ./driver sleep 300 2>/dev/null)
[[ "$sleep_id" =~ ^job_[0-9a-f]+$ ]] || fail "--no-wait printed '$sleep_id', not a job id"
wait_for 30 state_is "$sleep_id" RUNNING || fail "job $sleep_id is $(job_state "$sleep_id"), not RUNNING"
orrery list workers --job "$sleep_id" --json | tee "$tmp/workers.json"
python3 - "$tmp/workers.json" "$sleep_id" <<'PY' || fail "orrery list workers does not show the running job's driver"
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 1, rows
r = rows[0]
assert r["kind"] == "job" and r["state"] == "BUSY" and r["job_id"] == sys.argv[2] and r["pid"] > 0, r
PY
orrery list workers | grep -q ' job ' || fail "orrery list workers (text) does not list the job's driver"
wait_for 30 bash -c "ORRERY_TMPDIR='$sessions' '$orrery_bin' list tasks --json > '$tmp/tasks.json' && grep -q FAILED '$tmp/tasks.json'" ||
  fail "orrery list tasks never showed the sleeping job's failed task"
python3 - "$tmp/tasks.json" <<'PY' || fail "orrery list tasks is wrong"
import json, sys
rows = json.load(open(sys.argv[1]))
twice = [r for r in rows if "Twice" in r["name"]]
assert sorted(r["state"] for r in twice) == ["FAILED", "FINISHED"], rows
assert [r["error"] for r in twice if r["state"] == "FAILED"] == ["RemoteError"], twice
assert all(r["kind"] == "task" and len(r["task_id"]) == 32 for r in twice), twice
PY
orrery list tasks --state FINISHED | grep -q Twice || fail "orrery list tasks --state FINISHED lacks the finished task"
curl -sf "$dashboard/api/workers?job=$sleep_id" >"$tmp/api_workers.json" || fail "GET /api/workers failed"
curl -sf "$dashboard/api/tasks?state=FAILED" >"$tmp/api_tasks.json" || fail "GET /api/tasks failed"
python3 - "$tmp/api_workers.json" "$tmp/api_tasks.json" "$sleep_id" <<'PY' || fail "the dashboard's /api/workers or /api/tasks is wrong"
import json, sys
workers = json.load(open(sys.argv[1]))
assert workers["redis"]["ok"] and workers["errors"] == [], workers
assert [w["kind"] for w in workers["workers"]] == ["job"] and workers["workers"][0]["job_id"] == sys.argv[3], workers
tasks = json.load(open(sys.argv[2]))
assert [t["state"] for t in tasks["tasks"] if "Twice" in t["name"]] == ["FAILED"], tasks
PY
if orrery list tasks --state FINISHED | grep -q FAILED; then fail "--state FINISHED listed a failed task"; fi
orrery job stop "$sleep_id"
wait_for 20 state_is "$sleep_id" STOPPED || fail "job $sleep_id is $(job_state "$sleep_id") after orrery job stop"
orrery job status "$sleep_id" | grep -q "signal 15 (Terminated)" ||
  fail "orrery job stop did not end the driver with SIGTERM: $(orrery job status "$sleep_id")"

step "a job whose --working-dir its node cannot see starts in a copy from the head"
mkdir -p "$tmp/shipped wd/sub"
echo "from the submitter" >"$tmp/shipped wd/marker.txt"
hold_id=$(cd "$tmp/elsewhere" && ORRERY_TMPDIR="$sessions" "$orrery_bin" job submit --no-wait \
  --resources '{"Slot": 1}' -- ./driver sleep 300 2>/dev/null)
wait_for 30 state_is "$hold_id" RUNNING || fail "job $hold_id is $(job_state "$hold_id"), not RUNNING"
ship_id=$(cd "$tmp/elsewhere" && ORRERY_TMPDIR="$sessions" "$orrery_bin" job submit --no-wait \
  --resources '{"Slot": 1}' --env JOB_ENV_TEST=shipped --working-dir "$tmp/shipped wd" \
  -- ./driver env 2>/dev/null)
state_is "$ship_id" PENDING || fail "job $ship_id is $(job_state "$ship_id"), not PENDING behind $hold_id"
mv "$tmp/shipped wd" "$tmp/shipped wd.moved"  # no node sees the submitted folder any more
orrery job stop "$hold_id"
wait_for 60 state_is "$ship_id" SUCCEEDED || fail "job $ship_id is $(job_state "$ship_id"): $(orrery job status "$ship_id")"
orrery job logs "$ship_id" | tee "$tmp/shipped.out"
grep -qE "^env JOB_ENV_TEST=shipped cwd=.*/working_dirs/[0-9a-f]{64}$" "$tmp/shipped.out" ||
  fail "the job did not start in its node's copy of the working_dir"
grep -qxF "marker=from the submitter" "$tmp/shipped.out" || fail "the copy of the working_dir lacks its file"

step "a job whose node dies is FAILED, naming the node"
pinned_id=$(cd "$tmp/elsewhere" && ORRERY_TMPDIR="$sessions" "$orrery_bin" job submit --no-wait --label pool=b -- ./driver sleep 300 2>/dev/null)
wait_for 30 state_is "$pinned_id" RUNNING || fail "job $pinned_id is $(job_state "$pinned_id"), not RUNNING"
node_b=$(orrery job status "$pinned_id" --json | json_field node_id)
node_pid=""
for f in "$sessions"/session_*/session.json; do
  # The second node's session is the one without Redis.
  pid=$(python3 -c 'import json,sys; v=json.load(open(sys.argv[1])).get("values", {}); print(v.get("node_pid", "") if not v.get("redis_address") else "")' "$f")
  [[ -n "$pid" ]] && node_pid=$pid
done
[[ -n "$node_pid" ]] || fail "no pid for the second node in the session files"
kill -KILL "$node_pid"
wait_for 30 state_is "$pinned_id" FAILED || fail "job $pinned_id is $(job_state "$pinned_id") after its node was killed"
orrery job status "$pinned_id" | grep -q "node ${node_b:0:12} died" || fail "the FAILED job does not name its dead node"

step "bad input"
expect_error() {  # expect_error PATTERN CMD...: non-zero exit, PATTERN in its stderr
  local pattern=$1 rc=0
  shift
  (cd "$tmp/elsewhere" && ORRERY_TMPDIR="$sessions" "$orrery_bin" "$@") >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
  echo "orrery $* -> exit $rc: $(head -c 300 "$tmp/bad.err")"
  [[ $rc -ne 0 ]] || check_failed "orrery $* exited 0"
  grep -q -- "$pattern" "$tmp/bad.err" || check_failed "orrery $* did not say '$pattern'"
}
expect_error "no job job_0000" job status job_0000
expect_error "no job job_0000" job logs job_0000
expect_error "no job job_0000" job stop job_0000
expect_error "not an executable file" job submit -- ./no_such_driver
expect_error "\-\-resources" job submit --resources '{bad' -- ./driver
expect_error "\-\-resources" job submit --resources '{"CPU": -1}' -- ./driver
expect_error "\-\-label" job submit --label nolabel -- ./driver
expect_error "can never run" job submit --resources '{"GPU": 64}' -- ./driver
expect_error "expected NAME=VALUE" job submit --env novalue -- ./driver
expect_error "runtime's own" job submit --env ORRERY_ADDRESS=elsewhere -- ./driver
expect_error "no_such_folder" job submit --working-dir "$tmp/no_such_folder" -- ./driver

if [[ ${#failures[@]} -gt 0 ]]; then
  fail "${#failures[@]} check(s) failed"
fi
echo "PASS"
