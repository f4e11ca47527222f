#!/usr/bin/env bash
# The judge's device path on the GPU machine: the bundle's GPU tests (run_gpu_tests.sh), then
# forge_judge_device_bench on a 2^24- and a 2^28-element task (seconds per candidate: the first,
# later ones judged on the host from the draw cache, later ones on the device). Table in
# $OUT/judge_device.md.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
bash "$here/run_gpu_tests.sh"
{
  echo "# The judge per candidate, host vs device path: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(date -u +%F), commit ${COMMIT:-unknown}"
  echo
  for elements in 16777216 268435456; do
    "$FORGE_BUNDLE/bin/forge_judge_device_bench" --elements=$elements --reps=3 2>&1
    echo
  done
} | tee "$OUT/judge_device.md"
