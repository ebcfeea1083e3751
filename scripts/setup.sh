#!/usr/bin/env bash
# Installs everything Morpheus needs on Debian 12 (as root) and builds it.
# Idempotent: packages already present are not reinstalled, and the build is
# incremental. Used by `make demo`, `make test` and CI.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  clang-19 llvm-19-dev llvm-19-tools libpolly-19-dev   # compiler, BPF backend, FileCheck
  libbpf-dev bpftool libelf-dev zlib1g-dev libzstd-dev # loader
  libgtest-dev libgmock-dev nlohmann-json3-dev libpcap-dev libcli11-dev
  dpdk-dev                                             # user-space backend I/O (net_pcap, net_null)
  libcpp-httplib-dev                                   # the agent's /metrics (runtime/MetricsServer)
  cmake ninja-build iproute2 python3-pip
  xdp-tools                                            # xdp-loader: a foreign loader the agent tests adopt from
  podman runc mmdebstrap eatmydata                     # the agent's container image (deploy/image) and its tests
  systemd                                              # systemd-analyze verifies deploy/systemd's unit
  sockperf iperf3 qperf ethtool                       # tools/cni_chain.py: latency, throughput, pods' checksum offload
)

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: run as root (installs packages; the tests load BPF programs)" >&2
  exit 1
fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if ! command -v lit >/dev/null 2>&1 || ! python3 -m pytest --version >/dev/null 2>&1 ||
  ! python3 -c "import matplotlib" >/dev/null 2>&1 ||
  ! python3 -c "import prometheus_client" >/dev/null 2>&1 ||
  ! python3 -c "import kubernetes_validate" >/dev/null 2>&1; then
  echo "setup: installing the Python tools (requirements.txt: lit, pytest, matplotlib," \
    "prometheus-client, kubernetes-validate) from PyPI"
  # Debian's own python3 refuses plain pip installs (PEP 668).
  python3 -m pip install -q -r requirements.txt 2>/dev/null ||
    python3 -m pip install -q --break-system-packages -r requirements.txt
fi

build=${BUILD_DIR:-build}
# clang-19 compiles Morpheus (LLVM's headers) about 1.5x faster than gcc 12.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 >/dev/null
ninja -C "$build"
