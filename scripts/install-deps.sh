#!/usr/bin/env bash
# Installs the Debian 12 packages conflux needs to build and test.
# --list-build prints the packages the build alone needs, and installs nothing.
set -euo pipefail
# What building the library, the `conflux` tool and the Python module
# needs. scripts/in-debian13 installs these (and torch) into its Debian 13
# root too, reading them with --list-build.
build_packages=(
  cmake ninja-build g++ pkg-config
  libhwloc-dev libfabric-dev libpugixml-dev libcli11-dev libssl-dev nlohmann-json3-dev
  pybind11-dev python3-dev python3-numpy
)
# What the tests, the sanitizer and fuzz builds, the benchmarks and CI need besides.
test_packages=(
  clang libgtest-dev libbenchmark-dev
  qemu-system-x86 ovmf linux-image-cloud-amd64 busybox-static cpio libvirt-clients
  python3-torch libtorch-dev
  openmpi-bin libopenmpi-dev mpich libmpich-dev libgloo-dev python3-matplotlib
  python3-pip python3-setuptools python3-wheel python3-venv
  debootstrap  # scripts/in-debian13: the Debian 13 root with torch 2.x for the torch tests
  iperf3       # bench/line_rate: one TCP stream's goodput, the reference on shaped links
)
if [ "${1:-}" = --list-build ]; then
  printf '%s\n' "${build_packages[@]}"
  exit 0
fi
packages=("${build_packages[@]}" "${test_packages[@]}")
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
