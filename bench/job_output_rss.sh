#!/usr/bin/env bash
# The node's memory while a submitted job floods its stdout (docs/benchmarks.md "Job
# output"): starts a one-node session in a fresh ORRERY_TMPDIR, submits
# `e2e_job_driver flood MIB`, samples the node's VmRSS every 50 ms, and prints it before,
# at its peak and after the job, with the size of the job's log file at its largest.
# Usage: bench/job_output_rss.sh <build dir> MIB...        (e.g. build 100 1024)
set -euo pipefail
build_dir=$(cd "$1" && pwd)
shift
orrery_bin="$build_dir/cli/orrery"
driver="$build_dir/tests/e2e/e2e_job_driver"
root=$(mktemp -d)
trap 'ORRERY_TMPDIR="$root" "$orrery_bin" stop >/dev/null 2>&1 || true; rm -rf "$root"' EXIT
orrery() { ORRERY_TMPDIR="$root" "$orrery_bin" "$@"; }
orrery start --head --port 0 --num-cpus 1 --no-dashboard >/dev/null
# The node is the session's process whose command line says "node".
node_pid=""
for pid in $(python3 -c 'import glob,json; [print(p) for f in glob.glob("'"$root"'/session_*/session.json") for p in json.load(open(f))["pids"]]'); do
  if tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qw node; then node_pid=$pid; fi
done
[[ -n "$node_pid" ]] || { echo "no node process found" >&2; exit 1; }
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$node_pid/status"; }
cp "$driver" "$root/driver"
for mib in "$@"; do
  before=$(rss)
  peak=$before largest=0
  (cd "$root" && orrery job submit -- ./driver flood "$mib" >"$root/out" 2>"$root/err") &
  submit=$!
  while kill -0 "$submit" 2>/dev/null; do
    r=$(rss)
    ((r > peak)) && peak=$r
    for f in "$root"/session_*/logs/job-*.out; do
      [[ -f "$f" ]] || continue
      s=$(stat -c %s "$f")
      ((s > largest)) && largest=$s
    done
    sleep 0.05
  done
  wait "$submit" || echo "orrery job submit failed: $(tail -3 "$root/err")" >&2
  after=$(rss)
  noted=$(sed -n 's/^\[orrery\] \([0-9]*\) line(s) of stdout not forwarded .*/\1/p' "$root/err" |
    awk '{ n += $1 } END { print n + 0 }')
  printf '%5s MiB: node RSS %s kB before, %s kB at peak, %s kB after; largest .out %s bytes;' \
    "$mib" "$before" "$peak" "$after" "$largest"
  printf ' printed %s lines, noted %s, last: %s\n' "$(grep -c '^line ' "$root/out" || true)" \
    "$noted" "$(tail -n 1 "$root/out")"
  rm -f "$root"/session_*/logs/job-*
done
