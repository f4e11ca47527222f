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
# and forge-sandbox-child, and python/forge/v1. Writes round.md (one line per test, the anchors'
# table) and logs.tar.gz under $OUT.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
export FORGE_SANDBOX_CHILD="$FORGE_BUNDLE/bin/forge-sandbox-child"
export FORGE_TEST_COMPILE_CACHE=/tmp/forge-compile-cache
logs=/tmp/forge-round-logs; mkdir -p "$logs"
summary="$OUT/round.md"
# The logs come back even when the device's limit or a caller's timeout ends the round.
trap '(cd "$logs" && tar czf "$OUT/logs.tar.gz" .); exit 124' TERM
# Tests that read the exported test models (sdpa_library_gpu_test) find them here.
export FORGE_TEST_MODELS=/tmp/forge-test-models
python3 "$here/../../tests/fixtures/make_models.py" "$FORGE_TEST_MODELS" \
  > "$logs/make_models.log" 2>&1 || echo "make_models.py failed: $logs/make_models.log"
echo "# $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader), $(date -u +%FT%TZ)" > "$summary"
{ echo; echo "| test | result |"; echo "|---|---|"; } >> "$summary"
gtest_line() {  # name log rc
  echo "| $1 | exit $3: $(grep -c '^\[       OK \]' "$2") passed, $(grep -c '^\[  FAILED  \].*(' "$2") failed, $(grep -c '^\[  SKIPPED \].*(' "$2") skipped |"
}
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
  wait "${pids[$i]}"; gtest_line "${names[$i]}" "$logs/${names[$i]}.log" $? >> "$summary"
done
for t in ${TIMED_TESTS:-}; do
  timeout "${TEST_TIMEOUT_S:-300}" "$FORGE_BUNDLE/bin/$t" > "$logs/$t.log" 2>&1
  gtest_line "$t (alone)" "$logs/$t.log" $? >> "$summary"
  grep -E "% of copy|% of the copy|of the floor|copy bandwidth" "$logs/$t.log" | sed 's/^/    /' >> "$summary"
done
if [ -n "${ANCHORS:-}" ]; then
  ONLY="$ANCHORS" ANCHOR_TIMEOUT_S="${ANCHOR_BUDGET_S:-240}" BASELINES_TIMEOUT_S="${BASELINES_BUDGET_S:-150}" \
    bash "$here/run_generators.sh" anchor baselines > "$logs/anchors.log" 2>&1
  echo "| anchors | exit $? |" >> "$summary"
fi
python3 "$here/problems.py" report "$OUT" > /dev/null 2>&1
[ -f "$OUT/table.md" ] && { echo; cat "$OUT/table.md"; } >> "$summary"
# The validate verdicts per family and template.
[ -f "$OUT/validate.jsonl" ] && python3 - "$OUT/validate.jsonl" >> "$summary" <<'PY'
import collections, json, sys
verdicts = collections.Counter()
for line in open(sys.argv[1]):
    problem = json.loads(line)
    if problem.get("error"):
        verdicts[(problem.get("name", "?"), "problem error: " + str(problem["error"])[:120])] += 1
    for task in problem.get("tasks", []):
        for point in task.get("points", []):
            verdicts[(point.get("family", "?") + "/" + str(point.get("template", "")),
                      point.get("status", "?"))] += 1
print()
for (family, verdict), count in sorted(verdicts.items()):
    print(f"    validate: {family:34s} {verdict:12s} {count}")
PY
(cd "$logs" && tar czf "$OUT/logs.tar.gz" .)
cat "$summary"
