#!/usr/bin/env bash
# The Docker image and the compose cluster (docs/docker.md), with Debian's docker-compose:
#   1. dockerd: the running one, else one this test starts (and stops at the end)
#   2. the runtime base image (docker/make-base-image.sh: debootstrap + docker import),
#      reused when it exists, and this build installed on it (docker/stage.sh,
#      docker/Dockerfile.prebuilt) as an image of this test's own
#   3. docker/docker-compose.yml under a project name of its own, with its own token and
#      Redis password and a free /24: redis (the project's image), head, dashboard, node1,
#      node2; the network is internal and nothing is published on the host
#   4. authentication: Redis refuses commands without the password, the dashboard answers
#      401 without the token and 200 with it, a driver without the token is refused
#   5. from the driver container: hello_actors, train_linear (4 workers over both nodes),
#      and tests/e2e/docker_counter_driver, which leaves a detached actor at 5; the
#      dashboard's /api/workers (it asks the nodes) lists that actor's worker
#   6. `docker kill` of the head container, `docker-compose start head`: the same two nodes
#      alive, the same actor answers 6, train_linear and hello_actors run again
#   7. `docker-compose stop`: every container exits 0; `down -v`; then no container,
#      network or volume of the project is left, and the test's image is removed
# Exits 77 (reported as skipped) when docker, dockerd, docker-compose or debootstrap is
# missing, when not root, when dockerd cannot start, or when Debian's archive cannot be
# reached for the base image. The base image is kept (orrery-base:bookworm-<hash>) for the
# next run. Only the containers, network and volume this test made are touched.
# Usage: docker_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/e2e/session_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/session_lib.sh"
e2e_args "$@"
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
counter_driver="$build_dir/tests/e2e/docker_counter_driver"
examples=/usr/local/libexec/orrery/examples

skip() {
  echo "SKIP: $*"
  exit 77
}
for tool in docker dockerd docker-compose debootstrap; do
  command -v "$tool" >/dev/null 2>&1 ||
    skip "$tool is not installed (Debian: apt-get install docker.io docker-compose debootstrap)"
done
[[ $(id -u) -eq 0 ]] || skip "not root (dockerd and debootstrap need root)"
require_built "$orrery_bin" "$build_dir/examples/hello_actors" "$build_dir/examples/train_linear" \
  "$counter_driver"
require_tools python3 curl

start_test_session docker
t0=$SECONDS
timing() { printf '    (%s: %d s)\n' "$1" "$((SECONDS - $2))"; }

project=orrerye2e$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
image="orrery-e2e:$project"
compose_dir="$tmp/compose"
compose_up=0
image_built=0

# What this test made in Docker goes first, then the dockerd it started, then the rest of
# the session (cleanup_test_session).
cleanup_docker() {
  local rc=$?
  set +e
  if [[ $rc -ne 0 && $compose_up -eq 1 ]]; then
    echo "--- the cluster's logs (last lines)"
    compose logs --no-color --tail=20 2>&1
  fi
  if [[ $compose_up -eq 1 ]]; then
    compose down -v --remove-orphans --timeout 20 >/dev/null 2>&1
  fi
  [[ $image_built -eq 1 ]] && docker image rm "$image" >/dev/null 2>&1
  stop_own_dockerd
  (exit "$rc")
  cleanup_test_session
}
trap cleanup_docker EXIT

step "dockerd"
ensure_dockerd

step "the base image (docker/make-base-image.sh)"
t=$SECONDS
base_rc=0
"$source_dir/docker/make-base-image.sh" >"$tmp/base.out" || base_rc=$?
[[ $base_rc -eq 3 ]] && skip "Debian's archive could not be reached to make the base image"
[[ $base_rc -eq 0 ]] || fail "docker/make-base-image.sh failed ($base_rc)"
base=$(tail -n 1 "$tmp/base.out")
docker image inspect "$base" >/dev/null || fail "make-base-image.sh printed $base, which is no image"
echo "$base, $(docker image inspect -f '{{.Size}}' "$base" | awk '{printf "%.0f MB", $1 / 1e6}')"
timing "base image" "$t"

step "this build installed on it (docker/stage.sh, docker/Dockerfile.prebuilt)"
t=$SECONDS
"$source_dir/docker/stage.sh" "$build_dir" "$tmp/stage"
install -D -s -m 755 "$counter_driver" "$tmp/stage/libexec/orrery/tests/docker_counter_driver"
image_built=1
DOCKER_BUILDKIT=0 docker build -q --network none -f "$source_dir/docker/Dockerfile.prebuilt" \
  --build-arg BASE="$base" -t "$image" "$tmp/stage" >/dev/null 2>"$tmp/build.err" || {
  cat "$tmp/build.err"
  fail "docker build of docker/Dockerfile.prebuilt failed"
}
echo "$image, $(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1 / 1e6}')"
timing "image" "$t"

