#!/usr/bin/env bash
# Checks Orrery's GPU paths (docs/accelerators.md) on a host with NVIDIA GPUs that has none
# of Orrery's dependencies installed, from a bundle made on the build machine:
#
#   bash scripts/gpu_check.sh bundle    # on Debian 12 after scripts/setup.sh: fills .devdeps/
#   bash scripts/gpu_check.sh [--nccl] [--fake-gpu]   # on the GPU host: runs the checks
#
# The bundle (.devdeps/, ignored by git) holds bin/ (orrery, examples/gpu_actors and
# redis-server, stripped) and lib/ (Orrery's shared libraries and the Debian libraries all
# of them need, from `apt-get download` + `dpkg -x`; glibc, libstdc++ and libgcc_s are the
# host's). Only Orrery's processes get LD_LIBRARY_PATH=.devdeps/lib.
#
# The checks, each reported as PASS, FAIL or SKIP:
#   0. every library the bundle's programs need resolves on this host
#   1. nvidia-smi --query-gpu=index,name,memory.total,uuid
#   2. a cluster on 127.0.0.1 (`orrery start --head`: Redis, head and node) and what its node
#      advertises (`orrery status`): GPU: <n> and orrery.io/accelerator-type, as nvidia-smi
#      says; none on a host without nvidia-smi
#   3. examples/gpu_actors against that cluster: CUDA_VISIBLE_DEVICES and
#      GetRuntimeContext().GetAcceleratorIds() of tasks and actors asking for no, one and
#      half a GPU, a probe run inside the GPU actor (nvidia-smi -L and a CUDA tensor in
#      python3's torch), and an actor taking the GPU a task has just given back
#   4. with --nccl (or GPU_CHECK_NCCL=1): an all-reduce through c10d's NCCL process group,
#      from python3's torch and from tests/gpu/nccl_smoke.cc built here against the host's
#      libtorch (about 1 to 2 minutes; skipped when less than 150 s of GPU_CHECK_BUDGET_S,
#      default 330, are left)
# --fake-gpu (or GPU_CHECK_FAKE_GPU=1) simulates a host with one H100 under ORRERY_SYSROOT
# and a fake nvidia-smi, to try the GPU path of steps 1-3 on a machine without one.
#
# Everything listens on 127.0.0.1 only; everything started is stopped on exit. With OUT set,
# the output goes to $OUT/gpu_check.log too, and the cluster's logs to $OUT/gpu_check_logs/.
# Exits 1 when a check failed, else 0.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
repo=$(pwd)
deps="${GPU_CHECK_DEPS:-$repo/.devdeps}"
# Libraries every Linux host has, never carried: glibc's, libstdc++ and libgcc_s.
host_libs='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libstdc\+\+\.so|libgcc_s\.so)'

# Prints each library a file needs that does not resolve into $deps/lib (or to a host
# library); returns 1 when there is one.
unresolved() {
  env -i LD_LIBRARY_PATH="$deps/lib" ldd "$1" 2>&1 | awk -v lib="$deps/lib/" -v host="$host_libs" '
    /=>/ { name = $1; path = $3
           if (path == "not") { print "  " name " not found"; bad = 1 }
           else if (name !~ host && index(path, lib) != 1) { print "  " name " => " path " (not in the bundle)"; bad = 1 } }
    END { exit bad }'
}

# ---- bundle: runs on the build machine --------------------------------------------------

