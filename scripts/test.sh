#!/usr/bin/env bash
# The whole test suite: install, build everything, run every CTest test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@"
../scripts/fuzz.sh --seconds 6   # every parser's fuzz target, briefly (docs/RELIABILITY.md "Fuzzing")
