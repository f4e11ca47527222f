#!/usr/bin/env bash
# After a change to the judge's draws or to a reduction generator: the planted-bug GPU tests, the
# reduction family's validation sweep, and the softmax and cross-entropy anchors (ANCHORS) timed
# and judged, with eager and torch.compile in the same run. About 7 minutes on an H200.
# Needs .gpu/ (scripts/gpu-bundle of planted_bugs_test, forge-sandbox-child and generators_bench)
# and python/forge/v1. Writes logs.tar.gz, validate.jsonl, anchors.jsonl, baselines.json,
# table.md and summary.json under $OUT.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
export FORGE_SANDBOX_CHILD="$FORGE_BUNDLE/bin/forge-sandbox-child"
timeout 240 "$FORGE_BUNDLE/bin/planted_bugs_test" > "$OUT/planted_bugs_test.log" 2>&1
echo "planted_bugs_test: exit $?, $(grep -c '^\[       OK \]' "$OUT/planted_bugs_test.log") passed," \
  "$(grep -c '^\[  FAILED  \].*(' "$OUT/planted_bugs_test.log") failed"
export ONLY="$(python3 "$here/problems.py" names reduction validate | tr '\n' ' ') ${ANCHORS:-softmax_4096x393216_f32 cross_entropy_32768x4096_f32}"
VALIDATE_TIMEOUT_S=200 ANCHOR_TIMEOUT_S=150 BASELINES_TIMEOUT_S=120 \
  bash "$here/run_generators.sh" validate anchor baselines > /dev/null 2>&1
echo "run_generators.sh: exit $?"
grep -v '^| [a-z0-9_]* | [a-z_]* | [0-9]* | [0-9]* | [0-9]* | 0 | 0 |  |$' "$OUT/table.md"
(cd "$OUT" && tar czf logs.tar.gz ./*.log && rm -f ./*.log)
