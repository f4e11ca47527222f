#!/usr/bin/env bash
# forge.optimize end to end on the GPU machine, in one call (under 9 minutes):
#  1. starts redis-server, forge-coordinator and one real GPU forge-worker from the bundle that
#     scripts/gpu-bundle made here (carried as .gpu/, as for run_service_gpu.sh);
#  2. benchmarks/gpu/run_optimize.py optimizes the Llama-style block (examples/llama_block.py) and
#     ResNet-18 through that service (forge.optimize when this Python has grpcio, else the forge
#     CLI for submit/watch/results and forge.runtime.load_plan on the bundle), checks each result
#     against eager with the judge's tolerances, and times eager, torch.compile and the optimized
#     module (L2 flushed, CUDA events, median of >= 20 reps);
#  3. writes $OUT/optimize.md (the table), optimize.json, <model>_report.md and logs.tar.gz.
#
# Here, before the call (python/forge/v1 holds the generated protocol classes the GPU machine
# cannot generate without grpcio-tools):
#   scripts/build forge-coordinator forge-worker forge-sandbox-child forge   # + python/forge/v1
#   scripts/gpu-bundle .gpu build/server/forge-coordinator build/worker/daemon/forge-worker \
#     build/worker/sandbox/forge-sandbox-child build/client/forge/forge "$(command -v redis-server)"
# On the GPU machine (device tool `run`, carrying .gpu and python/forge/v1):
#   bash benchmarks/gpu/run_optimize.sh
# Environment: MODELS (default llama_block,resnet18), SEARCH_S (search wall time per model,
# default 75), BUDGET (candidate trials per job; default the coordinator's), TRIALS_PER_TASK
# (coordinator default, 24), COMPILE_MODES (default "default,reduce-overhead"), TRANSPORT
# (auto|sdk|cli), DEADLINE_S (whole call, default 510), COMPILE_THREADS (default 14),
# RUNTIME_TESTS (1: first run python/tests/test_runtime.py when pytest is there; 0: skip).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
python="${PYTHON:-/opt/torch/.venv/bin/python}"
[ -x "$python" ] || python=python3
bin="$FORGE_BUNDLE/bin"
for binary in forge-coordinator forge-worker forge-sandbox-child forge; do
  [ -x "$bin/$binary" ] || { echo "run_optimize.sh: no $bin/$binary (see the header)"; exit 2; }
done
if ! "$python" -c 'import google.protobuf' 2>/dev/null; then
  echo "run_optimize.sh: $python lacks protobuf, which forge.export and forge.runtime need"; exit 2
fi
deadline="${DEADLINE_S:-510}"
work="$(mktemp -d)"
mkdir -p "$OUT/logs"
redis_bin="$bin/redis-server"; [ -x "$redis_bin" ] || redis_bin="$(command -v redis-server)"
redis_port="$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; sleep 1
            for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

"$redis_bin" --port "$redis_port" --bind 127.0.0.1 --dir "$work" --appendonly yes --save "" \
  >"$OUT/logs/redis.log" 2>&1 & pids+=($!)
"$bin/forge-coordinator" --listen=127.0.0.1:0 --redis.port="$redis_port" \
  --blobs.dir="$work/blobs" --metrics.listen= \
  --search.trials-per-task="${TRIALS_PER_TASK:-24}" >"$OUT/logs/coordinator.log" 2>&1 & pids+=($!)
address=""
for _ in $(seq 200); do
  address="$(sed -n 's/^forge-coordinator listening on //p' "$OUT/logs/coordinator.log" | head -1)"
  [ -n "$address" ] && break; sleep 0.1
done
if [ -z "$address" ]; then
  echo "the coordinator did not start:"; cat "$OUT/logs/coordinator.log"; exit 1
fi
cutlass_flag=()   # env.sh unpacks the bundle's CUTLASS headers; without them CUTLASS candidates fail
[ -n "${FORGE_CUTLASS_INCLUDE:-}" ] && cutlass_flag=(--compile.cutlass-include="$FORGE_CUTLASS_INCLUDE")
"$bin/forge-worker" --coordinator="$address" --compile-threads="${COMPILE_THREADS:-14}" \
  "${cutlass_flag[@]}" \
  --sandbox-child="$bin/forge-sandbox-child" --compile-cache-dir="$work/cubins" \
  >"$OUT/logs/worker.log" 2>&1 & pids+=($!)

export PYTHONUNBUFFERED=1
# That machine's default CXX (a wrapper in /opt/gcc) links libstdc++ statically into the extension,
# so the ops' C++ exceptions would kill the process (forge.runtime refuses such a build): use the
# system compiler, which links it as a shared library.
[ -x /usr/bin/g++ ] && export CXX="${FORGE_CXX:-/usr/bin/g++}"
export FORGE_CACHE_DIR="${FORGE_CACHE_DIR:-/tmp/forge-cache}"   # extension builds, kept while warm
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-/tmp/forge-inductor-cache}"
# The runtime's own GPU tests first (hand-written kernel, library and ATen steps, with and without
# CUDA graphs): when forge.optimize fails below, they tell whether the runtime is the reason.
if [ "${RUNTIME_TESTS:-1}" = 1 ] && "$python" -c 'import pytest' 2>/dev/null; then
  PYTHONPATH="$here/../../python" timeout "${RUNTIME_TESTS_S:-240}" "$python" -m pytest -q -p no:cacheprovider \
    "$here/../../python/tests/test_runtime.py" > "$OUT/logs/runtime_tests.log" 2>&1
  echo "runtime tests (exit $?): $(tail -1 "$OUT/logs/runtime_tests.log")" |
    tee "$OUT/runtime_tests.txt"
fi
transport_flag=()
[ -n "${TRANSPORT:-}" ] && transport_flag=(--transport "$TRANSPORT")
timeout $((deadline - SECONDS)) "$python" "$here/run_optimize.py" --out "$OUT" \
  --server "$address" --cli "$bin/forge" --models "${MODELS:-llama_block,resnet18}" \
  --search-s "${SEARCH_S:-75}" --budget "${BUDGET:-0}" \
  --compile-modes "${COMPILE_MODES:-default,reduce-overhead}" \
  --deadline-s $((deadline - SECONDS - 15)) "${transport_flag[@]}" 2>&1 |
  tee "$OUT/logs/run_optimize.log"
rc=${PIPESTATUS[0]}
"$bin/forge" workers --server="$address" > "$OUT/logs/workers.txt" 2>&1
kept=(logs); [ -d "$OUT/bundles" ] && kept+=(bundles)
(cd "$OUT" && tar czf logs.tar.gz "${kept[@]}" && rm -rf "${kept[@]}")
echo "run_optimize.py exit $rc"
exit "$rc"
