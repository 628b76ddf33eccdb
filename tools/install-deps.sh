#!/usr/bin/env bash
# Installs every Debian 12 package that berth's build, tests, benchmarks and demo need, or with
# --demo only what building the programs and running tools/demo.sh need.
# Idempotent: packages already present are left alone, so README, .ci/run and the
# Dockerfile can all call it unconditionally.
set -euo pipefail

# The programs' build and the demo: berthd, berthctl, berthgen and berth-announcer.
packages=(
  build-essential pkg-config meson ninja-build ccache python3
  dpdk dpdk-dev libdpdk-dev
  libabsl-dev libyaml-cpp-dev libboost-math-dev libpcap-dev libnl-route-3-dev
  libcurl4-openssl-dev nlohmann-json3-dev libssl-dev libsystemd-dev
)
if [[ ${1:-} != --demo ]]; then
  # Tests, benchmarks, fuzzing, formatting, packaging and the test networks' peers.
  packages+=(
    libgtest-dev libgmock-dev libbenchmark-dev clang clang-format
    python3-scapy python3-yaml
    prometheus
    iproute2 ethtool tcpdump iputils-ping curl wrk nftables
    nginx-light haproxy
    bird2
    etcd-server etcd-client
    debhelper lintian debootstrap
    valgrind strace
  )
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing packages (${missing[*]}); run as root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
echo "install-deps: all ${#packages[@]} packages present"
