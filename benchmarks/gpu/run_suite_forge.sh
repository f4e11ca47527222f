#!/usr/bin/env bash
# The suite with its Forge column, on the GPU machine: benchmarks/suite/forge_jobs.py runs a local
# service from the bundle (.gpu/bin: coordinator, worker, sandbox child, CLI, redis-server) and
# fetches a result bundle per problem with a fixed budget; then run_suite.sh times eager,
# torch.compile and the Forge plan (benchmarks/suite/forge_plan.py) in one process.
#   benchmarks/gpu/run_suite_forge.sh --only NAME,NAME | --level anchor   (forge_jobs selection)
# Environment: BUDGET (trials per job, default 16), COMMIT, MODES (torch.compile modes, default
# "default"), DEADLINE_S for the timing part.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
python="${PYTHON:-/opt/torch/.venv/bin/python}"
# The machine's default CXX links libstdc++ statically into extensions (see run_optimize.sh).
[ -x /usr/bin/g++ ] && export CXX="${FORGE_CXX:-/usr/bin/g++}"
export FORGE_CACHE_DIR="${FORGE_CACHE_DIR:-/tmp/forge-cache}"
budget="${BUDGET:-16}"
PYTHONPATH="$here/../../python" "$python" "$here/../suite/forge_jobs.py" --bin "$FORGE_BUNDLE/bin" \
  --out "$OUT/forge" --budget "$budget" --job-timeout-s "${JOB_TIMEOUT_S:-240}" "$@" \
  2>&1 | tee "$OUT/forge_jobs.log"
selection=("$@")
FORGE_SUITE_BUNDLES="$OUT/forge/bundles" BUDGET="$budget trials per job" \
  bash "$here/run_suite.sh" "${selection[@]}" --modes "${MODES:-default}" \
  --forge-plan benchmarks.suite.forge_plan:plan --forge-jobs "$OUT/forge/jobs"
(cd "$OUT" && tar czf forge.tar.gz forge --exclude='forge/models' && rm -rf forge)
