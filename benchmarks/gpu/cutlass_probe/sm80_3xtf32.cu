// Probe: a CUTLASS 2.x float32 GEMM with 3xTF32 (OpMultiplyAddFastF32) on mma.sync, behind an
// extern "C" host entry, for run_probe.sh (is 3xTF32 fast and accurate enough on the H200?).
#include <cuda_runtime.h>
#include "cutlass/cutlass.h"
#include "cutlass/gemm/device/gemm.h"
#include "cutlass/epilogue/thread/linear_combination.h"

#ifndef TB_M
#define TB_M 128
#define TB_N 128
#define TB_K 32
#define W_M 64
#define W_N 64
#define STAGES 3
#endif

using Gemm = cutlass::gemm::device::Gemm<
    float, cutlass::layout::RowMajor, float, cutlass::layout::RowMajor, float,
    cutlass::layout::RowMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<TB_M, TB_N, TB_K>, cutlass::gemm::GemmShape<W_M, W_N, TB_K>,
    cutlass::gemm::GemmShape<16, 8, 8>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, STAGES, 4, 4, false,
    cutlass::arch::OpMultiplyAddFastF32>;

extern "C" int probe_gemm(int M, int N, int K, const void* A, const void* B, void* D,
                          void* stream) {
  Gemm::Arguments args({M, N, K}, {(const float*)A, K}, {(const float*)B, N},
                       {(float*)D, N}, {(float*)D, N}, {1.0f, 0.0f});
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return 1;
  if (gemm.initialize(args, nullptr, (cudaStream_t)stream) != cutlass::Status::kSuccess) return 3;
  if (gemm((cudaStream_t)stream) != cutlass::Status::kSuccess) return 4;
  return 0;
}
