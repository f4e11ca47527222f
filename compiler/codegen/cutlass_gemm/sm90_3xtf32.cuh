// The sm90_3xtf32 template: a float32 GEMM at float32 accuracy on Hopper's tensor cores, as three
// TF32 products in one CUTLASS 3.x WGMMA GEMM over a tripled K. Embedded at build time after the
// generated prologue and cutlass_common.cuh (cutlass_entry_points.cuh follows: this template
// prepares its operands, FORGE_PREPARES_OPERANDS). The prologue defines the configuration:
//   FORGE_TILE_M/_N/_K     the CTA tile (tile_k 32: 128 bytes of float);  FORGE_CLUSTER_M/_N
//   FORGE_ACTIVATION, FORGE_HAS_BIAS, FORGE_HAS_SOURCE   the epilogue, as in sm90_tma_ws.cuh
// Operand layouts are not part of the configuration: the split kernel reads A and B through their
// runtime strides (FORGE_ARG_LDA/_LDB, _A_ROW_MAJOR/_B_ROW_MAJOR, batch strides), so one compiled
// object serves every layout.
//
// How: x = big(x) + small(x) with big(x) = x rounded to TF32 and small(x) = (x - big(x)) rounded
// to TF32 (together 22 significant bits of x's 24). A split kernel writes, into the workspace,
//   A3 = [small(A) | big(A) | big(A)]   (M x 3K', K-major)
//   B3 = [big(B) | small(B) | big(B)]   (N x 3K', K-major; B transposed on the way)
// (K' = K rounded up to 4 with zeros: TMA needs 16-byte aligned rows), and A3 B3^T =
// small(A) big(B) + big(A) small(B) + big(A) big(B): the 3xTF32 scheme (the small x small term,
// ~2^-22 relative, is dropped). The small products come first, while the accumulator is small.
// The tensor cores' TF32 accumulation truncates, and over a 3K-long sum its error grows past
// float32's tolerance (benchmarks/results/2026-12-02-h200-cutlass-probe.md: 325,259 of 16.8M
// elements outside 1e-4 at 4096^3), so the mainloop is CUTLASS's FP8 one with its promotion:
// every FORGE_ARG_PROMOTION MMAs (a multiple of tile_k / 8) the tensor cores' partial sum is added
// into a float32 register accumulator (the FP8 mainloop is generic over the element type; it is
// given the TF32 builder's own pieces). That measured 0 elements outside 1e-4 and 1.89x eager.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN
#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/gemm.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

#define FORGE_PREPARES_OPERANDS 1

namespace forge_cutlass {

using LayoutD = cutlass::layout::RowMajor;
using TileShape = cute::Shape<cute::Int<FORGE_TILE_M>, cute::Int<FORGE_TILE_N>, cute::Int<FORGE_TILE_K>>;
using ClusterShape = cute::Shape<cute::Int<FORGE_CLUSTER_M>, cute::Int<FORGE_CLUSTER_N>, cute::_1>;
using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;

#if FORGE_HAS_SOURCE
using ElementC = float;
#else
using ElementC = void;
#endif
#if FORGE_HAS_BIAS
using FusionOp =
    cutlass::epilogue::fusion::LinCombPerColBiasEltAct<FORGE_ACTIVATION, float, float, float, ElementC>;
#else
using FusionOp = cutlass::epilogue::fusion::LinCombEltAct<FORGE_ACTIVATION, float, float, ElementC>;
#endif

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementC, LayoutD, 4, float,
    LayoutD, 4, EpilogueSchedule, FusionOp>::CollectiveOp;

// The TF32 builder's mainloop, then its pieces under the FP8 mainloop's dispatch policy.
using BuiltMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::tfloat32_t,
    cutlass::layout::RowMajor, 4, cutlass::tfloat32_t, cutlass::layout::ColumnMajor, 4, float,
    TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename CollectiveEpilogue::SharedStorage))>,
    MainloopSchedule>::CollectiveOp;
using CollectiveMainloop = cutlass::gemm::collective::CollectiveMma<
    cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<BuiltMainloop::DispatchPolicy::Stages,
                                                         ClusterShape, MainloopSchedule>,
    TileShape, cutlass::tfloat32_t, typename BuiltMainloop::StrideA, cutlass::tfloat32_t,
    typename BuiltMainloop::StrideB, typename BuiltMainloop::TiledMma,
    typename BuiltMainloop::GmemTiledCopyA, typename BuiltMainloop::SmemLayoutAtomA,
    typename BuiltMainloop::SmemCopyAtomA, typename BuiltMainloop::TransformA,
    typename BuiltMainloop::GmemTiledCopyB, typename BuiltMainloop::SmemLayoutAtomB,
    typename BuiltMainloop::SmemCopyAtomB, typename BuiltMainloop::TransformB>;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>,
                                                        CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
