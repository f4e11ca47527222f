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
# A summary row of one GoogleTest binary's run: forge_gtest_line NAME LOG EXIT_CODE.
forge_gtest_line() {
  echo "| $1 | exit $3: $(grep -c '^\[       OK \]' "$2") passed, $(grep -c '^\[  FAILED  \].*(' "$2") failed, $(grep -c '^\[  SKIPPED \].*(' "$2") skipped |"
}
# Header trees the bundle carries as NAME.tar.gz (an `include` folder): unpacked once into
# /tmp/forge-NAME, and VARIABLE names its include folder unless the caller set it.
#   cutlass         FORGE_CUTLASS_INCLUDE: the worker's nvcc compiles, the runtime's host-launched
#                   steps (tar -C ~/.cache/forge/cutlass-4.2.0.0 -czf .gpu/cutlass.tar.gz include)
#   cudnn-frontend  FORGE_CUDNN_FRONTEND_INCLUDE: the runtime's cudnn_conv steps
#                   (python/forge/runtime/cudnn.py; tar -C ~/.cache/forge/cudnn-frontend-1.16.0 ...)
forge_unpack_headers() {  # NAME VARIABLE
  [ -z "${!2:-}" ] && [ -f "$FORGE_BUNDLE/$1.tar.gz" ] || return 0
  mkdir -p "/tmp/forge-$1" && tar -C "/tmp/forge-$1" -xzf "$FORGE_BUNDLE/$1.tar.gz" &&
    export "$2=/tmp/forge-$1/include"
}
forge_unpack_headers cutlass FORGE_CUTLASS_INCLUDE
forge_unpack_headers cudnn-frontend FORGE_CUDNN_FRONTEND_INCLUDE
