#!/usr/bin/env bash
# Installs the Debian 12 packages npuprof needs to build, test and run its demo.
# Idempotent; run as root (or with sudo available).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ccache
  libzmq3-dev cppzmq-dev libprotobuf-dev protobuf-compiler librocksdb-dev
  libssh-dev libssl-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libpng-dev
  openssh-server openssh-client python3
  clang libclang-rt-14-dev  # scripts/fuzz.sh: libFuzzer + ASan/UBSan runtimes
  chromium  # tests/views: the HTML reports rendered in a real headless browser
  file dpkg-dev systemd  # scripts/package.sh: CPack's shlibdeps runs file and dpkg-shlibdeps; systemd-analyze checks the unit
  prometheus  # promtool: the metrics tests lint /metrics with `promtool check metrics`
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
