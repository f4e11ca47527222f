#!/usr/bin/env bash
# The runtime's library-step GPU tests (python/tests/test_runtime_library_steps.py: each ATen SDPA
# backend, cuDNN fused conv graphs, and batch norm folds, clamps and channels-last copies around
# them, through the plan op and the Python executor, with and without CUDA graphs), on the GPU
# machine in one bounded call. No binaries: only the cuDNN frontend's headers from the bundle
# (.gpu/cudnn-frontend.tar.gz or .gpu-pack, unpacked by env.sh) and python/forge/v1 carried from
# the build machine. The tests' extensions (one per test bundle) are built first, in parallel
# processes (prebuild_gpu_extensions), so that the tests find them built.
#   Here:  scripts/build forge_python_sdk
#          mkdir -p .gpu && tar -C ~/.cache/forge/cudnn-frontend-1.16.0 -czf .gpu/cudnn-frontend.tar.gz include
#   There: bash benchmarks/gpu/run_runtime_library_steps.sh   (carry .gpu and python/forge/v1)
# Writes $OUT/runtime_library_steps.md (one line: pytest's summary and the exit codes),
# $OUT/runtime_library_steps.log (pytest -rA: every case by name) and $OUT/prebuild.log.
# Environment: TESTS_S (pytest's limit, default 150), PREBUILD_S (default 180), BUILD_WORKERS
# (parallel extension builds, default 8), PYTEST_K (a -k selection; default "not builds": all
# but the two tests that build an extension from scratch, the build machine's check), PREBUILD_ONLY
# (the bundles to prebuild: "sdpa,conv,chain" prefixes, default all). The cuDNN cases alone:
#   PREBUILD_ONLY=conv,chain PYTEST_K="cudnn_conv_step_runs or batch_norm_folds" bash ...
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
python="${PYTHON:-/opt/torch/.venv/bin/python}"
[ -x "$python" ] || python=python3
# The machine's default CXX links libstdc++ statically (forge.runtime refuses such an extension).
[ -x /usr/bin/g++ ] && export CXX="${FORGE_CXX:-/usr/bin/g++}"
export PYTHONPATH="$here/../../python:$here/../../python/tests"
export FORGE_TEST_EXTENSIONS="${FORGE_TEST_EXTENSIONS:-/tmp/forge-test-extensions}"
export MAX_JOBS="${MAX_JOBS:-2}"   # ninja jobs per extension build
mkdir -p "$OUT" "$FORGE_TEST_EXTENSIONS"
start=$SECONDS
timeout "${PREBUILD_S:-180}" "$python" -c "
import test_runtime_library_steps as t
t.prebuild_gpu_extensions('$FORGE_TEST_EXTENSIONS', ${BUILD_WORKERS:-8}, '${PREBUILD_ONLY:-}')" \
  > "$OUT/prebuild.log" 2>&1
prebuild=$?
built=$SECONDS
# The tests of the extensions' builds themselves build afresh (the CPU machine's check): left out.
timeout "${TESTS_S:-150}" "$python" -m pytest -q -rA -p no:cacheprovider -k "${PYTEST_K:-not builds}" \
  "$here/../../python/tests/test_runtime_library_steps.py" > "$OUT/runtime_library_steps.log" 2>&1
tests=$?
echo "runtime library steps: prebuild exit $prebuild ($((built - start)) s), pytest exit $tests \
($((SECONDS - built)) s): $(tail -1 "$OUT/runtime_library_steps.log")" |
  tee "$OUT/runtime_library_steps.md"
exit "$tests"
