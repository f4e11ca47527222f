#!/usr/bin/env bash
# GPU machine: builds the CUTLASS probe objects with nvcc (in parallel, timed) and runs probe.py.
#   CUTLASS=DIR bash benchmarks/gpu/cutlass_probe/run_probe.sh [sm90] [sm80] [split]  (default: all)
# writes $OUT/cutlass_probe.md. sm90: bf16/fp16 TMA+WGMMA configurations; sm80: float32 3xTF32 on
# mma.sync (CUTLASS 2.x FastF32); split: float32 as three TF32 WGMMA products over a tripled K.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
inc="${CUTLASS:?CUTLASS include dir}"
work=/tmp/cutlass-probe; mkdir -p "$work"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
build() {  # name source defines...
  local name=$1 src=$2; shift 2
  local start=$(date +%s%N)
  "$nvcc" -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -shared -Xcompiler -fPIC -I"$inc" -DNDEBUG "$@" \
    -o "$work/$name.so" "$here/$src" >"$work/$name.log" 2>&1 || { echo "BUILD FAILED $name"; tail -5 "$work/$name.log"; }
  echo "| $name | $(( ($(date +%s%N) - start) / 1000000 )) ms |"
}
phases=" ${*:-sm90 sm80 split} "
{
  echo "| object | nvcc wall time (all in parallel) |"; echo "|---|---|"
  if [[ $phases == *" sm90 "* ]]; then
  build bf16_coop_128x256_c2 sm90_ws.cu &
  build bf16_pp_128x128_c1 sm90_ws.cu -DELEMENT=cutlass::bfloat16_t -DTILE_M=128 -DTILE_N=128 -DCLUSTER_M=1 -DSCHEDULE=KernelTmaWarpSpecializedPingpong -DEPI_SCHEDULE=TmaWarpSpecialized &
  build bf16_coop_256x128_c2 sm90_ws.cu -DELEMENT=cutlass::bfloat16_t -DTILE_M=256 -DTILE_N=128 -DCLUSTER_M=2 -DSCHEDULE=KernelTmaWarpSpecializedCooperative -DEPI_SCHEDULE=TmaWarpSpecializedCooperative &
  build f16_coop_128x256_c2 sm90_ws.cu -DELEMENT=cutlass::half_t -DTILE_M=128 -DTILE_N=256 -DCLUSTER_M=2 -DSCHEDULE=KernelTmaWarpSpecializedCooperative -DEPI_SCHEDULE=TmaWarpSpecializedCooperative &
  fi
  if [[ $phases == *" sm80 "* ]]; then
  build tf32x3_128x128x32_s3 sm80_3xtf32.cu &
  build tf32x3_128x128x16_s4 sm80_3xtf32.cu -DTB_M=128 -DTB_N=128 -DTB_K=16 -DW_M=64 -DW_N=64 -DSTAGES=4 &
  build tf32x3_256x128x16_s3 sm80_3xtf32.cu -DTB_M=256 -DTB_N=128 -DTB_K=16 -DW_M=64 -DW_N=64 -DSTAGES=3 &
  build tf32x3_128x256x16_s3 sm80_3xtf32.cu -DTB_M=128 -DTB_N=256 -DTB_K=16 -DW_M=64 -DW_N=64 -DSTAGES=3 &
  fi
  if [[ $phases == *" split "* ]]; then
  build split_128x256_c2 sm90_tf32x3_split.cu &
  build split_128x128_c1 sm90_tf32x3_split.cu -DTILE_M=128 -DTILE_N=128 -DCLUSTER_M=1 &
  build split_256x128_c2 sm90_tf32x3_split.cu -DTILE_M=256 -DTILE_N=128 -DCLUSTER_M=2 &
  build split_128x128_c2 sm90_tf32x3_split.cu -DTILE_M=128 -DTILE_N=128 -DCLUSTER_M=2 &
  build splitp_128x256_c2 sm90_tf32x3_split.cu -DPROMOTE=1 -DTILE_M=128 -DTILE_N=256 -DCLUSTER_M=2 &
  build splitp_256x128_c2 sm90_tf32x3_split.cu -DPROMOTE=1 -DTILE_M=256 -DTILE_N=128 -DCLUSTER_M=2 &
  build splitp_128x128_c2 sm90_tf32x3_split.cu -DPROMOTE=1 -DTILE_M=128 -DTILE_N=128 -DCLUSTER_M=2 &
  fi
  wait
} | tee "$OUT/cutlass_probe.md"
w=$work
runs=()
[[ $phases == *" sm90 "* ]] && runs+=(
  $w/bf16_coop_128x256_c2.so:bfloat16:8192:8192:8192:nk $w/bf16_pp_128x128_c1.so:bfloat16:8192:8192:8192:nk \
  $w/bf16_coop_256x128_c2.so:bfloat16:8192:8192:8192:nk $w/f16_coop_128x256_c2.so:float16:8192:8192:8192:nk \
  $w/bf16_coop_128x256_c2.so:bfloat16:4096:4096:4096:nk $w/bf16_coop_128x256_c2.so:bfloat16:4096:14336:4096:nk)
[[ $phases == *" sm80 "* ]] && runs+=(
  $w/tf32x3_128x128x32_s3.so:float32:4096:4096:4096:kn $w/tf32x3_128x128x16_s4.so:float32:4096:4096:4096:kn \
  $w/tf32x3_256x128x16_s3.so:float32:4096:4096:4096:kn $w/tf32x3_128x256x16_s3.so:float32:4096:4096:4096:kn)
[[ $phases == *" split "* ]] && runs+=(
  $w/split_128x256_c2.so:float32:4096:4096:4096:kn $w/split_128x128_c1.so:float32:4096:4096:4096:kn
  $w/split_256x128_c2.so:float32:4096:4096:4096:kn $w/split_128x128_c2.so:float32:4096:4096:4096:kn
  $w/split_128x256_c2.so:float32:8192:8192:8192:kn $w/split_128x256_c2.so:float32:1000:3000:1001:kn
  $w/split_128x256_c2.so:float32:2048:8192:2048:kn
  $w/splitp_128x256_c2.so:float32:4096:4096:4096:kn $w/splitp_256x128_c2.so:float32:4096:4096:4096:kn
  $w/splitp_128x128_c2.so:float32:4096:4096:4096:kn $w/splitp_128x256_c2.so:float32:8192:8192:8192:kn
  $w/splitp_128x256_c2.so:float32:1000:3000:1001:kn $w/splitp_128x256_c2.so:float32:2048:8192:2048:kn)
python3 "$here/probe.py" "${runs[@]}" 2>&1 | tee -a "$OUT/cutlass_probe.md"
