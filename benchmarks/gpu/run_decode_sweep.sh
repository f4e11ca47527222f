#!/usr/bin/env bash
# Issue 22's decode attention check on the GPU machine, one bounded step (about 2 minutes):
#   benchmarks/gpu/run_decode_sweep.sh
# 1. flash_attention_gpu_test: every judged case (the cp.async ring and the register schedule on
#    causal, bool and additive masks, GQA, float32 / float16 / bfloat16, odd KV lengths, views)
#    and the small Llama timing (b1 KV 8192, b8 KV 2048);
# 2. its DISABLED_DecodeSweep: Llama-3-8B's decode attention (bf16, H32 / Hkv 8, D 128) at b1 and
#    b8 over 2048, 8192 and 32768 keys, up to 15 schedule points each, every point judged and timed;
# 3. decode_sweep.py: eager SDPA on the same shapes in the same run, and the table.
# Needs .gpu/ (scripts/gpu-bundle of flash_attention_gpu_test). Writes under $OUT:
# summary.md (the test lines and the table), decode_sweep.md / .json, flash_attention_gpu_test.log
# and decode_sweep_test.log. SWEEP=0 skips steps 2 and 3, TESTS=0 step 1; TESTS_TIMEOUT_S (90),
# SWEEP_TIMEOUT_S (150) and EAGER_TIMEOUT_S (60) bound the steps (a sweep cut short keeps the rows
# it printed, and decode_sweep.py tables them).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
test_binary="$FORGE_BUNDLE/bin/flash_attention_gpu_test"
summary="$OUT/summary.md"
echo "# $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader), $(date -u +%FT%TZ)" > "$summary"
if [ "${TESTS:-1}" != 0 ]; then
  timeout "${TESTS_TIMEOUT_S:-90}" "$test_binary" > "$OUT/flash_attention_gpu_test.log" 2>&1
  forge_gtest_line flash_attention_gpu_test "$OUT/flash_attention_gpu_test.log" $? >> "$summary"
  grep -E "copy bandwidth|^\| b[0-9]|best|FAILED|Failure" "$OUT/flash_attention_gpu_test.log" | sed 's/^/    /' >> "$summary"
fi
if [ "${SWEEP:-1}" != 0 ]; then
  timeout "${SWEEP_TIMEOUT_S:-150}" "$test_binary" --gtest_also_run_disabled_tests --gtest_filter='*DecodeSweep*' \
    > "$OUT/decode_sweep_test.log" 2>&1
  forge_gtest_line "flash_attention_gpu_test DecodeSweep" "$OUT/decode_sweep_test.log" $? >> "$summary"
  grep -E "^best|FAILED|Failure" "$OUT/decode_sweep_test.log" | sed 's/^/    /' >> "$summary"
  timeout "${EAGER_TIMEOUT_S:-60}" python3 "$here/decode_sweep.py" "$OUT/decode_sweep_test.log" "$OUT" >> "$summary" 2>&1
  echo "decode_sweep.py: exit $?" >> "$summary"
fi
cat "$summary"
