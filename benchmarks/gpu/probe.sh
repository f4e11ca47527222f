#!/usr/bin/env bash
# First look at a GPU machine: what it has, and whether binaries built on Debian 12 run there.
set -uo pipefail
source "$(dirname "$0")/env.sh"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
  ls /usr/local/cuda/lib64 | grep -E '^lib(nvrtc|cupti|cuda|cublasLt)\.so' || true
  find / -xdev -name 'libcupti.so*' 2>/dev/null | head -5
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  for t in "$FORGE_BUNDLE"/bin/*; do
    echo "== $(basename "$t")"; ldd "$t" | grep 'not found' || true
    "$t" --gtest_brief=1 2>&1 | tail -3
  done
} 2>&1 | tee "$OUT/probe.log"
