#!/usr/bin/env bash
# The judge's device path on the GPU machine: the bundle's GPU tests (run_gpu_tests.sh), then
# forge_judge_device_bench on a 2^24- and a 2^28-element task (seconds per candidate: the first,
# later ones judged on the host from the draw cache, later ones on the device), and the first
# candidate of a 2^28- and a 2^30-element task with the production reference (draws and
# references on the device), per stage. Table in $OUT/judge_device.md.
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
  # The first candidate with the production reference: draws made on the device, ATen float64
  # on the GPU from device memory, compared there; then later candidates on the resident draws.
  # 2^28 also through the host, as before (--host-first: 40 s there in session 19). Issue 21's
  # target: the first candidate of a 1 G-element task in under 3 s end to end.
  "$FORGE_BUNDLE/bin/forge_judge_device_bench" --elements=268435456 --reps=3 --reference=aten --host-first 2>&1
  echo
  "$FORGE_BUNDLE/bin/forge_judge_device_bench" --elements=1073741824 --reps=3 --reference=aten 2>&1
} | tee "$OUT/judge_device.md"
