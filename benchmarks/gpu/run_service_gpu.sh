#!/usr/bin/env bash
# The service on the GPU machine, in one call (bundle built here by scripts/gpu-bundle, carried as
# .gpu/, with the exported test models in .gpu/models):
#  1. the GPU tests of the worker's path: sandbox (all candidate kinds), judge draw cache and
#     planted bugs, the GPU executor;
#  2. the throughput benchmark with one real worker (benchmarks/service/run_throughput.sh gpu),
#     then a llama_block job with the default budget and its result bundle.
# Logs, tables and the bundle land under $OUT.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
export FORGE_SANDBOX_CHILD="$FORGE_BUNDLE/bin/forge-sandbox-child"
export FORGE_TEST_MODELS="$FORGE_BUNDLE/models"
mkdir -p "$OUT/logs"
{
  echo "# GPU tests on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(date -u +%F)"
  echo; echo "| binary | result | seconds |"; echo "|---|---|---:|"
} > "$OUT/gpu_tests.md"
for name in ${GPU_TESTS-sandbox_kinds_gpu_test gpu_executor_gpu_test planted_bugs_test sandbox_gpu_test}; do
  started=$(date +%s)
  timeout 200 "$FORGE_BUNDLE/bin/$name" > "$OUT/logs/$name.log" 2>&1
  rc=$?
  passed=$(grep -c '^\[       OK \]' "$OUT/logs/$name.log")
  failed=$(grep -c '^\[  FAILED  \].*(' "$OUT/logs/$name.log")
  skipped=$(grep -c '^\[  SKIPPED \]' "$OUT/logs/$name.log")
  echo "| $name | exit $rc: $passed passed, $failed failed, $skipped skipped | $(( $(date +%s) - started )) |" >> "$OUT/gpu_tests.md"
done
cat "$OUT/gpu_tests.md"

# The workload: the test models plus many small models of distinct shapes (torch.export here).
models="$(mktemp -d)"
cp -r "$FORGE_BUNDLE/models/." "$models/"
python3 "$here/../service/make_throughput_models.py" "$models" > "$OUT/logs/workload.txt"
MODELS="llama_block mlp layer_norm_gelu mixed_precision_softmax $(tr '\n' ' ' < "$OUT/logs/workload.txt")" \
DURATION="${DURATION:-150}" COMPILE_THREADS="${COMPILE_THREADS:-14}" RESULTS_MODEL=llama_block \
  bash "$here/../service/run_throughput.sh" "$FORGE_BUNDLE/bin" "$models" \
  "$OUT/service" gpu > "$OUT/logs/throughput.log" 2>&1
tail -20 "$OUT/logs/throughput.log"
cp "$OUT/service/throughput.md" "$OUT/throughput.md" 2>/dev/null
cp "$OUT/service/bundle/report.md" "$OUT/llama_block_report.md" 2>/dev/null
cp "$OUT/service/bundle/"*.png "$OUT/" 2>/dev/null
(cd "$OUT" && tar czf logs.tar.gz logs service && rm -rf logs service)
