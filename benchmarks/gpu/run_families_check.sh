#!/usr/bin/env bash
# After a change to the kernel families or the judge: on the GPU machine, in phases
#   benchmarks/gpu/run_families_check.sh [tests] [cutlass] [validate] [anchor]
#   (default: tests cutlass validate)
#  tests:    the judge's planted bugs (guard zones included) and the host-launched path
#            (host_launched_test, sandbox_gpu_test).
#  cutlass:  cutlass_gemm_gpu_test. Its cases run as parallel processes first (their nvcc compiles
#            overlap; a disk cache keeps the objects), then its timed cases again one at a time,
#            alone on the GPU (CUTLASS_CASES / CUTLASS_TIMED: regexes over the case names),
#            and eager matmul on their shapes in the same run (eager_matmul.py).
#  validate: every validate problem of VALIDATE_FAMILIES (default: pointwise (glue included),
#            reduction, scan and stencil), judged.
#  anchor:   ANCHORS (default: the group norm, label-smoothed cross-entropy and cumsum anchors)
#            timed and judged, with eager and torch.compile in the same run.
#  gemv:     gemv_gpu_test (every case judged; the bf16 4096 -> 14336 decode shape, M = 1 and 8,
#            timed at several points against the copy bandwidth), then the two decode anchors
#            (gemv_{1,8}x4096x14336_bf16: the gemv family beside cuBLASLt and CUTLASS, its likely
#            best points requested, eager and torch.compile in the same run; GEMV_ANCHORS=0 skips
#            them).
#  decode:   flash_attention_gpu_test (every case judged; Llama-3-8B's decode attention, b1 KV 8192
#            and b8 KV 2048, timed at several points against the copy bandwidth), then the
#            attention validate problems and the decode anchors
#            (decode_b{1,8}_h32_kv{2048,8192,32768}_d128_bf16: flash_attention beside
#            sdpa_library's backends, likely good splits requested, eager and torch.compile in
#            the same run; DECODE_ANCHORS=0 skips them, DECODE_SAMPLES sets the sampled points,
#            default 12).
#  conv:     the cudnn_conv family: run_cudnn_conv.sh (its GPU tests, then cudnn_conv_bench and
#            conv_eager.py unless CONV_BENCH=0).
# Needs .gpu/ (scripts/gpu-bundle of planted_bugs_test, host_launched_test, sandbox_gpu_test,
# cutlass_gemm_gpu_test, gemv_gpu_test, flash_attention_gpu_test, forge-sandbox-child,
# generators_bench),
# .gpu/cutlass.tar.gz (the CUTLASS headers: tar -C ~/.cache/forge/cutlass-4.2.0.0 -czf
# .gpu/cutlass.tar.gz include) and python/forge/v1. Writes summary.md and the generator run's files under $OUT.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
phases=" ${*:-tests cutlass validate} "
export FORGE_SANDBOX_CHILD="$FORGE_BUNDLE/bin/forge-sandbox-child"
export FORGE_HOST_LAUNCH_TEST_SOURCE="$here/../../worker/compile/testdata/host_launch_scale.cu"
[ -n "${FORGE_CUTLASS_INCLUDE:-}" ] || { echo "run_families_check.sh: no $FORGE_BUNDLE/cutlass.tar.gz"; exit 2; }
export FORGE_TEST_COMPILE_CACHE=/tmp/forge-compile-cache
logs=/tmp/forge-check-logs; mkdir -p "$logs"
summary="$OUT/summary.md"
echo "# $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader), $(date -u +%FT%TZ)" >> "$summary"

{ echo; echo "| test | result |"; echo "|---|---|"; } >> "$summary"
if [[ $phases == *" cutlass "* ]]; then
  cutlass="$FORGE_BUNDLE/bin/cutlass_gemm_gpu_test"
  cases=$("$cutlass" --gtest_list_tests | awk '/^[^ ]/{suite=$1} /^  /{print suite $1}' | grep "${CUTLASS_CASES:-.}")
  pids=()
  for c in $cases; do
    timeout 420 "$cutlass" --gtest_filter="$c" > "$logs/cutlass_$c.log" 2>&1 & pids+=($!)
  done
fi
if [[ $phases == *" tests "* ]]; then
  for t in planted_bugs_test host_launched_test sandbox_gpu_test; do
    timeout 300 "$FORGE_BUNDLE/bin/$t" > "$logs/$t.log" 2>&1
    forge_gtest_line "$t" "$logs/$t.log" $? >> "$summary"
  done
fi
if [[ $phases == *" cutlass "* ]]; then
  wait "${pids[@]}"
  for c in $cases; do forge_gtest_line "cutlass_gemm_gpu_test $c (parallel)" "$logs/cutlass_$c.log" 0 >> "$summary"; done
  for c in $(echo "$cases" | grep "${CUTLASS_TIMED:-IsTimed}"); do
    timeout 200 "$cutlass" --gtest_filter="$c" > "$logs/cutlass_timed_$c.log" 2>&1
    forge_gtest_line "cutlass_gemm_gpu_test $c (alone)" "$logs/cutlass_timed_$c.log" $? >> "$summary"
    grep -i "tflop" "$logs/cutlass_timed_$c.log" | sed 's/^/    /' >> "$summary"
  done
  grep -h "max abs error" "$logs"/cutlass_Cutlass*.log | sed 's/^/    /' >> "$summary"
  # Eager on the timed cases' shapes, in this run (ratios within one run).
  python3 "$here/eager_matmul.py" bf16:8192:8192:8192 f32:4096:4096:4096 | sed 's/^/    /' >> "$summary"
