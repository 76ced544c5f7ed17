#!/usr/bin/env bash
# The test suite: install, build everything, run the tests.
#
#   scripts/test.sh              every CTest test, then every parser's fuzz target briefly (CI runs this)
#   scripts/test.sh --quick      the inner loop: the unit tests and a few fast end-to-end runs, no fuzzing
#   scripts/test.sh [--quick] -- CTEST_ARGS...   extra arguments for ctest (e.g. -R Serve)
#
# Compiles go through ccache (CMakeLists.txt), so a fresh clone of a commit
# this machine already built compiles almost nothing. Times per step:
# docs/PERFORMANCE.md "Build and test times".
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
ctest_args=()
while (($#)); do
  case $1 in
    --quick) quick=1; shift ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) ctest_args+=("$1"); shift ;;
  esac
done

# The fast end-to-end runs of --quick: one of each kind against the simulated
# target over the loopback sshd (each well under 20 s).
QUICK_E2E='^(ProbeCli\.ProbeReportsDevicesAndFreeBusy|ServeE2E\.StartReadyStop|TorchProfileE2E\.ModesMapToFlags|MemoryE2E\.StandaloneTp2DenseMatchesGroundTruthAndExports|VerifyCli\.CleanStoreVerifiesAndEditedEventIsDetected)$'

step() { echo "test.sh: $1 ($(date -u +%H:%M:%S))" >&2; }

step "setup"
scripts/setup.sh
step "build"
scripts/build.sh
cd build
if ((quick)); then
  step "unit tests"
  ctest --output-on-failure -j"$(nproc)" --timeout 600 -L unit ${ctest_args[@]+"${ctest_args[@]}"}
  step "fast end-to-end runs"
  ctest --output-on-failure -j"$(nproc)" --timeout 600 -R "$QUICK_E2E" ${ctest_args[@]+"${ctest_args[@]}"}
  step "done (quick: no integration suites, crash matrix, soak, package or fuzzing)"
  exit 0
fi
# CTest keeps the two cores only half busy (its end-to-end tests mostly wait
# on simulated delays and timeouts: 646 s of CPU in 626 s on 2 cores), so the
# fuzz targets (one CPU-bound process at a time) run beside it, and CTest runs
# one test more than there are cores. Figures: docs/PERFORMANCE.md "Build and
# test times".
step "ctest, with the fuzz targets beside it"
fuzz_log=$(mktemp)
trap 'rm -f "$fuzz_log"' EXIT
# every parser's fuzz target, briefly (docs/RELIABILITY.md "Fuzzing")
nice -n 5 ../scripts/fuzz.sh --seconds 6 > "$fuzz_log" 2>&1 &
fuzz_pid=$!
ctest_rc=0
ctest --output-on-failure -j"$(( $(nproc) + 1 ))" --timeout 600 ${ctest_args[@]+"${ctest_args[@]}"} || ctest_rc=$?
step "ctest done (rc $ctest_rc); waiting for the fuzz targets"
fuzz_rc=0
wait "$fuzz_pid" || fuzz_rc=$?
cat "$fuzz_log"
if ((ctest_rc != 0 || fuzz_rc != 0)); then
  step "failed: ctest rc $ctest_rc, fuzz rc $fuzz_rc"
  exit 1
fi
step "done"