using StrideA = typename Gemm::GemmKernel::StrideA;
using StrideB = typename Gemm::GemmKernel::StrideB;
using StrideC = typename Gemm::GemmKernel::StrideC;
using StrideD = typename Gemm::GemmKernel::StrideD;

__device__ __forceinline__ float ToTf32(float x) {
  uint32_t bits;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(bits) : "f"(x));
  return __uint_as_float(bits);
}

// One operand, as the split kernel reads it: element (r, c) of batch b (r: a row of A or a column
// of B, c: the k index) sits at base + b * batch_stride + r * row_stride + c * col_stride.
struct SplitSource {
  const float* base;
  int64_t rows, cols, row_stride, col_stride, batch_stride;
};

// Writes dst[b][r][part * padded + c] for the three parts: (small, big, big) when small_first_part
// is 0 (A3), (big, small, big) when it is 1 (B3); zeros for c in [cols, padded). A 32 x 32 tile
// goes through shared memory so that reads along r (col_stride != 1) stay coalesced.
__global__ void __launch_bounds__(256) Split3xTf32(SplitSource src, int64_t padded, float* dst,
                                                   int small_part) {
  __shared__ float tile[32][33];
  const int64_t r0 = int64_t(blockIdx.y) * 32, c0 = int64_t(blockIdx.x) * 32;
  const float* base = src.base + int64_t(blockIdx.z) * src.batch_stride;
  float* out = dst + int64_t(blockIdx.z) * src.rows * 3 * padded;
  const bool along_rows = src.col_stride != 1;  // r is the unit-stride index
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t r = along_rows ? r0 + threadIdx.x : r0 + i;
    const int64_t c = along_rows ? c0 + i : c0 + threadIdx.x;
    const float v = r < src.rows && c < src.cols ? base[r * src.row_stride + c * src.col_stride] : 0.f;
    if (along_rows) tile[threadIdx.x][i] = v; else tile[i][threadIdx.x] = v;
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r >= src.rows || c >= padded) continue;
    const float x = tile[i][threadIdx.x];
    const float big = ToTf32(x), small = ToTf32(x - big);
    float* row = out + r * 3 * padded;
    row[c] = small_part == 0 ? small : big;
    row[padded + c] = small_part == 1 ? small : big;
    row[2 * padded + c] = big;
  }
}

// The workspace: A3, then B3 (256-byte aligned), then CUTLASS's own.
struct Layout {
  int64_t padded_k, a3_batches, b3_batches, a3_bytes, b3_bytes;
};
inline int64_t AlignUp(int64_t value, int64_t to) { return (value + to - 1) / to * to; }
inline Layout WorkspaceLayout(const Args& args) {
  Layout layout;
  layout.padded_k = AlignUp(args[FORGE_ARG_K], 4);
  layout.a3_batches = args[FORGE_ARG_BATCH_STRIDE_A] == 0 ? 1 : args[FORGE_ARG_BATCH];
  layout.b3_batches = args[FORGE_ARG_BATCH_STRIDE_B] == 0 ? 1 : args[FORGE_ARG_BATCH];
  layout.a3_bytes = AlignUp(layout.a3_batches * args[FORGE_ARG_M] * 3 * layout.padded_k * 4, 256);
  layout.b3_bytes = AlignUp(layout.b3_batches * args[FORGE_ARG_N] * 3 * layout.padded_k * 4, 256);
  return layout;
}

// A3 and B3 in the operand workspace (nullptr: sizes only).
float* A3(void* operand_workspace) { return static_cast<float*>(operand_workspace); }
float* B3(const Layout& layout, void* operand_workspace) {
  return operand_workspace == nullptr
             ? nullptr
             : reinterpret_cast<float*>(static_cast<char*>(operand_workspace) + layout.a3_bytes);
}

