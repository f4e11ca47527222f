#!/usr/bin/env bash
# The generator benchmark on the GPU machine, end to end (README.md beside this file):
#   benchmarks/gpu/run_generators.sh [validate] [anchor] [baselines]   (default: all three)
# ONLY="name ..." restricts the C++ phases to those problems (`problems.py names FAMILY MODE` lists
# a family's); VALIDATE_TIMEOUT_S (default 180) bounds each validate attempt, ANCHOR_TIMEOUT_S
# (default 150) the anchors, BASELINES_TIMEOUT_S (default 120) the baselines.
# Needs .gpu/ (scripts/gpu-bundle of generators_bench) and python/forge/v1 (generated protocol
# classes) carried from the build machine. Writes logs, JSON lines and table.md under $OUT.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
phases="${*:-validate anchor baselines}"
problems=/tmp/forge-problems
bench="$FORGE_BUNDLE/bin/generators_bench"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv \
  | tee "$OUT/validate.log"
python3 "$here/problems.py" export "$problems" 2>&1 | tee -a "$OUT/validate.log"

if [[ " $phases " == *" validate "* ]]; then
  # Exit code 75: a kernel killed the CUDA context; the rerun skips the problems already written.
  for attempt in 1 2 3 4 5 6; do
    timeout "${VALIDATE_TIMEOUT_S:-180}" "$bench" validate "$problems" "$OUT/validate.jsonl" ${ONLY:-} 2>&1 | tee -a "$OUT/validate.log"
    [ "${PIPESTATUS[0]}" -eq 75 ] || break
  done
fi
if [[ " $phases " == *" anchor "* ]]; then
  timeout "${ANCHOR_TIMEOUT_S:-150}" "$bench" anchor "$problems" "$OUT/anchors.jsonl" ${ONLY:-} 2>&1 | tee "$OUT/anchors.log"
fi
if [[ " $phases " == *" baselines "* ]]; then
  timeout "${BASELINES_TIMEOUT_S:-120}" python3 "$here/problems.py" baselines "$OUT/baselines.json" 2>&1 \
    | grep -v Warning | tee "$OUT/baselines.log"
fi
python3 "$here/problems.py" report "$OUT"
