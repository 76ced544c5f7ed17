#!/usr/bin/env bash
# Builds the fuzz targets (tests/fuzz/) with clang + libFuzzer + ASan + UBSan
# in build-fuzz/ and runs each target for N seconds on its corpus.
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--build-dir DIR] [TARGET...] [-- LIBFUZZER_ARGS...]
#
# N defaults to 60 per target; J (targets run at once) to the number of CPUs.
# Each target starts from its seeds (tests/fuzz/corpus.txt) and saved findings
# (tests/fuzz/findings/<target>/) and keeps what it learns in
# DIR/corpus/<target>/ for the next run (with tests/fuzz/dicts/<target>.dict
# as its dictionary when there is one). An input that breaks a promise
# (crash, sanitizer report, broken FUZZ_CHECK, escaping exception, an input
# slower than 10 s) is saved as DIR/findings/<target>/crash-* (or timeout-*,
# oom-*); the script then exits 1 naming it. Keep a fixed finding as a
# regression case in tests/fuzz/findings/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=60
jobs=$(nproc)
build=build-fuzz
targets=()
extra=()
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[[ $seconds =~ ^[0-9]+$ && $seconds -ge 1 ]] || { echo "fuzz.sh: --seconds takes a positive number" >&2; exit 2; }
[[ $jobs =~ ^[0-9]+$ && $jobs -ge 1 ]] || { echo "fuzz.sh: --jobs takes a positive number" >&2; exit 2; }

# Every target named in corpus.txt, in order, unless some were named.
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(grep -v '^#' tests/fuzz/corpus.txt | awk 'NF { print $1 }' | awk '!seen[$0]++')
fi

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (scripts/setup.sh installs clang)" >&2; exit 2; }
sanitize="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS="$sanitize" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DNPUPROF_LIBFUZZER=ON >&2
fi
bins=()
for t in "${targets[@]}"; do bins+=("fuzz_$t"); done
cmake --build "$build" -j"$(nproc)" --target "${bins[@]}" >&2
mkdir -p "$build/logs"

# Runs one target; prints one summary line; returns non-zero on a finding.
run_target() {
  local t=$1
  local work=$build/corpus/$t seeds=$build/seeds/$t found=$build/findings/$t log=$build/logs/$t.log
  rm -rf "$seeds"
  mkdir -p "$work" "$seeds" "$found"
  local pattern dir suffix f
  while read -r name pattern; do
    [[ $name == "$t" ]] || continue
    if [[ $pattern == */\** ]]; then
      dir=${pattern%%/\**}
      suffix=${pattern#*/\*}
      for f in "$dir"/*"$suffix"; do [[ -f $f ]] && cp "$f" "$seeds/"; done
    else
      cp "$pattern" "$seeds/"
    fi
  done < <(grep -v '^#' tests/fuzz/corpus.txt)
  if [[ -d tests/fuzz/findings/$t ]]; then
    for f in tests/fuzz/findings/"$t"/*; do [[ -f $f ]] && cp "$f" "$seeds/finding-$(basename "$f")"; done
  fi
  local dict=()
  [[ -f tests/fuzz/dicts/$t.dict ]] && dict=(-dict="tests/fuzz/dicts/$t.dict")
  local rc=0
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$found/" ${dict[@]+"${dict[@]}"} ${extra[@]+"${extra[@]}"} \
    "$work" "$seeds" >"$log" 2>&1 || rc=$?
  local runs
  runs=$(grep -a -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  if ((rc != 0)); then
    local artifact
    artifact=$(grep -a -o "Test unit written to [^ ]*" "$log" | tail -1 | sed 's/Test unit written to //' || true)
    echo "fuzz $t: FINDING after ${runs:-?} inputs: ${artifact:-see $log} (log $log)"
    grep -a -m1 -E "ERROR: |broken promise|terminate called|ALARM|out-of-memory" "$log" | sed 's/^/    /' || true
    return 1
  fi
  echo "fuzz $t: ok, ${runs:-?} inputs in ${seconds} s, corpus $(find "$work" -type f | wc -l) files"
}

# At most J targets at once; each leaves its verdict in logs/<target>.rc.
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  rm -f "$build/logs/$t.rc"
  (rc=0; run_target "$t" || rc=$?; echo "$rc" >"$build/logs/$t.rc") &
done
wait
failed=0
for t in "${targets[@]}"; do
  [[ $(cat "$build/logs/$t.rc" 2>/dev/null) == 0 ]] || failed=1
done
if ((failed)); then
  echo "fuzz.sh: findings saved under $root/$build/findings/ (logs in $build/logs/)" >&2
  exit 1
fi
