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
step "ctest"
if ! ctest --output-on-failure -j"$(nproc)" --timeout 600 ${ctest_args[@]+"${ctest_args[@]}"}; then
  # The failures' own output again, last, where a reader of the log's tail sees it.
  python3 ../scripts/failed_tests.py . 150 || true
  step "ctest failed"
  exit 8
fi
step "fuzz"
../scripts/fuzz.sh --seconds 6   # every parser's fuzz target, briefly (docs/RELIABILITY.md "Fuzzing")
step "done"
