#!/usr/bin/env bash
# Configures and builds npuprof into build/ (RelWithDebInfo, Ninja).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
cmake --build build -j"$(nproc)" "$@" >&2   # progress on stderr: stdout is the demo's JSON
