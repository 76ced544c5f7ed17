#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install, build, then run
# `npuprof demo` (a simulated Ascend target on this machine, driven end to end).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh --target npuprof
exec build/cli/npuprof demo "$@"
