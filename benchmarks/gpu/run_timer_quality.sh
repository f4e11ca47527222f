#!/usr/bin/env bash
# The Timer quality check on the GPU machine (timer_quality.cc says what it measures). Needs a
# bundle of timer_quality made by scripts/gpu-bundle (FORGE_BUNDLE, default .gpu/). Writes
# $OUT/timer_quality.log and $OUT/timer_quality.json. Reads the clocks; never sets them.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
log="$OUT/timer_quality.log"
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,power.limit,persistence_mode --format=csv
} > "$log"
timeout 240 "$FORGE_BUNDLE/bin/timer_quality" "$OUT/timer_quality.json" 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv >> "$log"
exit "$rc"