typename Gemm::Arguments MakeArguments(const Args& args, void* const* buffers,
                                       void* operand_workspace) {
  const Layout layout = WorkspaceLayout(args);
  const float* a3 = A3(operand_workspace);
  const float* b3 = B3(layout, operand_workspace);
  const int64_t k3 = 3 * layout.padded_k;
  const StrideA stride_a =
      Sm90Stride<StrideA, true>(k3, layout.a3_batches == 1 ? 0 : args[FORGE_ARG_M] * k3);
  const StrideB stride_b =
      Sm90Stride<StrideB, true>(k3, layout.b3_batches == 1 ? 0 : args[FORGE_ARG_N] * k3);
  const StrideC stride_c =
      Sm90Stride<StrideC, true>(args[FORGE_ARG_LDC], args[FORGE_ARG_BATCH_STRIDE_C]);
  const StrideD stride_d =
      Sm90Stride<StrideD, true>(args[FORGE_ARG_LDD], args[FORGE_ARG_BATCH_STRIDE_D]);
  typename Gemm::Arguments arguments{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {static_cast<int>(args[FORGE_ARG_M]), static_cast<int>(args[FORGE_ARG_N]),
       static_cast<int>(k3), static_cast<int>(args[FORGE_ARG_BATCH])},
      {reinterpret_cast<const cutlass::tfloat32_t*>(a3), stride_a,
       reinterpret_cast<const cutlass::tfloat32_t*>(b3), stride_b,
       static_cast<uint32_t>(args[FORGE_ARG_PROMOTION])},
      {{},
#if FORGE_HAS_SOURCE
       args.Buffer<const float>(buffers, FORGE_ARG_C),
#else
       nullptr,
#endif
       stride_c, args.Buffer<float>(buffers, FORGE_ARG_D), stride_d}};
  SetSm90EpilogueAndScheduler<float>(args, buffers, arguments);
  return arguments;
}

// A's (M x K) and B's (N x K, i.e. B read transposed) element strides from the leading
// dimensions and the layouts (row-major A: (lda, 1); column-major: (1, lda); B is K x N, so
// row-major B: (1, ldb) and column-major: (ldb, 1)).
inline SplitSource SourceOf(const Args& args, void* const* buffers, bool is_a) {
  SplitSource source;
  source.base = args.Buffer<const float>(buffers, is_a ? FORGE_ARG_A : FORGE_ARG_B);
  source.rows = args[is_a ? FORGE_ARG_M : FORGE_ARG_N];
  source.cols = args[FORGE_ARG_K];
  const int64_t ld = args[is_a ? FORGE_ARG_LDA : FORGE_ARG_LDB];
  const bool row_major = args[is_a ? FORGE_ARG_A_ROW_MAJOR : FORGE_ARG_B_ROW_MAJOR] != 0;
  const bool k_contiguous = is_a ? row_major : !row_major;
  source.row_stride = k_contiguous ? ld : 1;
  source.col_stride = k_contiguous ? 1 : ld;
  source.batch_stride = args[is_a ? FORGE_ARG_BATCH_STRIDE_A : FORGE_ARG_BATCH_STRIDE_B];
  return source;
}

int64_t OperandWorkspaceBytes(const Args& args) {
  const Layout layout = WorkspaceLayout(args);
  return layout.a3_bytes + layout.b3_bytes;
}

// The split kernels, A's then B's, on `stream`.
const char* PrepareOperands(const Args& args, void* const* buffers, void* operand_workspace,
                            cudaStream_t stream) {
  if (args[FORGE_ARG_PROMOTION] <= 0 || args[FORGE_ARG_PROMOTION] % (FORGE_TILE_K / 8) != 0) {
    return "the promotion interval is not a positive multiple of tile_k / 8";
  }
  const Layout layout = WorkspaceLayout(args);
  const dim3 block(32, 8);
  const unsigned k_tiles = static_cast<unsigned>((layout.padded_k + 31) / 32);
  Split3xTf32<<<dim3(k_tiles, static_cast<unsigned>((args[FORGE_ARG_M] + 31) / 32),
                     static_cast<unsigned>(layout.a3_batches)),
                block, 0, stream>>>(SourceOf(args, buffers, true), layout.padded_k,
                                    A3(operand_workspace), 0);
  Split3xTf32<<<dim3(k_tiles, static_cast<unsigned>((args[FORGE_ARG_N] + 31) / 32),
                     static_cast<unsigned>(layout.b3_batches)),
                block, 0, stream>>>(SourceOf(args, buffers, false), layout.padded_k,
                                    B3(layout, operand_workspace), 1);
  const cudaError_t launched = cudaGetLastError();
  return launched == cudaSuccess ? "" : cudaGetErrorString(launched);
}

constexpr char kTemplateName[] = "sm90_3xtf32: ";

}  // namespace forge_cutlass
