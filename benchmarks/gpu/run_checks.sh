#!/usr/bin/env bash
# One call's worth of correctness checks on the GPU machine after a change to the generators,
# the judge or the LibTorch boundary: every GPU test binary of the bundle (run_gpu_tests.sh), then
# the generator validation sweep (run_generators.sh validate: every family's default and sampled
# points on the validate problems, judged against float64). Each part has its own time bound so
# that the whole stays inside one device call.
#   GPU_TESTS_BUDGET_S (default 300), VALIDATE_BUDGET_S (default 240)
# Needs .gpu/ (scripts/gpu-bundle of the GPU tests, forge-sandbox-child and generators_bench) and
# python/forge/v1. Writes gpu_tests.md, gpu_test_logs.tar.gz, validate.log, validate.jsonl,
# table.md and summary.json under $OUT.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
timeout "${GPU_TESTS_BUDGET_S:-300}" bash "$here/run_gpu_tests.sh"
echo "run_gpu_tests.sh: exit $?"
VALIDATE_TIMEOUT_S="${VALIDATE_BUDGET_S:-240}" timeout "$(( ${VALIDATE_BUDGET_S:-240} + 60 ))" \
  bash "$here/run_generators.sh" validate > /dev/null 2>&1
echo "run_generators.sh validate: exit $?"
python3 - "$OUT/validate.jsonl" <<'PY'
import collections, json, sys
verdicts = collections.Counter()
for line in open(sys.argv[1]):
    problem = json.loads(line)
    if problem.get("error"):
        verdicts[(problem.get("family", "?"), "problem error")] += 1
    for task in problem.get("tasks", []):
        for point in task.get("points", []):
            verdicts[(point.get("family", "?"), point.get("status", "?"))] += 1
for (family, verdict), count in sorted(verdicts.items()):
    print(f"validate: {family:14s} {verdict:12s} {count}")
PY