# A /24 in 172.28.0.0/16 that no route of this host uses yet.
subnet=""
for _ in $(seq 50); do
  candidate="172.28.$((RANDOM % 254 + 1))"
  if ! ip -4 route 2>/dev/null | grep -qF "$candidate."; then
    subnet=$candidate
    break
  fi
done
[[ -n "$subnet" ]] || fail "found no free /24 in 172.28.0.0/16"

mkdir -p "$compose_dir"
cp "$source_dir/docker/docker-compose.yml" "$compose_dir/"
(
  umask 077
  for f in orrery-token redis-password; do
    od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$compose_dir/$f"
  done
)
token=$(cat "$compose_dir/orrery-token")
compose() {
  ORRERY_IMAGE="$image" ORRERY_SUBNET="$subnet" \
    docker-compose --ansi never -p "$project" -f "$compose_dir/docker-compose.yml" "$@"
}
# The CLI in the dashboard container (it stays up while the head is down).
cli() { compose exec -T dashboard orrery "$@" --address head:6380 --redis-address redis:6379; }
# A program in a new container of the driver service; its output in $tmp/$1.out.
run_driver() {
  local name=$1
  shift
  if ! compose run --rm driver timeout 180 "$@" >"$tmp/$name.out" 2>&1; then
    tail -n 30 "$tmp/$name.out"
    fail "$* failed in the driver container"
  fi
}
# Prints "node_id alive" for each node of `orrery status --json`, and "actor NAME STATE ID".
status_summary() {
  cli status --json >"$tmp/status.json" 2>"$tmp/status.err" || return 1
  python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
for n in sorted(s["nodes"], key=lambda n: n["node_id"]):
    print(n["node_id"], "alive" if n["alive"] else "dead")
for a in s["actors"]:
    if a.get("name"):
        print("actor", a["name"], a["state"], a["actor_id"])' "$tmp/status.json"
}
two_alive() {
  status_summary >"$tmp/summary" 2>/dev/null && [[ $(grep -c ' alive$' "$tmp/summary") -eq 2 ]]
}

step "docker-compose up: redis, head, dashboard, node1, node2 (project $project, $subnet.0/24)"
t=$SECONDS
compose_up=1
compose up -d --no-build >"$tmp/up.out" 2>&1 || {
  cat "$tmp/up.out"
  fail "docker-compose up failed"
}
wait_for 90 two_alive || {
  cat "$tmp/status.err" "$tmp/summary" 2>/dev/null
  fail "the two nodes were not alive within 90 s"
}
cat "$tmp/summary"
nodes_before=$(grep ' alive$' "$tmp/summary")
timing "cluster up" "$t"

