// The sm90_gated template: a gated product (SwiGLU's silu(x Wg^T) * (x Wu^T), the gate and up
// projections of a Llama/Mistral MLP) as ONE CUTLASS 3.x WGMMA GEMM for Hopper. Embedded at build
// time after the generated prologue, cutlass_common.cuh and sm90_gemm.cuh (the mainloop it shares
// with sm90_tma_ws; cutlass_entry_points.cuh follows:
// this template prepares its operands, FORGE_PREPARES_OPERANDS). The prologue defines:
//   FORGE_ELEMENT          cutlass::bfloat16_t or cutlass::half_t (x, both weights, the output)
//   FORGE_LAYOUT_A         cutlass::layout::RowMajor or ColumnMajor (x is m x k)
//   FORGE_TILE_M/_N/_K     the CTA tile over the packed product (tile_n columns = tile_n / 2
//                          output columns);  FORGE_CLUSTER_M/_N  the thread block cluster
//   FORGE_PINGPONG         1: KernelTmaWarpSpecializedPingpong, 0: ...Cooperative
//   FORGE_ACTIVATION       the gate's activation functor template (forge_cutlass::Silu, ...)
//   FORGE_HAS_BIAS         0 (cutlass_common.cuh's SetSm90EpilogueAndScheduler reads it)
//
// How: a packing kernel interleaves the two weights' rows into the workspace,
//   P (2n x k, K-major): row 2j = B_gate's column j, row 2j + 1 = B_up's column j
// (B_gate, B_up: k x n, read through runtime strides: ldb and FORGE_ARG_B_ROW_MAJOR, so one
// compiled object serves linear's [n, k] weights and mm's [k, n] ones), then one GEMM
// G = x P^T (m x 2n) runs with an epilogue of our own (GatedEpilogue, below): a WGMMA accumulator
// fragment holds each pair of adjacent columns (2j, 2j + 1) in one thread's consecutive
// registers, so the thread writes D[i, j] = act(G[i, 2j]) * G[i, 2j + 1], in float, straight from
// registers (no shared memory: D is n wide where the tile is 2n wide). The packed weight is
// rewritten every launch (2nk elements read and written), so a candidate's time includes it.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN
#include "cutlass/epilogue/collective/default_epilogue.hpp"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/epilogue/thread/linear_combination.h"

#define FORGE_PREPARES_OPERANDS 1

namespace forge_cutlass {

using LayoutA = FORGE_LAYOUT_A;
using LayoutB = cutlass::layout::ColumnMajor;  // the packed weight, K-major
static_assert(FORGE_TILE_N % 2 == 0, "a tile holds whole (gate, up) column pairs");

// D (m x n, row-major: stride (ldd, 1, batch stride)).
using StrideD = cutlass::gemm::TagToStrideC_t<cutlass::layout::RowMajor>;

// CUTLASS's register-to-global epilogue (DefaultEpilogue: its arguments, parameters and the
// interface the kernel and the device adapter use) with our own store: the accumulator's column
// pairs (gate, up) become one output element each. Its ThreadEpilogueOp is unused (it only names
// the output type); ptr_C is never read.
using BaseEpilogue = cutlass::epilogue::collective::DefaultEpilogue<
    Element, StrideD, StrideD, cutlass::epilogue::thread::LinearCombination<Element, 1, float, float>,
    cutlass::epilogue::NoSmemWarpSpecialized>;

class GatedEpilogue : public BaseEpilogue {
 public:
  CUTLASS_HOST_DEVICE GatedEpilogue(Params const& params,
                                    SharedStorage const& shared_storage = SharedStorage())
      : BaseEpilogue(params, shared_storage), output_(params) {}

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine,
            class FrgLayout, class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_mnk,
                                 BlockCoordMNKL blk_coord_mnkl,
                                 cute::Tensor<FrgEngine, FrgLayout> const& accumulators,
                                 TiledMma tiled_mma, ResidueMNK, int thread_idx, char*) {
    using namespace cute;
    const int m = get<0>(problem_shape_mnkl);
    const int packed_n = get<1>(problem_shape_mnkl);  // 2n
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord_mnkl;
    // Global (row, packed column) of every accumulator element of this thread.
    Tensor coordinates = local_tile(make_identity_tensor(make_shape(m, packed_n)),
                                    take<0, 2>(blk_shape_mnk), make_coord(m_coord, n_coord));
    Tensor thread_coordinates = tiled_mma.get_thread_slice(thread_idx).partition_C(coordinates);
    static_assert(is_static<FrgLayout>::value, "the accumulator layout must be static");
    static_assert(decltype(size(accumulators))::value % 2 == 0, "whole column pairs per thread");
    Element* const out = output_.ptr_D + int64_t(l_coord) * get<2>(output_.dD);
    const int64_t ldd = get<0>(output_.dD);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(accumulators); i += 2) {
      const auto gate_at = thread_coordinates(i);
      const auto up_at = thread_coordinates(i + 1);
      const int row = get<0>(gate_at);
      const int column = get<1>(gate_at);
      // The WGMMA fragment keeps (2j, 2j + 1) in consecutive registers; anything else is a
      // layout this epilogue was not written for: stop rather than write a wrong result.
      if (get<0>(up_at) != row || get<1>(up_at) != column + 1 || (column & 1) != 0) __trap();
      if (row < m && column < packed_n) {
        const float gate = static_cast<float>(accumulators(i));
        const float up = static_cast<float>(accumulators(i + 1));
        out[int64_t(row) * ldd + column / 2] =
            static_cast<Element>(FORGE_ACTIVATION<float>{}(gate) * up);
      }
    }
  }

 private:
  Params output_;  // the base's parameters are private: D's pointer and strides, kept here
};