bundle() {
  local build="${ORRERY_BUILD_DIR:-build}" debs="${GPU_CHECK_DEB_CACHE:-/tmp/orrery_gpu_debs}"
  local f
  for f in "$build/cli/orrery" "$build/examples/gpu_actors"; do
    [[ -x "$f" ]] || { echo "bundle: $f is not built (bash scripts/setup.sh)" >&2; return 1; }
  done
  rm -rf "$deps" && mkdir -p "$deps/bin" "$deps/lib" "$debs/x" || return 1
  cp "$build/cli/orrery" "$build/examples/gpu_actors" "$deps/bin/"
  (cd "$debs" && apt-get download -q redis-tools >/dev/null 2>"$debs/apt.log") || { cat "$debs/apt.log"; return 1; }
  dpkg -x "$debs"/redis-tools_*.deb "$debs/x"
  # redis-server is redis-check-rdb under the name redis-server (redis picks its mode by name).
  cp "$debs/x/usr/bin/redis-check-rdb" "$deps/bin/redis-server"
  # Each library ldd finds: Orrery's own from build/, the others from their Debian package.
  local bin line name path pkg
  for bin in "$deps"/bin/*; do
    ldd "$bin" | awk '/=> \// { print $1, $3 }'
  done | sort -u | while read -r name path; do
    [[ "$name" =~ $host_libs ]] && continue
    if [[ "$(readlink -f "$path")" == "$(readlink -f "$build")"/* ]]; then
      cp -L "$path" "$deps/lib/$name"
      continue
    fi
    pkg=$(dpkg -S "*/$name" 2>/dev/null | grep -v -- '-dev' | head -1 | cut -d: -f1)
    [[ -n "$pkg" ]] || { echo "bundle: no package has $name" >&2; exit 1; }
    ls "$debs/${pkg}"_*.deb >/dev/null 2>&1 || (cd "$debs" && apt-get download -q "$pkg" >/dev/null 2>"$debs/apt.log") || { cat "$debs/apt.log"; exit 1; }
    dpkg -x "$debs/${pkg}"_*.deb "$debs/x"
    line=$(find "$debs/x" -name "$name" | head -1)
    [[ -n "$line" ]] || { echo "bundle: $pkg has no $name" >&2; exit 1; }
    cp -L "$line" "$deps/lib/$name"
    echo "  $name from $pkg"
  done || return 1
  strip --strip-unneeded "$deps"/bin/* "$deps"/lib/* 2>/dev/null
  local bad=0
  for f in "$deps"/bin/* "$deps"/lib/*; do
    unresolved "$f" || { echo "bundle: $f needs what the bundle lacks" >&2; bad=1; }
  done
  du -sh "$deps"
  return $bad
}

# ---- the checks: run on the GPU host ----------------------------------------------------

failed=0
deadline=0 # SECONDS by which the checks should end: step 4 is skipped when it would pass it
pass() { echo "PASS step $1: $2"; }
fail() {
  echo "FAIL step $1: $2"
  failed=1
}
skip() { echo "SKIP step $1: $2"; }
section() { printf '\n==== step %s: %s\n' "$1" "$2"; }

work=""
sessions=""
# Orrery's programs, with the bundle's libraries and this run's session root (only in their
# environment: a process that has ORRERY_TMPDIR=$sessions was started by this run).
orr() {
  ORRERY_TMPDIR="$sessions" LD_LIBRARY_PATH="$deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    timeout "${limit:-60}" "$@"
}

cleanup() {
  set +e
  [[ -n "$sessions" && -d "$sessions" ]] || return
  if [[ -n "${OUT:-}" ]]; then
    mkdir -p "$OUT/gpu_check_logs"
    cp -r "$sessions"/session_*/logs/. "$OUT/gpu_check_logs/" 2>/dev/null
  fi
  limit=30 orr "$deps/bin/orrery" stop >/dev/null 2>&1
  # Anything of this run still running (a worker of a node killed with -9, say).
  local p pid
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [[ "$pid" == "$$" || "$pid" == "$BASHPID" ]] && continue
    grep -qzx "ORRERY_TMPDIR=$sessions" "$p/environ" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  done
  rm -rf "$work"
}

# A host with one H100 as Orrery's detector sees it (ORRERY_SYSROOT), and a fake nvidia-smi
# on PATH for the checks and the worker's probe.
fake_gpu_host() {
  mkdir -p "$work/sysroot/usr/bin"
  cat >"$work/sysroot/usr/bin/nvidia-smi" <<'EOF'
#!/bin/sh
# A fake nvidia-smi with one GPU (scripts/gpu_check.sh --fake-gpu).
case "$*" in
  *-L*) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-fake-0000-0000-000000000000)" ;;
  *--query-gpu=index,name,memory.total,uuid*noheader*) echo "0, NVIDIA H100 80GB HBM3, 81559 MiB, GPU-00000000-fake" ;;
  *--query-gpu=index,name,memory.total,uuid*)
    echo "index, name, memory.total [MiB], uuid"
    echo "0, NVIDIA H100 80GB HBM3, 81559 MiB, GPU-00000000-fake" ;;
  *--query-gpu=index,name*) echo "0, NVIDIA H100 80GB HBM3" ;;
  *--query-gpu=name*) echo "NVIDIA H100 80GB HBM3" ;;
  *) echo "fake nvidia-smi: $*" ;;
