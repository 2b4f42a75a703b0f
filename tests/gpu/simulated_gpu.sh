#!/bin/sh
# Runs a program on a simulated host with one NVIDIA H100 (ORRERY_SYSROOT, docs/accelerators.md):
# a fake tree whose nvidia-smi prints one GPU. With --cluster, the program runs as a driver of
# a cluster that `orrery start --head` starts on 127.0.0.1 in that host (and stops after).
#
#   simulated_gpu.sh [--cluster ORRERY_CLI] PROGRAM [ARGS...]
set -eu
cli=""
if [ "${1:-}" = "--cluster" ]; then
  cli=$2
  shift 2
fi
root=$(mktemp -d /tmp/orrery-simulated-gpu.XXXXXX)
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  if [ -n "$cli" ]; then ORRERY_TMPDIR="$root/tmp" "$cli" stop >/dev/null 2>&1 || true; fi
  rm -rf "$root"
}
trap cleanup EXIT
mkdir -p "$root/usr/bin" "$root/proc" "$root/tmp"
printf '#!/bin/sh\necho "0, NVIDIA H100 80GB HBM3"\n' >"$root/usr/bin/nvidia-smi"
chmod +x "$root/usr/bin/nvidia-smi"
cp /proc/meminfo "$root/proc/meminfo"
export ORRERY_SYSROOT="$root"
if [ -z "$cli" ]; then
  "$@"
  exit $?
fi
export ORRERY_TMPDIR="$root/tmp"
out=$("$cli" start --head --port 0 --num-cpus 4 --no-dashboard)
address=$(printf '%s\n' "$out" | sed -n 's/^Orrery head started at \([^ ]*\) .*/\1/p')
[ -n "$address" ] || { printf 'no head address in:\n%s\n' "$out" >&2; exit 1; }
status=0
ORRERY_ADDRESS="$address" "$@" || status=$?
exit $status