using CollectiveEpilogue =
    cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<GatedEpilogue>;

using Gemm = Sm90Gemm<LayoutA, LayoutB, CollectiveEpilogue>;
using StrideA = typename Gemm::GemmKernel::StrideA;
using StrideB = typename Gemm::GemmKernel::StrideB;

inline int64_t AlignUp(int64_t value, int64_t to) { return (value + to - 1) / to * to; }
// The packed weight's leading dimension: K rounded up to 16 bytes (TMA's row alignment).
inline int64_t PackedLd(const Args& args) { return AlignUp(args[FORGE_ARG_K], kAlignment); }

// One weight as the packing kernel reads it: element (j, c) (j < n, c < k) sits at
// base + j * row_stride + c * col_stride.
struct WeightSource {
  const Element* base;
  int64_t row_stride, col_stride;
};

// P[2j + s][c] = (s == 0 ? gate : up)(j, c) for c < k: one warp per packed row, kPackWarps rows a
// block. kVector: 16-byte copies (both weights K-contiguous with 16-byte rows and k % kAlignment
// == 0); else one element at a time through the column stride (mm's [k, n] weights).
constexpr int kPackWarps = 8;
template <bool kVector>
__global__ void __launch_bounds__(32 * kPackWarps) PackGatedWeights(WeightSource gate,
                                                                    WeightSource up, int64_t rows,
                                                                    int64_t k, int64_t packed_ld,
                                                                    Element* packed) {
  const int64_t row = int64_t(blockIdx.x) * kPackWarps + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const WeightSource& source = (row & 1) == 0 ? gate : up;
  const Element* from = source.base + (row >> 1) * source.row_stride;
  Element* to = packed + row * packed_ld;
  if constexpr (kVector) {
    const int64_t vectors = k / kAlignment;
    for (int64_t v = lane; v < vectors; v += 32) {
      reinterpret_cast<uint4*>(to)[v] = reinterpret_cast<const uint4*>(from)[v];
    }
  } else {
    for (int64_t c = lane; c < k; c += 32) to[c] = from[c * source.col_stride];
  }
}

// B (k x n) element (c, j) at ldb: row-major (c * ldb + j), column-major (j * ldb + c).
inline WeightSource WeightOf(const Args& args, void* const* buffers, int buffer_arg) {
  const bool row_major = args[FORGE_ARG_B_ROW_MAJOR] != 0;
  const int64_t ldb = args[FORGE_ARG_LDB];
  return {args.Buffer<const Element>(buffers, buffer_arg), row_major ? 1 : ldb,
          row_major ? ldb : 1};
}

int64_t OperandWorkspaceBytes(const Args& args) {
  return AlignUp(2 * args[FORGE_ARG_N] * PackedLd(args) * int64_t(sizeof(Element)), 256);
}

const char* PrepareOperands(const Args& args, void* const* buffers, void* operand_workspace,
                            cudaStream_t stream) {
  if (args[FORGE_ARG_BATCH] != 1) return "a gated product is not batched";
  if (args[FORGE_ARG_B_UP] < 0) return "the up projection's weight names no buffer";
  const WeightSource gate = WeightOf(args, buffers, FORGE_ARG_B);
  const WeightSource up = WeightOf(args, buffers, FORGE_ARG_B_UP);
  const int64_t k = args[FORGE_ARG_K];
  const bool vector = gate.col_stride == 1 && gate.row_stride % kAlignment == 0 &&
                      k % kAlignment == 0 &&
                      reinterpret_cast<uintptr_t>(gate.base) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(up.base) % 16 == 0;
  const int64_t rows = 2 * args[FORGE_ARG_N];
  const dim3 grid(static_cast<unsigned>((rows + kPackWarps - 1) / kPackWarps));
  Element* packed = static_cast<Element*>(operand_workspace);
  if (vector) {
    PackGatedWeights<true><<<grid, 32 * kPackWarps, 0, stream>>>(gate, up, rows, k,
                                                                 PackedLd(args), packed);
  } else {
    PackGatedWeights<false><<<grid, 32 * kPackWarps, 0, stream>>>(gate, up, rows, k,
                                                                  PackedLd(args), packed);
  }
  const cudaError_t launched = cudaGetLastError();
  return launched == cudaSuccess ? "" : cudaGetErrorString(launched);
}

typename Gemm::Arguments MakeArguments(const Args& args, void* const* buffers,
                                       void* operand_workspace) {
  constexpr bool kAKMajor = std::is_same_v<LayoutA, cutlass::layout::RowMajor>;
  const StrideA stride_a = Sm90Stride<StrideA, kAKMajor>(args[FORGE_ARG_LDA], 0);
  const StrideB stride_b = Sm90Stride<StrideB, true>(PackedLd(args), 0);
  const StrideD stride_d =
      Sm90Stride<StrideD, true>(args[FORGE_ARG_LDD], args[FORGE_ARG_BATCH_STRIDE_D]);
  typename Gemm::Arguments arguments{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {static_cast<int>(args[FORGE_ARG_M]), static_cast<int>(2 * args[FORGE_ARG_N]),
       static_cast<int>(args[FORGE_ARG_K]), 1},
      {args.Buffer<const Element>(buffers, FORGE_ARG_A), stride_a,
       static_cast<const Element*>(operand_workspace), stride_b},
      {{}, nullptr, stride_d, args.Buffer<Element>(buffers, FORGE_ARG_D), stride_d}};
  // alpha and beta go to the unused ThreadEpilogueOp; raster and swizzle to the scheduler.
  SetSm90EpilogueAndScheduler<Element>(args, buffers, arguments);
  return arguments;
}

constexpr char kTemplateName[] = "sm90_gated: ";

}  // namespace forge_cutlass