esac
EOF
  chmod +x "$work/sysroot/usr/bin/nvidia-smi"
  mkdir -p "$work/sysroot/proc" && cp /proc/meminfo "$work/sysroot/proc/"  # the memory monitor's
  # The workers inherit these: the probe runs the fake nvidia-smi, and no torch.
  export ORRERY_SYSROOT="$work/sysroot" PATH="$work/sysroot/usr/bin:$PATH" GPU_CHECK_NO_TORCH=1
  echo "simulated host: ORRERY_SYSROOT=$ORRERY_SYSROOT (one H100, a fake nvidia-smi)"
}

# The probe gpu_actors runs inside its GPU actor: what the worker sees of its device.
write_probe() {
  cat >"$work/probe.sh" <<'EOF'
#!/bin/sh
# Runs inside an Orrery worker that holds GPUs (scripts/gpu_check.sh).
unset LD_LIBRARY_PATH  # the bundle's Debian libraries are for Orrery's programs only
echo "      probe: CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-(unset)}"
nvidia-smi -L | sed 's/^/      nvidia-smi -L: /' || exit 1
[ -n "${GPU_CHECK_NO_TORCH:-}" ] && exit 0
timeout 90 python3 - <<'PY' 2>&1 | sed 's/^/      torch: /'
import os, torch
n = torch.cuda.device_count()
visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v]
print(f"{torch.__version__}, device_count()={n}")
x = torch.arange(1024, device="cuda", dtype=torch.float32)
print(f"sum of 0..1023 on {torch.cuda.get_device_name(0)} = {x.sum().item():.0f}")
raise SystemExit(0 if n == len(visible) else f"device_count() {n} != {len(visible)} visible")
PY
EOF
  chmod +x "$work/probe.sh"
}

step0_bundle() {
  section 0 "the bundle's libraries resolve on this host"
  local f bad=0
  for f in "$deps"/bin/* "$deps"/lib/*; do
    unresolved "$f" || {
      echo "  in $f"
      bad=1
    }
  done
  if ((bad)); then
    fail 0 "libraries missing (above)"
  else
    pass 0 "$(cd "$deps/bin" && echo *) and $(find "$deps/lib" -type f | wc -l) libraries"
  fi
  return $bad
}

gpu_count=0
gpu_name=""
step1_nvidia_smi() {
  section 1 "nvidia-smi"
  echo "CUDA_VISIBLE_DEVICES of this host: ${CUDA_VISIBLE_DEVICES-(unset)}"
  local smi p
  smi=$(command -v nvidia-smi) || {
    skip 1 "no nvidia-smi on PATH (a host without NVIDIA GPUs)"
    ls /proc/driver/nvidia/gpus 2>/dev/null && echo "but /proc/driver/nvidia/gpus exists"
    return
  }
  echo "nvidia-smi: $smi"
  for p in /usr/bin/nvidia-smi /usr/local/bin/nvidia-smi /usr/local/nvidia/bin/nvidia-smi; do
    [[ -x "$p" ]] && echo "  also at $p (a path Orrery's detector looks at)"
  done
  grep -h '^Model' /proc/driver/nvidia/gpus/*/information 2>/dev/null | sed 's/^/  \/proc\/driver\/nvidia: /'
  if timeout 30 nvidia-smi --query-gpu=index,name,memory.total,uuid --format=csv; then
    gpu_count=$(timeout 30 nvidia-smi --query-gpu=index,name --format=csv,noheader | grep -c .)
    gpu_name=$(timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    pass 1 "$gpu_count GPU(s), the first: $gpu_name"
  else
    fail 1 "nvidia-smi failed"
  fi
}

address=""
step2_cluster() {
  section 2 "a cluster on 127.0.0.1 and what its node advertises"
  local out
  # A small object store: these checks move no large objects, and /dev/shm may be small.
  if ! out=$(limit=60 orr "$deps/bin/orrery" start --head --port 0 --num-cpus 4 --no-dashboard \
    --object-store-memory 256M 2>&1); then
    echo "$out"
    fail 2 "orrery start --head failed"
    return 1
  fi
  echo "$out" | head -3
  address=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["values"]["head_address"])' \
    "$sessions/session_latest/session.json") || {
    fail 2 "no head_address in $sessions/session_latest/session.json"
    return 1
  }
  limit=30 orr "$deps/bin/orrery" status --address "$address" || true
  local json
  json=$(limit=30 orr "$deps/bin/orrery" status --address "$address" --json) || {
    fail 2 "orrery status --json failed"
    return 1
  }
  # The GPUs nvidia-smi lists, less those CUDA_VISIBLE_DEVICES hides.
  local expect=$gpu_count
  if [[ -n "${CUDA_VISIBLE_DEVICES:-}" && $gpu_count -gt 0 ]]; then
    expect=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | awk -v n="$gpu_count" '/^[0-9]+$/ && $1 < n' | sort -u | wc -l)
  fi
  local seen
  seen=$(python3 -c '
import json, sys
node = json.loads(sys.argv[1])["nodes"][0]
print("%g" % node["total"].get("GPU", 0), node["labels"].get("orrery.io/accelerator-type", "-"))
print("node resources:", json.dumps(node["total"]), file=sys.stderr)
print("node labels:   ", json.dumps(node["labels"]), file=sys.stderr)' "$json") || {
    fail 2 "cannot read orrery status --json"
    return 1
  }
  local gpus=${seen%% *} label=${seen#* }
  echo "advertised: GPU: $gpus, orrery.io/accelerator-type: $label (expected GPU: $expect${gpu_name:+, a label in \"$gpu_name\"})"
  if [[ "$expect" == 0 ]]; then
    if [[ "$gpus" == 0 && "$label" == "-" ]]; then pass 2 "GPU: 0, no accelerator label (no GPU here)"; else fail 2 "GPU: $gpus, label $label on a host without GPUs"; fi
  elif [[ "$gpus" == "$expect" && "$label" != "-" && "$gpu_name" == *"$label"* ]]; then
    pass 2 "GPU: $gpus, orrery.io/accelerator-type=$label"
  else
    fail 2 "GPU: $gpus, label $label; expected GPU: $expect and a label from \"$gpu_name\""
  fi
}

