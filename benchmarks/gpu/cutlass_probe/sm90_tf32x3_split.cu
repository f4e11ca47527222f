// Probe: float32 GEMM at float32 accuracy on sm90 tensor cores, as three TF32 products in one
// WGMMA GEMM over a tripled K: A3 = [small(A) | big(A) | big(A)] (M x 3K, K-major) and
// B3 = [big(B) | small(B) | big(B)] (N x 3K, K-major) (the small
// products first), where big(x) is x rounded to TF32 and
// small(x) = x - big(x) rounded to TF32; A3 * B3^T = big*big + big*small + small*big (the
// small*small term, ~2^-22 relative, is dropped: the 3xTF32 scheme). A split kernel writes A3/B3
// (and transposes B to K-major) into a workspace, then CUTLASS's sm90 TF32 GEMM runs.
#include <cuda_runtime.h>
#include <stdint.h>
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
using namespace cute;

#ifndef TILE_M
#define TILE_M 128
#define TILE_N 256
#define CLUSTER_M 2
#endif

using TileShape = Shape<Int<TILE_M>, Int<TILE_N>, _32>;
using ClusterShape = Shape<Int<CLUSTER_M>, _1, _1>;
using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, float,
    cutlass::layout::RowMajor, 4, float, cutlass::layout::RowMajor, 4,
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;
using BuiltMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::tfloat32_t,
    cutlass::layout::RowMajor, 4, cutlass::tfloat32_t, cutlass::layout::ColumnMajor, 4, float,
    TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
#ifndef PROMOTE
#define PROMOTE 0
#endif
#if PROMOTE
// The tensor cores' TF32 accumulation truncates: over a long K its error grows well past float32's.
// The FP8 mainloop's "slow accumulation" (accumulate `mma_promotion_interval` MMAs in the tensor
// core, then add into a separate float32 register accumulator) bounds that; it is generic over the
// element type, so the TF32 builder's pieces are reused under its dispatch policy.
using B_ = BuiltMainloop;
using Mainloop = cutlass::gemm::collective::CollectiveMma<
    cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<B_::DispatchPolicy::Stages, ClusterShape,
                                                         cutlass::gemm::KernelTmaWarpSpecializedCooperative>,
    TileShape, cutlass::tfloat32_t, typename B_::StrideA, cutlass::tfloat32_t, typename B_::StrideB,
    typename B_::TiledMma, typename B_::GmemTiledCopyA, typename B_::SmemLayoutAtomA,
    typename B_::SmemCopyAtomA, typename B_::TransformA, typename B_::GmemTiledCopyB,
    typename B_::SmemLayoutAtomB, typename B_::SmemCopyAtomB, typename B_::TransformB>;
#else
using Mainloop = BuiltMainloop;
#endif
using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

__device__ __forceinline__ float ToTf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

// rows x cols source with strides (row_stride, col_stride) -> dst (rows x 3*cols, K-major) with
// the parts in the order given by `small_at` (0: [small|big|big], 1: [big|small|big]): the small
// products come first, while the accumulator is still small. A 32x32
// tile through shared memory so that both the read and the write are coalesced when the source
// is transposed.
// Each part is `padded` (cols rounded up to 4: TMA needs 16-byte aligned rows) wide, zero-filled.
__global__ void SplitKernel(const float* __restrict__ src, int64_t rows, int64_t cols,
                            int64_t padded, int64_t row_stride, int64_t col_stride,
                            float* __restrict__ dst, int small_at) {
  __shared__ float tile[32][33];
  const int64_t r0 = int64_t(blockIdx.y) * 32, c0 = int64_t(blockIdx.x) * 32;
  const bool transposed = row_stride == 1;  // the source is column-major
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    int64_t r, c;
    if (transposed) { r = r0 + threadIdx.x; c = c0 + i; } else { r = r0 + i; c = c0 + threadIdx.x; }
    float v = 0.f;
    if (r < rows && c < cols) v = src[r * row_stride + c * col_stride];
    if (transposed) tile[threadIdx.x][i] = v; else tile[i][threadIdx.x] = v;
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r >= rows || c >= padded) continue;
    const float x = c < cols ? tile[i][threadIdx.x] : 0.f;
    const float big = ToTf32(x), small = ToTf32(x - big);
    float* row = dst + r * 3 * padded;
    row[c] = small_at == 0 ? small : big;
    row[padded + c] = small_at == 1 ? small : big;
    row[2 * padded + c] = big;
  }
}

static float* g_ws = nullptr;
static size_t g_ws_bytes = 0;

// A row-major (M x K); B row-major (K x N); D row-major (M x N).
extern "C" int probe_gemm(int M, int N, int K, const void* A, const void* B, void* D,
                          void* stream_ptr) {
  cudaStream_t stream = (cudaStream_t)stream_ptr;
  const int64_t Kp = (int64_t(K) + 3) / 4 * 4;
  const size_t need = (size_t(M) + N) * 3 * Kp * sizeof(float);
  if (need > g_ws_bytes) {  // probe only: the real family gets its workspace from the worker
    cudaFree(g_ws);
    if (cudaMalloc(&g_ws, need) != cudaSuccess) return 5;
    g_ws_bytes = need;
  }
  float* a3 = g_ws;
  float* b3 = g_ws + size_t(M) * 3 * Kp;
  dim3 block(32, 8);
  SplitKernel<<<dim3((Kp + 31) / 32, (M + 31) / 32), block, 0, stream>>>((const float*)A, M, K, Kp,
                                                                         K, 1, a3, 0);
  // B3 row n is column n of B: source rows = N (stride 1), cols = K (stride N).
  SplitKernel<<<dim3((Kp + 31) / 32, (N + 31) / 32), block, 0, stream>>>((const float*)B, N, K, Kp,
                                                                         1, N, b3, 1);
  const int K3 = int(3 * Kp);
  auto sA = make_stride(int64_t(K3), _1{}, int64_t(0));
  auto sB = make_stride(int64_t(K3), _1{}, int64_t(0));
  auto sD = make_stride(int64_t(N), _1{}, int64_t(0));
  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {M, N, K3, 1},
      {(const cutlass::tfloat32_t*)a3, sA, (const cutlass::tfloat32_t*)b3, sB},
      {{1.0f, 0.0f}, (const float*)D, sD, (float*)D, sD}};
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return 1;
  if (Gemm::get_workspace_size(args) != 0) return 2;
  if (gemm.initialize(args, nullptr, stream) != cutlass::Status::kSuccess) return 3;
  if (gemm.run(stream) != cutlass::Status::kSuccess) return 4;
  return 0;
}
