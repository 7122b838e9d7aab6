#!/usr/bin/env bash
# Installs everything convtune needs to build and test on Debian 12.
# Idempotent and non-interactive; run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  protobuf-compiler libprotobuf-dev
  libgrpc++-dev protobuf-compiler-grpc
  librocksdb-dev libabsl-dev libtoml11-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev
  # oneDNN's CMake config (dnnl-config.cmake) requires OpenCL's headers and
  # loader, which --no-install-recommends leaves out.
  libdnnl-dev ocl-icd-opencl-dev opencl-headers
  libamdhip64-dev
  clang-format
  # The tests make TLS certificates with the openssl command.
  openssl
  # The cluster tier: hiredis to build, a Redis server for its tests.
  libhiredis-dev redis-server
  # The Python package and its tests (run with /usr/bin/python3).
  python3 python3-grpcio python3-protobuf python3-numpy python3-torch
  # The deployment files' test reads the Kubernetes manifests.
  python3-yaml
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
