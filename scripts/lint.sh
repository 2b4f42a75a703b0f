#!/usr/bin/env bash
# The repository's static checks (docs/testing.md "Lint"); .ci/run runs them as its first
# stage. Each check prints every violation it finds; the script fails when any check does.
#
#   format     clang-format --dry-run -Werror over every tracked *.h and *.cc (.clang-format)
#   size       no product source file over 500 lines
#   functions  no function over 80 lines in the product sources: clang-tidy's
#              readability-function-size (LineThreshold 80, lines from the opening to the
#              closing brace, comments and blank lines included) over the compile database
#              of a configure-only unity build directory (each translation unit includes up
#              to 8 sources, so headers are parsed once per batch), headers included. A source
#              the database lacks (train/src/torch.cc: clang 14 cannot parse Debian's libtorch
#              headers, so the database is made without libtorch) is measured by brace
#              matching instead
#   layers     the modules' layering (docs/architecture.md "Layout"): no module includes
#              another's src/, and none includes (or links, in its CMakeLists.txt) a module
#              above it: core <- scheduler <- objects <- node <- actors <- train, dashboard
#              and autoscaler on core only, cli on any (kMayUse). A public header orrery/...
#              belongs to the module whose include/ holds it. bench/, tests/, fuzz/ and
#              examples/ are not modules: they may include anything
#
# Product sources: the *.h and *.cc tracked under core/ scheduler/ objects/ node/ actors/
# train/ dashboard/ autoscaler/ cli/ bench/ (not tests/, fuzz/ or examples/).
#
# Usage: bash scripts/lint.sh [format] [size] [functions] [layers]     (default: all four)
# Environment: ORRERY_LINT_BUILD_DIR (default build-lint: configured, never built),
# ORRERY_JOBS (default 2: parallel clang-tidy processes).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

readonly kMaxFileLines=500
readonly kMaxFunctionLines=80
readonly kProductDirs=(core scheduler objects node actors train dashboard autoscaler cli bench)
# The modules, and the modules each one may include and link besides itself ("*": any).
readonly kModules=(core scheduler objects node actors train dashboard autoscaler cli)
declare -rA kMayUse=(
  [core]="" [scheduler]="core" [objects]="core scheduler" [node]="core scheduler objects"
  [actors]="core scheduler objects node" [train]="core scheduler objects node actors"
  [dashboard]="core" [autoscaler]="core" [cli]="*")
lint_dir="${ORRERY_LINT_BUILD_DIR:-build-lint}"
jobs="${ORRERY_JOBS:-2}"

product_sources() {
  git ls-files -- "${kProductDirs[@]}" | grep -E '\.(h|cc)$'
}

check_format() {
  local -a files
  mapfile -t files < <(git ls-files -- '*.h' '*.cc')
  echo "== format: clang-format --dry-run -Werror on ${#files[@]} files ($(clang-format --version))"
  if ! printf '%s\0' "${files[@]}" | xargs -0 clang-format --dry-run -Werror; then
    echo "FAIL: files above differ from clang-format's output (fix: clang-format -i FILE)" >&2
    return 1
  fi
}

