#!/usr/bin/env bash
# Installs the Debian 12 packages conflux needs to build and test.
set -euo pipefail
packages=(
  cmake ninja-build g++ clang pkg-config
  libhwloc-dev libfabric-dev libpugixml-dev libcli11-dev libssl-dev
  libgtest-dev libbenchmark-dev nlohmann-json3-dev
  qemu-system-x86 ovmf linux-image-cloud-amd64 busybox-static cpio libvirt-clients
  pybind11-dev python3-dev python3-numpy python3-torch libtorch-dev
  openmpi-bin libopenmpi-dev mpich libmpich-dev libgloo-dev python3-matplotlib
  python3-pip python3-setuptools python3-wheel python3-venv
  debootstrap  # scripts/in-debian13: the Debian 13 root with torch 2.x for the torch tests
)
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
