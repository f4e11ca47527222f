#!/usr/bin/env bash
# Nsight Compute profiles of given schedule points of anchor problems, on the GPU machine:
#   benchmarks/gpu/profile_kernels.sh PROBLEM:POINT [PROBLEM:POINT ...]
# POINT is a FORGE_BENCH_POINTS override ("threads_per_row=32,vector_width=4"). For each spec,
# `generators_bench anchor` runs that point alone (FORGE_BENCH_SAMPLES=0) under ncu, which profiles
# the first launch of a generated kernel (the timer's first warm-up launch, at full size) with the
# clocks left alone; the rest of the run (timing, judge) goes on unprofiled. Writes
# $OUT/profiles.tar.gz (one ncu text report and one anchor log per spec) and $OUT/profiles.md
# (a few headline metrics per spec).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
command -v ncu > /dev/null || PATH="$PATH:$(ls -d /opt/nvidia/nsight-compute/* | tail -1)"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
problems=/tmp/forge-problems
bench="$FORGE_BUNDLE/bin/generators_bench"
[ -f "$problems/manifest.tsv" ] || python3 "$here/problems.py" export "$problems" > /dev/null
dir="$OUT/profiles"
mkdir -p "$dir"
summary="$OUT/profiles.md"
{
  echo "# ncu profiles, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(date -u +%F)"
  echo
  echo "| # | problem | point | duration | DRAM throughput | achieved occupancy | issue slots busy | one or more eligible | registers |"
  echo "|---|---|---|---|---|---|---|---|---|"
} > "$summary"
n=0
for spec in "$@"; do
  n=$((n + 1))
  problem="${spec%%:*}"
  point="${spec#*:}"
  report="$dir/$n-$problem.txt"
  FORGE_BENCH_SAMPLES=0 FORGE_BENCH_POINTS="$point" timeout 150 ncu --clock-control none \
    --kernel-name regex:'^forge_(row_reduce|cross_entropy|pointwise)$' --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats --section SchedulerStats --section WarpStateStats \
    --section InstructionStats --section ComputeWorkloadAnalysis --section SourceCounters \
    "$bench" anchor "$problems" "$dir/$n-anchor.jsonl" "$problem" > "$report" 2>&1
  metric() { grep -m1 -E "^ +$1 " "$report" | awk '{print $(NF)" "$(NF-1)}' | awk '{print $1}'; }
  unit() { grep -m1 -E "^ +$1 " "$report" | awk '{print $(NF-1)}'; }
  echo "| $n | $problem | $point | $(metric Duration) $(unit Duration) | $(metric 'DRAM Throughput') % | $(metric 'Achieved Occupancy') % | $(metric 'Issue Slots Busy') % | $(metric 'One or More Eligible') % | $(metric 'Registers Per Thread') |" >> "$summary"
done
{ echo; echo '```'; grep -h '^time ' "$dir"/*.txt; echo '```'; } >> "$summary"
(cd "$dir" && tar czf "$OUT/profiles.tar.gz" .) && rm -rf "$dir"
cat "$summary"
