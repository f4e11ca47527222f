#!/usr/bin/env bash
# Installs the CUDA toolkit into a Debian 12 image's build stage, from NVIDIA's Debian 12 package
# repository, so that scripts/setup finds it at /usr/local/cuda. Forge compiles against the toolkit
# (NVRTC, cuBLASLt, CUPTI, the driver API headers and stub); the runtime images carry only the
# libraries the binaries load (deploy/stage-runtime.sh), never the toolkit.
#   deploy/install-cuda-toolkit.sh VERSION      VERSION as NVIDIA's packages spell it: 13-0
set -euo pipefail
version="${1:?usage: install-cuda-toolkit.sh VERSION (e.g. 13-0)}"
repository="https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends ca-certificates curl
curl -fsSL "$repository/cuda-keyring_1.1-1_all.deb" -o /tmp/cuda-keyring.deb
dpkg -i /tmp/cuda-keyring.deb
apt-get update -q
apt-get install -y -q --no-install-recommends "cuda-toolkit-$version"
rm -rf /var/lib/apt/lists/* /tmp/cuda-keyring.deb
test -x /usr/local/cuda/bin/nvcc || { echo "install-cuda-toolkit: no /usr/local/cuda/bin/nvcc after installing cuda-toolkit-$version" >&2; exit 1; }
