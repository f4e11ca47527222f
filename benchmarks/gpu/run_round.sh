#!/usr/bin/env bash
# One device call after a round of family changes, time-bounded to fit the device's 600 s:
#  1. PARALLEL_TESTS (GPU test binaries of the bundle, judged correctness; their timings are not
#     used) run at once, each under TEST_TIMEOUT_S, while
#  2. VALIDATE (problem names of problems.py, validate mode) are judged by generators_bench;
#  3. then TIMED_TESTS run one at a time, alone on the GPU (they print times);
#  4. then ANCHORS (problems.py anchor names) are timed and judged with eager and torch.compile in
#     the same run (run_generators.sh anchor baselines; FORGE_BENCH_POINTS and
#     FORGE_BENCH_SAMPLES as that script takes them), under ANCHOR_BUDGET_S.
# Needs the bundle (.gpu or .gpu-pack: scripts/gpu-bundle) with the named tests, generators_bench
# and forge-sandbox-child, and python/forge/v1. Writes round.md (one line per test, then
# problems.py's report: the validate sweep per problem and per family, the anchors' table) and
# logs.tar.gz under $OUT. The logs are packed at the end: bound the phases so that the whole
# round ends inside the device's limit, or they are lost.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
export FORGE_SANDBOX_CHILD="$FORGE_BUNDLE/bin/forge-sandbox-child"
export FORGE_TEST_COMPILE_CACHE=/tmp/forge-compile-cache
logs=/tmp/forge-round-logs; mkdir -p "$logs"
summary="$OUT/round.md"
# Tests that read the exported test models (sdpa_library_gpu_test) find them here.
export FORGE_TEST_MODELS=/tmp/forge-test-models
python3 "$here/../../tests/fixtures/make_models.py" "$FORGE_TEST_MODELS" \
  > "$logs/make_models.log" 2>&1 || echo "make_models.py failed: $logs/make_models.log"
echo "# $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader), $(date -u +%FT%TZ)" > "$summary"
{ echo; echo "| test | result |"; echo "|---|---|"; } >> "$summary"
pids=(); names=()
for t in ${PARALLEL_TESTS:-}; do
  timeout "${TEST_TIMEOUT_S:-300}" "$FORGE_BUNDLE/bin/$t" > "$logs/$t.log" 2>&1 & pids+=($!); names+=("$t")
done
if [ -n "${VALIDATE:-}" ]; then
  ONLY="$VALIDATE" VALIDATE_TIMEOUT_S="${VALIDATE_BUDGET_S:-240}" \
    bash "$here/run_generators.sh" validate > "$logs/validate.log" 2>&1
  echo "| validate ($(echo $VALIDATE | wc -w) problems) | exit $? |" >> "$summary"
fi
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"; forge_gtest_line "${names[$i]}" "$logs/${names[$i]}.log" $? >> "$summary"
done
for t in ${TIMED_TESTS:-}; do
  timeout "${TEST_TIMEOUT_S:-300}" "$FORGE_BUNDLE/bin/$t" > "$logs/$t.log" 2>&1
  forge_gtest_line "$t (alone)" "$logs/$t.log" $? >> "$summary"
  grep -E "% of copy|% of the copy|of the floor|copy bandwidth" "$logs/$t.log" | sed 's/^/    /' >> "$summary"
done
if [ -n "${ANCHORS:-}" ]; then
  ONLY="$ANCHORS" ANCHOR_TIMEOUT_S="${ANCHOR_BUDGET_S:-240}" BASELINES_TIMEOUT_S="${BASELINES_BUDGET_S:-150}" \
    bash "$here/run_generators.sh" anchor baselines > "$logs/anchors.log" 2>&1
  echo "| anchors | exit $? |" >> "$summary"
fi
python3 "$here/problems.py" report "$OUT" > /dev/null 2>&1
[ -f "$OUT/table.md" ] && { echo; cat "$OUT/table.md"; } >> "$summary"
(cd "$logs" && tar czf "$OUT/logs.tar.gz" .)
cat "$summary"
