#!/usr/bin/env bash
# The cudnn_conv family on the GPU machine: its GPU tests (cudnn_conv_executor_test,
# cudnn_conv_gpu_test: judged in float16, bfloat16 and float32), then cudnn_conv_bench (every
# schedule point judged and timed, the best against the unfused ATen chain) and conv_eager.py
# (PyTorch eager, cudnn.benchmark off and on) on the same problems. Needs .gpu/ (scripts/gpu-bundle
# of cudnn_conv_executor_test, cudnn_conv_gpu_test and cudnn_conv_bench; cuDNN comes with the
# machine's torch). Writes the logs and summary.md under $OUT.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
summary="$OUT/summary.md"
for test in cudnn_conv_executor_test cudnn_conv_gpu_test; do
  "$FORGE_BUNDLE/bin/$test" >"$OUT/$test.log" 2>&1
  echo "| $test | exit $?: $(grep -c '^\[       OK \]' "$OUT/$test.log") passed, $(grep -c '^\[  FAILED  \].*(' "$OUT/$test.log") failed |" >>"$summary"
done
if [ "${CONV_BENCH:-1}" != 0 ]; then
  "$FORGE_BUNDLE/bin/cudnn_conv_bench" >"$OUT/cudnn_conv_bench.txt" 2>"$OUT/cudnn_conv_bench.points.txt"
  (cd "$here" && python3 conv_eager.py) >"$OUT/conv_eager.txt" 2>&1
  { echo '```'; cat "$OUT/cudnn_conv_bench.txt" "$OUT/conv_eager.txt"; echo '```'; } >>"$summary"
fi
cat "$summary"