fi
if [[ $phases == *" validate "* ]]; then
  ONLY=""
  for family in ${VALIDATE_FAMILIES:-pointwise reduction scan stencil}; do
    ONLY="$ONLY $(python3 "$here/problems.py" names "$family" validate)"
  done
  export ONLY
  VALIDATE_TIMEOUT_S=420 bash "$here/run_generators.sh" validate > "$logs/generators_validate.log" 2>&1
  echo "validate: exit $?" >> "$summary"
fi
if [[ $phases == *" anchor "* ]]; then
  export ONLY="${ANCHORS:-group_norm_silu_16x320x64x64_f16 group_norm_silu_2x320x64x64_f16 cross_entropy_smoothed_8192x32000_bf16 cumsum_32768x4096_f32 cumsum_8x4194304_f32}"
  ANCHOR_TIMEOUT_S=240 BASELINES_TIMEOUT_S=200 bash "$here/run_generators.sh" anchor baselines > "$logs/generators_anchor.log" 2>&1
  echo "anchor: exit $?" >> "$summary"
fi
if [[ $phases == *" gemv "* ]]; then
  timeout 500 "$FORGE_BUNDLE/bin/gemv_gpu_test" > "$logs/gemv_gpu_test.log" 2>&1
  forge_gtest_line gemv_gpu_test "$logs/gemv_gpu_test.log" $? >> "$summary"
  grep -E "copy bandwidth|^\| M=" "$logs/gemv_gpu_test.log" | sed 's/^/    /' >> "$summary"
  [ "${GEMV_ANCHORS:-1}" = 0 ] || ONLY="gemv_1x4096x14336_bf16 gemv_8x4096x14336_bf16" FORGE_BENCH_SAMPLES="${GEMV_SAMPLES:-6}" \
    FORGE_BENCH_POINTS="unroll=4;split_k=2;rows=4,unroll=1;rows=8,unroll=1;rows=1,unroll=4;warps=8,rows=1;split_k=4,unroll=4;rows=2,unroll=8;unroll=8;unroll=2;l2_prefetch=1;tiles=2;tiles=2,unroll=2;warps=8,unroll=2;split_k=2,unroll=8,l2_prefetch=1" \
    ANCHOR_TIMEOUT_S=420 BASELINES_TIMEOUT_S=200 bash "$here/run_generators.sh" anchor baselines \
    > "$logs/generators_gemv.log" 2>&1
  echo "gemv anchors: exit $?" >> "$summary"
fi
if [[ $phases == *" decode "* ]]; then
  timeout 500 "$FORGE_BUNDLE/bin/flash_attention_gpu_test" > "$logs/flash_attention_gpu_test.log" 2>&1
  forge_gtest_line flash_attention_gpu_test "$logs/flash_attention_gpu_test.log" $? >> "$summary"
  grep -E "copy bandwidth|^\| b[0-9]|best" "$logs/flash_attention_gpu_test.log" | sed 's/^/    /' >> "$summary"
  if [ "${DECODE_ANCHORS:-1}" != 0 ]; then
    ONLY="$(python3 "$here/problems.py" names attention validate) $(python3 "$here/problems.py" names attention anchor)" \
      FORGE_BENCH_SAMPLES="${DECODE_SAMPLES:-12}" VALIDATE_TIMEOUT_S=420 ANCHOR_TIMEOUT_S=500 \
      FORGE_BENCH_POINTS="stages=0,max_registers=0;stages=0;stages=2;stages=3;max_registers=0;split_keys=256;split_keys=512;split_keys=1024;split_keys=2048;warps=8,unroll=1,stages=2;unroll=1;split_keys=512,warps=8,unroll=1,stages=2;split_keys=1024,unroll=4,stages=2,max_registers=0" \
      BASELINES_TIMEOUT_S=200 bash "$here/run_generators.sh" validate anchor baselines \
      > "$logs/generators_decode.log" 2>&1
    echo "decode validate + anchors: exit $?" >> "$summary"
  fi
fi
if [[ $phases == *" conv "* ]]; then
  mkdir -p "$OUT/conv" && OUT="$OUT/conv" bash "$here/run_cudnn_conv.sh" > "$logs/conv.log" 2>&1
  echo "conv: exit $?" >> "$summary"
  grep '^| cudnn' "$OUT/conv/summary.md" >> "$summary"
fi
[ -f "$OUT/table.md" ] || python3 "$here/problems.py" report "$OUT" >/dev/null 2>&1
(cd "$logs" && tar czf "$OUT/logs.tar.gz" .)
cat "$summary"
grep -v '^| [a-z0-9_]* | [a-z_]* | [0-9]* | [0-9]* | [0-9]* | 0 | 0 |  |$' "$OUT/table.md" 2>/dev/null | head -60
