#!/usr/bin/env bash
# The judge's device path on the GPU machine: the bundle's GPU tests (run_gpu_tests.sh), then
# forge_judge_device_bench on a 2^24- and a 2^28-element task (seconds per candidate: the first,
# later ones judged on the host from the draw cache, later ones on the device), and the first
# candidate of a 2^30-element task with the ATen reference, per stage. Table in
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
  # The first candidate of a 1 G-element task with the production reference (ATen float64 on the
  # GPU), split into the judge's stages: issue 21's target is under 3 s end to end.
  "$FORGE_BUNDLE/bin/forge_judge_device_bench" --elements=1073741824 --reps=1 --reference=aten 2>&1
} | tee "$OUT/judge_device.md"