check_size() {
  local -a files long
  mapfile -t files < <(product_sources)
  echo "== size: ${#files[@]} product sources, at most ${kMaxFileLines} lines each"
  mapfile -t long < <(printf '%s\0' "${files[@]}" | xargs -0 wc -l |
    awk -v max="$kMaxFileLines" '$2 != "total" && $1 > max { printf "%s: %d lines\n", $2, $1 }')
  if [[ ${#long[@]} -gt 0 ]]; then
    printf '  %s\n' "${long[@]}"
    echo "FAIL: ${#long[@]} product source file(s) over ${kMaxFileLines} lines" >&2
    return 1
  fi
}

# Product *.cc files that the compile database of $lint_dir lacks, measured without a
# compiler: a brace that opens at namespace or class level after a line with a ')' starts a
# function body; its lines run to the matching brace (string and character literals and
# // comments are ignored). Prints "FILE:LINE: NAME is N lines" for each one over the limit.
long_functions_without_database() {
  local root=$1 f
  local -a missing
  local covered
  covered=$(database_sources)
  mapfile -t missing < <(product_sources | grep '\.cc$' | while read -r f; do
    grep -qxF "$root/$f" <<<"$covered" || echo "$f"
  done)
  [[ ${#missing[@]} -eq 0 ]] && return 0
  awk -v max="$kMaxFunctionLines" '
    FNR == 1 { depth = 0; fn_depth = -1; prev = "" }
    {
      line = $0
      gsub(/\\./, "", line); gsub(/"[^"]*"/, "\"\"", line); gsub(/'\''[^'\'']*'\''/, "", line)
      sub(/\/\/.*/, "", line)
      for (i = 1; i <= length(line); i++) {
        c = substr(line, i, 1)
        if (c == "{") {
          head = prev " " substr(line, 1, i - 1)
          if (fn_depth < 0 && head ~ /\)[^;{}]*$/ && head !~ /(namespace|class|struct|enum|union)[^()]*$/) {
            fn_depth = depth; start = FNR; name = head
            sub(/\(.*/, "", name); n = split(name, w, /[ \t*&]+/); name = w[n]
          }
          depth++
        } else if (c == "}") {
          depth--
          if (depth == fn_depth) {
            if (FNR - start > max) printf "%s:%d: %s is %d lines\n", FILENAME, start, name, FNR - start
            fn_depth = -1
          }
        }
      }
      if (line ~ /[;{}][ \t]*$/) prev = ""; else prev = prev " " line
    }' "${missing[@]}"
}

# Prints the sources that $lint_dir's compile database compiles: its entries, and the
# sources that its unity translation units (CMake's Unity/unity_N_cxx.cxx) include.
database_sources() {
  local f
  sed -n 's/^ *"file": "\(.*\)",\{0,1\}$/\1/p' "$lint_dir/compile_commands.json" | while read -r f; do
    if [[ "$f" == */Unity/unity_*_cxx.cxx ]]; then
      sed -n 's/^#include "\(.*\)"$/\1/p' "$f"
    else
      echo "$f"
    fi
  done
}

check_functions() {
  local root=$PWD dirs out rc=0
  dirs=$(IFS='|'; echo "${kProductDirs[*]}")
  # Configure only (for compile_commands.json and the unity sources): no test or example
  # targets, no libtorch. Every run configures (quick after the first) so that new sources
  # are in the database. Unity: clang-tidy parses 30 translation units instead of 150.
  mkdir -p "$lint_dir"
  cmake -S . -B "$lint_dir" -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    -DORRERY_BUILD_TESTS=OFF -DORRERY_BUILD_EXAMPLES=OFF -DORRERY_BUILD_BENCH=ON \
    -DORRERY_WITH_TORCH=OFF -DORRERY_UNITY_BUILD=ON >"$lint_dir/configure.log" 2>&1 || {
    cat "$lint_dir/configure.log" >&2
    echo "FAIL: configuring $lint_dir/ for the compile database" >&2
    return 1
  }
  echo "== functions: clang-tidy readability-function-size (at most ${kMaxFunctionLines} lines), -j$jobs"
  out=$(run-clang-tidy -j "$jobs" -p "$lint_dir" -quiet -checks='-*,readability-function-size' \
    -config="{CheckOptions: [{key: readability-function-size.LineThreshold, value: ${kMaxFunctionLines}}]}" \
    -header-filter="^$root/($dirs)/" "^$root/($dirs)/.*\\.cc\$|/Unity/unity_[0-9]+_cxx\\.cxx\$" 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g') || rc=1
  # "FILE:LINE:COL: warning: function 'F' exceeds ..." then "FILE:LINE:COL: note: N lines ..."
  local report errors
  report=$(echo "$out" | awk -v root="$root/" '
    /warning: function .* exceeds recommended size/ { split($0, a, ": warning: "); loc = a[1];
      match($0, /function '\''[^'\'']*'\''/); fn = substr($0, RSTART + 10, RLENGTH - 11) }
    /note: [0-9]+ lines including/ && loc != "" { split($0, b, "note: "); split(b[2], c, " ");
      sub(root, "", loc); print loc ": " fn " is " c[1] " lines"; loc = "" }' | sort -u)
  report=$(printf '%s\n%s\n' "$report" "$(long_functions_without_database "$root")" | sed '/^$/d' | sort -u)
  errors=$(echo "$out" | grep -E ': error: ' | sort -u)
  if [[ -n "$errors" ]]; then
    echo "$errors" | head -n 40
    echo "FAIL: clang-tidy could not compile some product sources (above)" >&2
    return 1
  fi
  if [[ -n "$report" ]]; then
    echo "$report" | sed 's/^/  /'
    echo "FAIL: $(echo "$report" | wc -l) function(s) over ${kMaxFunctionLines} lines" >&2
    return 1
  fi
  return $rc
}

# Prints "FILE:LINE: ..." for each #include in a module's *.h and *.cc that breaks the
# layering: another module's src/, or a module (by its directory, or by the public header
# orrery/... that its include/ holds) that kMayUse does not list.
bad_includes() {
  local rules="" owners m
  for m in "${kModules[@]}"; do rules+="$m=${kMayUse[$m]};"; done
  owners=$(git ls-files -- '*/include/orrery/*' | sed -nE 's#^([^/]+)/include/(orrery/.*)$#\2=\1#p' |
    tr '\n' ';')
  git grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' -- "${kModules[@]}" |
    awk -v rules="$rules" -v owners="$owners" '
    BEGIN {
      n = split(rules, r, ";")
      for (i = 1; i <= n; i++) if (split(r[i], kv, "=") >= 1 && kv[1] != "") {
        module[kv[1]] = 1; allow[kv[1]] = " " kv[2] " "
        may[kv[1]] = kv[2] == "" ? "no other module" : kv[2] == "*" ? "any module" : kv[2]
      }
      n = split(owners, o, ";")
      for (i = 1; i <= n; i++) if (split(o[i], kv, "=") == 2) owner[kv[1]] = kv[2]
    }
    {
      file = $0; sub(/:.*/, "", file); rest = substr($0, length(file) + 2)
      line = rest; sub(/:.*/, "", line); text = substr(rest, length(line) + 2)
      if (file !~ /\.(h|cc)$/ || !match(text, /[<"][^<">]+[>"]/)) next
      from = file; sub(/\/.*/, "", from)
      inc = substr(text, RSTART + 1, RLENGTH - 2); quoted = substr(text, RSTART, 1) == "\""
      split(inc, part, "/"); to = ""
      if (quoted && (part[1] in module) && part[2] != "") {
        to = part[1]
        if (part[2] == "src" && to != from) {
          printf "%s:%s: includes %s: %s/src/ is private to module %s (what other modules " \
                 "may include lives in %s/internal/)\n", file, line, inc, to, to, to
          next
        }
      } else if (inc in owner) {
        to = owner[inc]
      }
      if (to != "" && to != from && allow[from] != " * " && index(allow[from], " " to " ") == 0)
        printf "%s:%s: includes %s: module %s must not depend on module %s (%s may use: %s)\n",
               file, line, inc, from, to, from, may[from]
    }'
}

# Prints "FILE:LINE: ..." for each module's CMakeLists.txt that links a module kMayUse does
# not list (Orrery::<module> or orrery_<module>; Orrery::orrery is actors).
bad_links() {
  local m f token to
  for m in "${kModules[@]}"; do
    f=$m/CMakeLists.txt
    [[ -f $f && ${kMayUse[$m]} != "*" ]] || continue
    grep -noE '\b(Orrery::|orrery_)[A-Za-z_]+' "$f" | while IFS=: read -r line token; do
      to=${token#orrery_}
      to=${to#Orrery::}
      [[ $to == orrery ]] && to=actors
      [[ -v kMayUse[$to] && $to != "$m" && " ${kMayUse[$m]} " != *" $to "* ]] || continue
      echo "$f:$line: links $token: module $m must not depend on module $to ($m may use:" \
        "${kMayUse[$m]:-no other module})"
    done
  done
}

check_layers() {
  local -a bad
  echo "== layers: includes and CMake links of ${#kModules[@]} modules (core <- scheduler <-" \
    "objects <- node <- actors <- train; dashboard, autoscaler <- core; cli <- any)"
  mapfile -t bad < <(bad_includes; bad_links)
  if [[ ${#bad[@]} -gt 0 ]]; then
    printf '  %s\n' "${bad[@]}"
    echo "FAIL: ${#bad[@]} include(s) or link(s) against the layering" >&2
    return 1
  fi
}

checks=("$@")
[[ ${#checks[@]} -eq 0 ]] && checks=(format size functions layers)
status=0
for c in "${checks[@]}"; do
  t0=$SECONDS
  case "$c" in
    format) check_format || status=1 ;;
    size) check_size || status=1 ;;
    functions) check_functions || status=1 ;;
    layers) check_layers || status=1 ;;
    *) echo "unknown check '$c' (format, size, functions, layers)" >&2; status=1; continue ;;
  esac
  echo "   ($c: $((SECONDS - t0)) s)"
done
exit "$status"
