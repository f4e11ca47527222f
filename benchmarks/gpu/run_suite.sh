#!/usr/bin/env bash
# The end-to-end suite on the GPU machine (benchmarks/suite/README.md): eager, torch.compile's modes
# and the Forge plan (when a hook gives one) per problem, timed and checked in one process per GPU.
#   benchmarks/gpu/run_suite.sh [run_suite.py options]      e.g. --shard 1/3, --only NAME,NAME
# Environment:
#   COMMIT, BUDGET   recorded in the results (the device copy of the tree has no .git)
#   DEADLINE_S       the whole call's wall-clock bound, default 540 (the device allows 600)
#   GPUS=N           N shards at once, one per GPU (the 2/4/8-GPU machines); shard k+FIRST-1 of
#                    SHARDS runs on GPU k-1 (defaults FIRST=1, SHARDS=N), so two 4-GPU calls with
#                    SHARDS=8 and FIRST=1 then FIRST=5 cover the suite
# Writes under $OUT: gpu.csv, and per shard suite.json, suite.md, suite.log (in $OUT, or in
# $OUT/shardK with GPUS > 1); then report.md and summary.json over all of them.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
python="${PYTHON:-/opt/torch/.venv/bin/python}"
[ -x "$python" ] || python=python3
export PYTHONUNBUFFERED=1
# Kept while the machine stays warm: a rerun reuses compiled kernels and autotuning results.
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-/tmp/forge-inductor-cache}"
deadline="${DEADLINE_S:-540}"
commit="${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
gpus="${GPUS:-1}"
shards="${SHARDS:-$gpus}"
first="${FIRST:-1}"

nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu \
  --format=csv | tee "$OUT/gpu.csv"

# run_shard DIR GPU [run_suite.py options]: reruns with --resume after a lost CUDA context (75).
run_shard() {
  local dir="$1" gpu="$2"
  shift 2
  mkdir -p "$dir"
  for attempt in 1 2 3 4; do
    local left=$((deadline - SECONDS))
    ((left > 60)) || break
    CUDA_VISIBLE_DEVICES="$gpu" timeout "$left" "$python" benchmarks/suite/run_suite.py \
      --out "$dir" --resume --deadline-s "$((left - 20))" --commit "$commit" \
      --budget "${BUDGET:-}" "$@" >> "$dir/suite.log" 2>&1
    local rc=$?
    echo "run_suite.py exit $rc (attempt $attempt, GPU $gpu)" >> "$dir/suite.log"
    [ "$rc" -eq 75 ] || break
  done
}

if [ "$gpus" -gt 1 ]; then
  for ((k = 0; k < gpus; k++)); do
    run_shard "$OUT/shard$((first + k))" "$k" --shard "$((first + k))/$shards" "$@" &
  done
  wait
  results=("$OUT"/shard*/suite.json)
  tail -n 3 "$OUT"/shard*/suite.log
else
  run_shard "$OUT" "${CUDA_VISIBLE_DEVICES:-0}" "$@"
  results=("$OUT/suite.json")
  grep -E '^(==|[a-z0-9_]+: eager|deadline|CUDA context)' "$OUT/suite.log" | tail -n 60
fi
"$python" benchmarks/suite/report.py "${results[@]}" --md "$OUT/report.md" \
  --summary "$OUT/summary.json"
