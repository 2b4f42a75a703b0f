# shellcheck shell=bash
# Shared by the e2e tests that start clusters with the `orrery` command. Source it first;
# e2e_args sets build_dir and orrery_bin from the test's arguments, and the functions that
# touch sessions use
#   sessions    this test's ORRERY_TMPDIR (a fresh directory)
# It defines step/fail/check_failed, `orrery` (the command with this test's session root),
# and stop_session, which stops everything the test started (for the test's EXIT trap).

# Usage: e2e_args "$@" with the test's one argument, the build directory.
e2e_args() {
  if [[ $# -ne 1 ]]; then
    echo "usage: $0 <build dir>" >&2
    exit 2
  fi
  build_dir=$(cd "$1" && pwd)
  orrery_bin="$build_dir/cli/orrery"
}

# Fails the test unless every argument is a built executable.
require_built() {
  local f
  for f in "$@"; do
    if [[ ! -x "$f" ]]; then
      echo "FAIL: $f is not built" >&2
      exit 1
    fi
  done
}

# Fails the test unless every argument is a command on PATH.
require_tools() {
  local tool
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "FAIL: $tool is not on PATH (scripts/setup.sh installs it)" >&2
      exit 1
    fi
  done
}

step() { printf '\n==> %s\n' "$*"; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# A failed check after which the rest of the test still means something: reported at
# once, and the test fails at the end.
failures=()
check_failed() {
  echo "FAIL: $*" >&2
  failures+=("$*")
}

# Runs the CLI (or a driver) with this test's session root. ORRERY_TMPDIR is set only in
# these children, never in this shell, so a process whose environment holds it was started
# by this test (the daemons, zygotes and workers inherit it).
# shellcheck disable=SC2154  # sessions: set by the test that sources this file
orrery() { ORRERY_TMPDIR="$sessions" "$orrery_bin" "$@"; }
# `orrery ... &` would put a bash subshell (running the function) in $!, not the daemon, and
# killing that subshell leaves the daemon running. `orrery_bg ARGS...` starts the command
# itself in the background, so $! afterwards is the daemon's pid. Redirections given to
# orrery_bg apply to the daemon.
orrery_bg() { ORRERY_TMPDIR="$sessions" "$orrery_bin" "$@" & }

# Pids recorded in this test's session files (Redis, head, node, dashboard).
session_pids() {
  local f
  for f in "$sessions"/session_*/session.json; do
    [[ -f "$f" && ! -L "$(dirname "$f")" ]] || continue
    python3 -c 'import json,sys; print("\n".join(str(p) for p in json.load(open(sys.argv[1]))["pids"]))' "$f"
  done | sort -un
}

# Alive and not a zombie (a zombie waits for its reaper; it runs nothing).
alive() {
  local state
  kill -0 "$1" 2>/dev/null || return 1
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || echo X)
  [[ "$state" != "Z" && "$state" != "X" ]]
}

# Processes whose environment holds this test's ORRERY_TMPDIR (excluding this shell).
marked_pids() {
  local d pid marker="ORRERY_TMPDIR=$sessions"
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [[ "$pid" == "$$" || "$pid" == "$BASHPID" ]] && continue
    if { tr '\0' '\n' <"$d/environ"; } 2>/dev/null | grep -qxF "$marker"; then
      alive "$pid" && echo "$pid"
    fi
  done
  return 0
}

# Waits until none of the given pids is alive; prints the survivors on timeout.
wait_gone() {
  local deadline=$((SECONDS + $1)) pid left
  shift
  while true; do
    left=()
    for pid in "$@"; do alive "$pid" && left+=("$pid"); done
    [[ ${#left[@]} -eq 0 ]] && return 0
    if ((SECONDS >= deadline)); then
      echo "${left[*]}"
      return 1
    fi
    sleep 0.1
  done
}

# The last lines of every daemon log of this test's sessions (after a failure).
print_session_logs() {
  local f
  for f in "$sessions"/session_*/logs/*.log; do
    [[ -f "$f" ]] || continue
    echo "--- last lines of ${f#"$sessions/"}"
    tail -n 20 "$f"
  done
}

# Fails (prints the survivors and returns 1) when a process this test started still runs
# after stop_session: a leak that would outlive the test run.
check_none_left() {
  local -a marked
  local left
  mapfile -t marked < <(marked_pids)
  [[ ${#marked[@]} -eq 0 ]] && return 0
  # Processes that are exiting (a zygote after its node) get a few seconds.
  left=$(wait_gone 5 "${marked[@]}") && return 0
  echo "FAIL: processes of this test still run after it stopped them: $left" >&2
  ps -o pid=,args= -p "${left// /,}" 2>/dev/null | sed 's/^/  /' >&2
  return 1
}

# `orrery stop`, then TERM (and after 5 s KILL) whatever this test started that still runs.
stop_session() {
  local pids pid
  orrery stop >/dev/null 2>&1
  mapfile -t pids < <(session_pids; marked_pids)
  if [[ ${#pids[@]} -gt 0 ]]; then
    for pid in "${pids[@]}"; do alive "$pid" && kill -TERM "$pid" 2>/dev/null; done
    if ! wait_gone 5 "${pids[@]}" >/dev/null; then
      for pid in "${pids[@]}"; do alive "$pid" && kill -KILL "$pid" 2>/dev/null; done
    fi
  fi
  return 0
}

# Makes the test's directory ($tmp, with the session root $sessions in it) and installs the
# usual clean-up: on any exit, the session's logs when the test failed, then its processes
# stopped and the directory removed (kept with ORRERY_KEEP_TMP=1 when the test failed).
# Usage: start_test_session NAME.
start_test_session() {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/orrery_e2e_$1.XXXXXX")
  sessions="$tmp/sessions"
  mkdir -p "$sessions"
  trap cleanup_test_session EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

cleanup_test_session() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  [[ $rc -ne 0 ]] && print_session_logs
  stop_session
  # ORRERY_KEEP_TMP=1 keeps a failed test's directory for a post-mortem.
  if [[ $rc -ne 0 && -n "${ORRERY_KEEP_TMP:-}" ]]; then
    echo "kept $tmp"
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
}

# Waits until `$2...` (a command) succeeds, for at most $1 seconds.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}
# Waits (at most $3 seconds) until the daemon $2 writes its readiness file $1 (docs/cli.md
# "Readiness files": {"pid","address","port"} once it serves). Fails the test, with the last
# lines of the daemon's log $4, when the daemon exits first or the deadline passes.
wait_ready() {
  local file=$1 pid=$2 deadline=$((SECONDS + $3)) log=$4
  until [[ -f "$file" ]]; do
    if ! alive "$pid"; then
      echo "--- last lines of $log" >&2
      tail -n 20 "$log" >&2
      fail "process $pid exited before it was ready ($file)"
    fi
    ((SECONDS < deadline)) || fail "process $pid was not ready within $3 s ($file)"
    sleep 0.1
  done
}
# The field $2 of the readiness file (or any JSON object file) $1.
ready_field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# Starts redis-server on a loopback port (extra arguments: "$@" after the log file $1) and
# waits until it serves; sets redis_port and redis_pid. Redis cannot bind an ephemeral port
# and report it, so a port is chosen here: when another process takes it first, redis-server
# exits and another port is tried (5 times at most).
start_redis() {
  local log=$1 attempt deadline
  shift
  for attempt in 1 2 3 4 5; do
    redis_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    redis-server --port "$redis_port" --bind 127.0.0.1 "$@" >>"$log" 2>&1 &
    redis_pid=$!
    deadline=$((SECONDS + 15))
    while alive "$redis_pid"; do
      # Ours when it answers PING and names our pid (not another process on that port).
      if [[ "$(redis-cli -p "$redis_port" PING 2>/dev/null)" == PONG ]] &&
        redis-cli -p "$redis_port" INFO server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$redis_pid"; then
        return 0
      fi
      ((SECONDS < deadline)) || fail "redis-server was not ready within 15 s; see $log"
      sleep 0.1
    done
    wait "$redis_pid" 2>/dev/null || true
    echo "redis-server exited on port $redis_port (attempt $attempt); trying another port" >&2
  done
  tail -n 20 "$log" >&2
  fail "redis-server did not start"
}

# For a test that starts daemons itself and keeps their pids in the array `pids` (their
# logs in $tmp): makes $tmp and $sessions and installs a clean-up that, on any exit, shows
# the logs when the test failed, stops the session and the daemons (TERM, then KILL after
# 5 s), fails the test if any of its processes outlived that, and removes $tmp.
# Usage: start_daemon_test NAME.
start_daemon_test() {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/orrery_e2e_$1.XXXXXX")
  sessions="$tmp/sessions"
  mkdir -p "$sessions"
  pids=()
  trap cleanup_daemon_test EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

cleanup_daemon_test() {
  local rc=$? pid f
  trap - EXIT INT TERM
  set +e
  if [[ $rc -ne 0 ]]; then
    for f in "$tmp"/*.log "$sessions"/session_*/logs/*.log; do
      [[ -f "$f" ]] || continue
      echo "--- last lines of $f"
      tail -n 20 "$f"
    done
  fi
  orrery stop >/dev/null 2>&1
  for pid in "${pids[@]}"; do alive "$pid" && kill -TERM "$pid"; done
  for pid in "${pids[@]}"; do
    wait_for 5 bash -c "! kill -0 $pid 2>/dev/null" || kill -KILL "$pid" 2>/dev/null
  done
  # Checked before stop_session's catch-all, so that a daemon the test lost track of fails it.
  check_none_left || rc=1
  stop_session
  rm -rf "$tmp"
  exit "$rc"
}

# Docker for the tests that use it (docker_test.sh, deb_package_test.sh): uses the running
# dockerd, else starts one marked as this test's (ORRERY_TMPDIR: stop_session ends whatever
# of it and its containerd outlives stop_own_dockerd) and sets dockerd_pid; exits 77 when
# it cannot start. Their ctest entries share the resource lock "docker".
dockerd_pid=""
ensure_dockerd() {
  local deadline
  if docker info >/dev/null 2>&1; then
    echo "using the running dockerd ($(docker info -f '{{.ServerVersion}}'))"
    return 0
  fi
  ORRERY_TMPDIR="$sessions" dockerd --pidfile "$tmp/dockerd.pid" >"$tmp/dockerd.log" 2>&1 &
  dockerd_pid=$!
  deadline=$((SECONDS + 60))
  until docker info >/dev/null 2>&1; do
    if ! alive "$dockerd_pid" || ((SECONDS >= deadline)); then
      tail -n 20 "$tmp/dockerd.log"
      echo "SKIP: dockerd could not start here (its log above)"
      exit 77
    fi
    sleep 0.2
  done
  echo "started dockerd $(docker info -f '{{.ServerVersion}}') (pid $dockerd_pid)"
}

# Stops the dockerd that ensure_dockerd started, if it did.
stop_own_dockerd() {
  if [[ -n "$dockerd_pid" ]] && alive "$dockerd_pid"; then
    kill -TERM "$dockerd_pid"
    wait_gone 60 "$dockerd_pid" >/dev/null || kill -KILL "$dockerd_pid"
  fi
}
