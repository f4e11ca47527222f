#!/usr/bin/env bash
# The suite with its Forge column, on the GPU machine: benchmarks/suite/forge_jobs.py runs a local
# service from the bundle (.gpu/bin: coordinator, worker, sandbox child, CLI, redis-server) and
# fetches a result bundle per problem with a fixed budget; then run_suite.sh times eager,
# torch.compile and the Forge plan (benchmarks/suite/forge_plan.py) in one process.
#   benchmarks/gpu/run_suite_forge.sh --only NAME,NAME | --level anchor   (forge_jobs selection)
# The jobs run side by side (--concurrent) on one worker with every GPU of the machine; each
# fetched bundle's extension is built in the background while the rest search.
# Environment: BUDGET (trials per job, default 32), MAX_SECONDS (search time per job, default 0:
# none), JOB_TIMEOUT_S (from submission: past it a job is cancelled and its bests kept, default
# 240), COMMIT, MODES (torch.compile modes, default "default"), DEADLINE_S for the timing part,
# TOTAL_S (the whole call's bound, default 570), GPUS (timing shards at once, one per GPU),
# DRAW_CACHE_MIB (the judge's cache of input draws and
# references per GPU, default 49152: large tasks keep theirs across candidates), DEVICE_DRAWS_MIB
# (the draws kept resident on each GPU for the judge's device path; default a quarter of the GPU,
# 0 judges every candidate on the host), JOBS_ONLY (NAME,NAME: submit only these to the service;
# the rest of the selection is timed without a Forge plan, e.g. problems whose first candidate,
# judged at full size, would hold a GPU past the job timeout).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
python="${PYTHON:-/opt/torch/.venv/bin/python}"
# The machine's default CXX links libstdc++ statically into extensions (see run_optimize.sh).
[ -x /usr/bin/g++ ] && export CXX="${FORGE_CXX:-/usr/bin/g++}"
export FORGE_CACHE_DIR="${FORGE_CACHE_DIR:-/tmp/forge-cache}"
export FORGE_SANDBOX_DRAW_CACHE_MIB="${DRAW_CACHE_MIB:-49152}"
[ -n "${DEVICE_DRAWS_MIB:-}" ] && export FORGE_SANDBOX_DEVICE_DRAWS_MIB="$DEVICE_DRAWS_MIB"
budget="${BUDGET:-32}"
jobs_selection=("$@")
[ -n "${JOBS_ONLY:-}" ] && jobs_selection=(--only "$JOBS_ONLY")
PYTHONPATH="$here/../../python" "$python" "$here/../suite/forge_jobs.py" --bin "$FORGE_BUNDLE/bin" \
  --out "$OUT/forge" --budget "$budget" --max-seconds "${MAX_SECONDS:-0}" --concurrent \
  --job-timeout-s "${JOB_TIMEOUT_S:-240}" --builds "${BUILDS:-6}" "${jobs_selection[@]}" \
  2>&1 | grep -v -e FutureWarning -e 'return cls.__new__' | tee "$OUT/forge_jobs.log"
selection=("$@")
# The timing part gets what is left of the call (TOTAL_S, default 570 s of the device's 600).
export DEADLINE_S="${DEADLINE_S:-$(( ${TOTAL_S:-570} - SECONDS ))}"
FORGE_SUITE_BUNDLES="$OUT/forge/bundles" BUDGET="$budget trials per job" \
  bash "$here/run_suite.sh" "${selection[@]}" --modes "${MODES:-default}" \
  --forge-plan benchmarks.suite.forge_plan:plan --forge-jobs "$OUT/forge/jobs"
# What comes back (a few files): the job summaries, the service's logs, and per bundle its plan
# and report (kernel sources are regenerated from the candidates).
# (With one GPU the timing writes suite.json into $OUT itself, and there are no shards.)
(cd "$OUT" && shards=$(ls -d shard[0-9]* 2>/dev/null) && tar czf shards.tar.gz $shards &&
 rm -rf $shards)
(cd "$OUT" && tar czf forge.tar.gz forge/jobs forge/service \
   $(cd "$OUT" && ls -d forge/bundles/*/plan.json forge/bundles/*/report.md 2>/dev/null) &&
 rm -rf forge)
