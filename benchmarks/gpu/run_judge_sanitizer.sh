#!/usr/bin/env bash
# Issue 20 on the GPU machine (a few minutes): the compute-sanitizer step on would-be bests
# (sanitizer_gpu_test: an out-of-bounds read, a shared-memory race and an uninitialized read that
# pass the judge's comparison are rejected by memcheck, racecheck and initcheck; an honest kernel
# passes all four tools; the step's seconds per case), every planted bug kind and the judge's
# false-rejection side (planted_bugs_test; its NoFalseRejection suite: correct kernels with other
# summation orders, fast exp, atomics, Kahan, Welford and shuffle trees judged 50 times in a row
# with seeds of their own, and a correct kernel reading a 1 MiB pageable upload judged 150
# times; PLANTED_FILTER narrows it, PLANTED_TIMEOUT_S bounds it), and the judge's cost per
# candidate with and without launch capture, and the sanitizer step's (judge_cost_bench).
# Everything in $OUT/judge_sanitizer.md; the gtest logs in $OUT/judge_sanitizer_logs/.
# Bundle: scripts/gpu-bundle .gpu build/tests/gpu/sanitizer_gpu_test build/tests/gpu/planted_bugs_test
#   build/benchmarks/gpu/judge_cost_bench build/worker/sandbox/forge-sandbox-child
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
export FORGE_SANDBOX_CHILD="$FORGE_BUNDLE/bin/forge-sandbox-child"
export FORGE_GPU_TEST_KERNELS="$here/../../tests/gpu/kernels"
logs="$OUT/judge_sanitizer_logs"
mkdir -p "$logs"
{
  echo "# Issue 20 on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(date -u +%F), commit ${COMMIT:-unknown}"
  echo
  tool="$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)"
  echo "compute-sanitizer: ${tool:-none} $("${tool:-false}" --version 2>/dev/null | tail -1)"
  echo
  echo "| binary | result |"
  echo "|---|---|"
  timeout 240 "$FORGE_BUNDLE/bin/sanitizer_gpu_test" > "$logs/sanitizer_gpu_test.log" 2>&1
  forge_gtest_line sanitizer_gpu_test "$logs/sanitizer_gpu_test.log" $?
  # PLANTED_FILTER: the planted bugs' suites to run (default: all of them, the bug kinds and
  # the false-rejection side; 'NoFalseRejection*' for the latter alone).
  timeout "${PLANTED_TIMEOUT_S:-300}" "$FORGE_BUNDLE/bin/planted_bugs_test" \
    --gtest_filter="${PLANTED_FILTER:-*}" > "$logs/planted_bugs.log" 2>&1
  forge_gtest_line "planted_bugs_test ${PLANTED_FILTER:-*}" "$logs/planted_bugs.log" $?
  echo
  grep -h -E 'sanitizer step on|judges passed|FAILED|Failure|rejection:' \
    "$logs/sanitizer_gpu_test.log" "$logs/planted_bugs.log" | sed 's/^/    /'
  echo
  timeout 180 "$FORGE_BUNDLE/bin/judge_cost_bench" \
    --kernels="$FORGE_GPU_TEST_KERNELS/sanitizer_bugs.cuh" --child="$FORGE_SANDBOX_CHILD" --reps=3 2>&1
} | tee "$OUT/judge_sanitizer.md"
