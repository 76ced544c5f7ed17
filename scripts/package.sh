#!/usr/bin/env bash
# Builds the Debian package build/npuprof_<version>_<arch>.deb with CPack from
# the normal build dir (configured RelWithDebInfo like scripts/build.sh if it
# does not exist yet; the binary in the package is stripped). Installs what
# it needs first (scripts/setup.sh), builds only the npuprof target. Prints
# the package's path on stdout.
#
#   scripts/package.sh                  # build dir ./build
#   BUILD_DIR=build-rel scripts/package.sh
#
# What the package holds and why: packaging/packaging.cmake, docs/OPERATIONS.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
JOBS="${JOBS:-$(nproc)}"

"$ROOT/scripts/setup.sh"
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
fi
cmake --build "$BUILD_DIR" -j"$JOBS" --target npuprof >&2
rm -f "$BUILD_DIR"/npuprof_*.deb
(cd "$BUILD_DIR" && cpack -G DEB --config CPackConfig.cmake >&2)
deb=("$BUILD_DIR"/npuprof_*.deb)
[[ -f "${deb[0]}" ]] || { echo "package.sh: cpack wrote no npuprof_*.deb in $BUILD_DIR" >&2; exit 1; }
echo "${deb[0]}"
