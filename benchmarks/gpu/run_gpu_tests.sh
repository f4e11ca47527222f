#!/usr/bin/env bash
# Every GPU test binary of the bundle (.gpu/bin/*_test), on the GPU machine, one log each under
# $OUT, and a summary line per binary in $OUT/gpu_tests.md. The sandbox test finds its child
# through FORGE_SANDBOX_CHILD, and the host-launched tests their source through
# FORGE_HOST_LAUNCH_TEST_SOURCE (they build it with the machine's nvcc); tests that read the
# exported test models (gpu_executor_gpu_test) find them in FORGE_TEST_MODELS, written here as
# ctest's fixtures.make_models writes them.
# GPU_TESTS_EXCLUDE: a regex over binary names to leave out (e.g. cutlass_gemm_gpu_test, whose nvcc
# compiles run_families_check.sh's cutlass phase overlaps). Needs python/forge/v1 carried from the
# build machine.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
export FORGE_SANDBOX_CHILD="$FORGE_BUNDLE/bin/forge-sandbox-child"
# The host-launched tests' source (sandbox_gpu_test, host_launched_test build it with nvcc here).
export FORGE_HOST_LAUNCH_TEST_SOURCE="$here/../../worker/compile/testdata/host_launch_scale.cu"
# Kernels the GPU tests read at run time (tests/gpu/kernel_source.h).
export FORGE_GPU_TEST_KERNELS="$here/../../tests/gpu/kernels"
mkdir -p "$OUT/logs"
export FORGE_TEST_MODELS=/tmp/forge-test-models
python3 "$here/../../tests/fixtures/make_models.py" "$FORGE_TEST_MODELS" \
  > "$OUT/logs/make_models.log" 2>&1 || echo "make_models.py failed: $OUT/logs/make_models.log"
summary="$OUT/gpu_tests.md"
{
  echo "# GPU tests on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(date -u +%F)"
  echo
  echo "| binary | result |"
  echo "|---|---|"
} > "$summary"
for test in "$FORGE_BUNDLE"/bin/*_test; do
  name="$(basename "$test")"
  [ -n "${GPU_TESTS_EXCLUDE:-}" ] && [[ $name =~ $GPU_TESTS_EXCLUDE ]] && continue
  timeout 240 "$test" > "$OUT/logs/$name.log" 2>&1
  rc=$?
  passed=$(grep -c '^\[       OK \]' "$OUT/logs/$name.log")
  failed=$(grep -c '^\[  FAILED  \].*(' "$OUT/logs/$name.log")
  skipped=$(grep -c '^\[  SKIPPED \].*(' "$OUT/logs/$name.log")
  echo "| $name | exit $rc: $passed passed, $failed failed, $skipped skipped |" >> "$summary"
done
(cd "$OUT/logs" && tar czf "$OUT/gpu_test_logs.tar.gz" .) && rm -rf "$OUT/logs"
cat "$summary"