step3_workers() {
  section 3 "CUDA_VISIBLE_DEVICES and accelerator ids in worker processes (examples/gpu_actors)"
  [[ -n "$address" ]] || {
    skip 3 "no cluster (step 2 failed)"
    return
  }
  local rc
  ORRERY_ADDRESS="$address" limit=180 orr "$deps/bin/gpu_actors" "${GPU_CHECK_PROBE:-$work/probe.sh}"
  rc=$?
  if [[ $rc == 0 ]]; then
    pass 3 "every worker held the devices it asked for"
  elif [[ $rc == 77 && $gpu_count == 0 ]]; then
    skip 3 "no GPU in the cluster (a worker without one: above)"
  else
    fail 3 "gpu_actors exited $rc"
  fi
}

step4_nccl() {
  section 4 "c10d NCCL all-reduce with this host's libtorch"
  if [[ "$nccl" != 1 ]]; then
    skip 4 "not asked for (--nccl)"
    return
  fi
  if [[ $gpu_count == 0 || -n "${ORRERY_SYSROOT:-}" ]]; then
    skip 4 "no real GPU here"
    return
  fi
  if ((deadline - SECONDS < 150)); then
    skip 4 "less than 150 s of GPU_CHECK_BUDGET_S left"
    return
  fi
  echo "-- python3: torch.distributed, backend nccl, world size 1"
  if timeout 90 python3 - "$work/pystore" <<'PY'; then
import sys, torch, torch.distributed as dist
dist.init_process_group("nccl", init_method="file://" + sys.argv[1], rank=0, world_size=1)
t = torch.arange(4, device="cuda", dtype=torch.float32)
dist.all_reduce(t)
torch.cuda.synchronize()
print("torch", torch.__version__, "NCCL", torch.cuda.nccl.version(), "all_reduce:", t.tolist())
dist.destroy_process_group()
raise SystemExit(0 if t.tolist() == [0.0, 1.0, 2.0, 3.0] else 1)
PY
    pass 4a "python c10d NCCL all-reduce"
  else
    fail 4a "python c10d NCCL all-reduce"
  fi

  echo "-- C++: tests/gpu/nccl_smoke.cc against the host's libtorch"
  local prefix torch_dir build="$work/nccl_build"
  prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') || {
    fail 4b "python3 has no torch"
    return
  }
  torch_dir=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  # nccl.h, cublas_v2.h and the like of a pip-installed torch: its nvidia-* packages.
  local -a incs
  mapfile -t incs < <(find "$torch_dir/../nvidia" -maxdepth 3 -type d -name include 2>/dev/null | sort)
  [[ -d /usr/local/cuda/include ]] && incs+=(/usr/local/cuda/include)
  echo "Torch at $prefix; nccl.h at: $(find "${incs[@]}" /usr/include -maxdepth 1 -name nccl.h 2>/dev/null | head -1)"
  local t0=$SECONDS
  if timeout 90 cmake -S "$repo/tests/gpu" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" -DEXTRA_INCLUDE_DIRS="$(IFS=';' && echo "${incs[*]}")" \
    >"$work/nccl_cmake.log" 2>&1; then
    timeout 180 cmake --build "$build" 2>&1 | tail -30
  else
    tail -30 "$work/nccl_cmake.log"
    echo "CMake could not configure against Torch; compiling with g++ directly"
    local abi
    abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
    mkdir -p "$build"
    timeout 180 g++ -std=c++20 -O1 -D_GLIBCXX_USE_CXX11_ABI="$abi" -DUSE_C10D_NCCL \
      -I"$torch_dir/include" -I"$torch_dir/include/torch/csrc/api/include" "${incs[@]/#/-I}" \
      "$repo/tests/gpu/nccl_smoke.cc" -o "$build/nccl_smoke" \
      -L"$torch_dir/lib" -Wl,--no-as-needed -ltorch -ltorch_cuda -ltorch_cpu -lc10_cuda -lc10 \
      -Wl,-rpath,"$torch_dir/lib" -Wl,--allow-shlib-undefined 2>&1 | tail -30
  fi
  echo "built in $((SECONDS - t0)) s"
  if [[ ! -x "$build/nccl_smoke" ]]; then
    fail 4b "nccl_smoke did not build"
  else
    local out rc
    out=$(timeout 60 "$build/nccl_smoke" "$work/cstore" 2>&1)
    rc=$?
    echo "$out"
    if [[ $rc == 0 && "$out" == *"nccl all-reduce on cuda"* ]]; then
      pass 4b "C++ c10d ProcessGroupNCCL all-reduce"
    else
      fail 4b "nccl_smoke exited $rc${out:+ (output above)}"
    fi
  fi
}