step "the network is internal and nothing is published"
mapfile -t nets < <(docker network ls -q --filter "label=com.docker.compose.project=$project")
[[ ${#nets[@]} -eq 1 ]] || fail "expected one network of $project, found ${#nets[@]}"
for net in "${nets[@]}"; do
  [[ $(docker network inspect -f '{{.Internal}}' "$net") == true ]] ||
    fail "network $(docker network inspect -f '{{.Name}}' "$net") is not internal"
done
mapfile -t containers < <(compose ps -q)
[[ ${#containers[@]} -eq 5 ]] || fail "expected 5 containers of $project, found ${#containers[@]}"
for c in "${containers[@]}"; do
  [[ -z "$(docker port "$c")" ]] || fail "container $c publishes ports: $(docker port "$c")"
done
echo "ok"

step "authentication: Redis's password, the dashboard's token, a driver without the token"
compose exec -T redis redis-cli ping >"$tmp/noauth.out" 2>&1 || true
grep -q NOAUTH "$tmp/noauth.out" || fail "redis-cli without the password got: $(cat "$tmp/noauth.out")"
dashboard="http://$subnet.20:8265"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$dashboard/api/nodes")
[[ "$code" == 401 ]] || fail "the dashboard answered $code to /api/nodes without the token, expected 401"
code=$(curl -s -o "$tmp/nodes.json" -w '%{http_code}' --max-time 10 \
  -H "Authorization: Bearer $token" "$dashboard/api/nodes")
[[ "$code" == 200 ]] || fail "the dashboard answered $code to /api/nodes with the token, expected 200"
if compose run --rm -e ORRERY_TOKEN_FILE=/nonexistent driver timeout 60 \
  "$examples/hello_actors" >"$tmp/notoken.out" 2>&1; then
  fail "hello_actors ran without the cluster token"
fi
grep -qi token "$tmp/notoken.out" || {
  tail -n 5 "$tmp/notoken.out"
  fail "a driver without the token failed without naming the token"
}
echo "ok"

step "hello_actors and train_linear from the driver container"
t=$SECONDS
run_driver hello "$examples/hello_actors"
grep -q "^hello_actors: all good" "$tmp/hello.out" || fail "hello_actors did not say all good"
tail -n 1 "$tmp/hello.out"
run_driver train "$examples/train_linear"
grep -q "^ok: the loss fell" "$tmp/train.out" || fail "train_linear did not say ok"
tail -n 2 "$tmp/train.out"
run_driver counter1 /usr/local/libexec/orrery/tests/docker_counter_driver survivor 5
read -r name value actor_id < <(tail -n 1 "$tmp/counter1.out")
[[ "$name" == survivor && "$value" == 5 ]] || fail "docker_counter_driver printed: $(cat "$tmp/counter1.out")"
echo "detached actor survivor = 5 ($actor_id)"
# The dashboard asks both nodes for their workers (and gets the answers at its own address).
curl -fsS --max-time 30 -H "Authorization: Bearer $token" "$dashboard/api/workers" >"$tmp/workers.json" ||
  fail "the dashboard's /api/workers failed"
python3 - "$tmp/workers.json" "$actor_id" <<'EOF2' || fail "the dashboard's /api/workers: $(cat "$tmp/workers.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["errors"] == [], r["errors"]
assert sys.argv[2] in json.dumps(r["workers"]), "no worker of the actor"
EOF2
echo "the dashboard lists the actor's worker, from both nodes without error"
timing "drivers" "$t"

step "docker kill of the head container, then docker-compose start head"
head_container=$(compose ps -q head)
docker kill "$head_container" >/dev/null
head_stopped() { [[ $(docker inspect -f '{{.State.Running}}' "$head_container") == false ]]; }
wait_for 30 head_stopped ||
  fail "the head container still runs after docker kill"
echo "head container: $(docker inspect -f '{{.State.Status}}, exit code {{.State.ExitCode}}' "$head_container")"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 \
  -H "Authorization: Bearer $token" "$dashboard/api/nodes")
[[ "$code" == 200 ]] || fail "the dashboard answered $code while the head was down, expected 200"
t=$SECONDS
compose start head >"$tmp/start.out" 2>&1 || {
  cat "$tmp/start.out"
  fail "docker-compose start head failed"
}
wait_for 60 two_alive || {
  cat "$tmp/status.err" "$tmp/summary" 2>/dev/null
  fail "two nodes were not alive within 60 s of the head's start"
}
nodes_after=$(grep ' alive$' "$tmp/summary")
[[ "$nodes_after" == "$nodes_before" ]] ||
  fail "other nodes after the restart: before: $nodes_before; after: $nodes_after"
grep -qxF "actor survivor ALIVE $actor_id" "$tmp/summary" ||
  fail "the detached actor is not ALIVE with the same id after the restart: $(cat "$tmp/summary")"
echo "the same two nodes alive, actor survivor ALIVE ($actor_id)"
run_driver counter2 /usr/local/libexec/orrery/tests/docker_counter_driver survivor 1
[[ "$(tail -n 1 "$tmp/counter2.out")" == "survivor 6 $actor_id" ]] ||
  fail "after the restart docker_counter_driver printed $(tail -n 1 "$tmp/counter2.out"), expected survivor 6 $actor_id"
echo "survivor = 6: the same actor, its state kept"
run_driver train2 "$examples/train_linear"
grep -q "^ok: the loss fell" "$tmp/train2.out" || fail "train_linear did not say ok after the restart"
run_driver hello2 "$examples/hello_actors"
grep -q "^hello_actors: all good" "$tmp/hello2.out" || fail "hello_actors failed after the restart"
echo "train_linear and hello_actors ran again"
timing "head restart and drivers" "$t"

step "docker-compose stop, down -v"
t=$SECONDS
mapfile -t containers < <(compose ps -q)
compose stop --timeout 20 >"$tmp/stop.out" 2>&1 || {
  cat "$tmp/stop.out"
  fail "docker-compose stop failed"
}
for c in "${containers[@]}"; do
  read -r cname state code < <(docker inspect -f '{{.Name}} {{.State.Status}} {{.State.ExitCode}}' "$c")
  echo "$cname $state $code"
  [[ "$state" == exited && "$code" == 0 ]] || check_failed "$cname stopped as $state with exit code $code"
done
compose down -v --remove-orphans >"$tmp/down.out" 2>&1 || {
  cat "$tmp/down.out"
  fail "docker-compose down -v failed"
}
compose_up=0
label="label=com.docker.compose.project=$project"
left="$(docker ps -aq --filter "$label")$(docker network ls -q --filter "$label")$(docker volume ls -q --filter "$label")"
[[ -z "$left" ]] || fail "docker-compose down -v left containers, networks or volumes of $project"
docker image rm "$image" >/dev/null
image_built=0
timing "stop" "$t"

if [[ ${#failures[@]} -gt 0 ]]; then
  fail "${#failures[@]} check(s) failed"
fi
echo "PASS ($((SECONDS - t0)) s)"
