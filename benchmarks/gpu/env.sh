# Sourced by the GPU scripts on the GPU machine: library paths for a bundle made by
# scripts/gpu-bundle (carried as .gpu/), LibTorch from the machine's PyTorch, CUDA from its toolkit.
# shellcheck shell=bash
FORGE_BUNDLE="${FORGE_BUNDLE:-$PWD/.gpu}"
# A packed bundle (scripts/gpu-bundle --pack .gpu-pack .gpu, carried as .gpu-pack): unpack it once.
if [ ! -d "$FORGE_BUNDLE/bin" ] && [ -f "$PWD/.gpu-pack/bundle.tar.xz" ]; then
  mkdir -p "$FORGE_BUNDLE" && tar -xJf "$PWD/.gpu-pack/bundle.tar.xz" -C "$FORGE_BUNDLE"
  for extra in cutlass.tar.gz cudnn-frontend.tar.gz; do
    [ -f "$PWD/.gpu-pack/$extra" ] && cp "$PWD/.gpu-pack/$extra" "$FORGE_BUNDLE/"
  done
fi
FORGE_TORCH_LIB="$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
# nvidia/cu13/lib (CUDA's libraries) and nvidia/cudnn/lib (libcudnn.so.9, which the sandbox child
# and the cudnn_conv binaries link) of the machine's torch wheels.
FORGE_NVIDIA_LIBS="$(python3 -c 'import nvidia, os; print(":".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in ("cu13", "cudnn")))' 2>/dev/null || true)"
export LD_LIBRARY_PATH="$FORGE_BUNDLE/lib:$FORGE_TORCH_LIB:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:$FORGE_NVIDIA_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OUT="${OUT:-/tmp/forge-out}"
mkdir -p "$OUT"
# CUTLASS's headers (carried as .gpu/cutlass.tar.gz, see run_families_check.sh's header): the
# worker's nvcc compiles and the runtime's host-launched steps need them.
if [ -z "${FORGE_CUTLASS_INCLUDE:-}" ] && [ -f "$FORGE_BUNDLE/cutlass.tar.gz" ]; then
  mkdir -p /tmp/forge-cutlass && tar -C /tmp/forge-cutlass -xzf "$FORGE_BUNDLE/cutlass.tar.gz" &&
    export FORGE_CUTLASS_INCLUDE=/tmp/forge-cutlass/include
fi
# The cuDNN frontend's headers (carried as .gpu/cudnn-frontend.tar.gz: tar -C
# ~/.cache/forge/cudnn-frontend-1.16.0 -czf .gpu/cudnn-frontend.tar.gz include): the runtime's
# cudnn_conv steps build against them (python/forge/runtime/cudnn.py).
if [ -z "${FORGE_CUDNN_FRONTEND_INCLUDE:-}" ] && [ -f "$FORGE_BUNDLE/cudnn-frontend.tar.gz" ]; then
  mkdir -p /tmp/forge-cudnn-frontend &&
    tar -C /tmp/forge-cudnn-frontend -xzf "$FORGE_BUNDLE/cudnn-frontend.tar.gz" &&
    export FORGE_CUDNN_FRONTEND_INCLUDE=/tmp/forge-cudnn-frontend/include
fi