checks() {
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  work=$(mktemp -d /tmp/orrery_gpu_check.XXXXXX)
  sessions="$work/sessions"
  mkdir -p "$sessions"
  export PATH="$deps/bin:$PATH"  # orrery start finds redis-server on PATH
  echo "gpu_check on $(uname -n): $(uname -srm); $(grep -h '^PRETTY_NAME=' /etc/os-release | cut -d= -f2)"
  echo "bundle: $deps ($(du -sh "$deps" | cut -f1)); started $(date -u +%FT%TZ)"
  ((fake)) && fake_gpu_host
  write_probe
  local t0=$SECONDS
  deadline=$((SECONDS + ${GPU_CHECK_BUDGET_S:-330}))
  step0_bundle || {
    echo "cannot run Orrery's programs here; the other steps are skipped"
    return 1
  }
  step1_nvidia_smi
  step2_cluster
  step3_workers
  step4_nccl
  printf '\n==== %s in %d s\n' "$([[ $failed == 0 ]] && echo "all checks passed or skipped" || echo "SOME CHECKS FAILED")" $((SECONDS - t0))
  return $failed
}

nccl="${GPU_CHECK_NCCL:-0}"
fake="${GPU_CHECK_FAKE_GPU:-0}"
case "${1:-}" in
  bundle)
    bundle
    exit
    ;;
  -h | --help)
    sed -n '2,/^set -uo/p' "$0" | sed '$d'
    exit 0
    ;;
esac
for arg in "$@"; do
  case "$arg" in
    --nccl) nccl=1 ;;
    --fake-gpu) fake=1 ;;
    *)
      echo "gpu_check: unknown argument $arg (--nccl, --fake-gpu, bundle)" >&2
      exit 2
      ;;
  esac
done
if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT"
  (checks) 2>&1 | tee "$OUT/gpu_check.log"
  exit "${PIPESTATUS[0]}"
fi
(checks)
