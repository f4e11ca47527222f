// The sm90_tma_ws template: a CUTLASS 3.x GEMM for Hopper (TMA loads, WGMMA, a warp-specialized
// persistent kernel, TMA epilogue with an epilogue fusion), embedded at build time after the
// generated prologue, cutlass_common.cuh and sm90_gemm.cuh (the mainloop it shares with
// sm90_gated). The prologue defines the configuration:
//   FORGE_ELEMENT          cutlass::bfloat16_t or cutlass::half_t (A, B, C, D and the bias)
//   FORGE_LAYOUT_A/_B      cutlass::layout::RowMajor or ColumnMajor (A is m x k, B is k x n)
//   FORGE_TILE_M/_N/_K     the CTA tile;  FORGE_CLUSTER_M/_N  the thread block cluster
//   FORGE_PINGPONG         1: KernelTmaWarpSpecializedPingpong, 0: ...Cooperative
//   FORGE_ACTIVATION       the activation functor template (cutlass::epilogue::thread::Identity,
//                          ReLu, GELU; forge_cutlass::GeluTanh, Silu, Sigmoid, Tanh)
//   FORGE_HAS_BIAS         1: a bias[n] broadcast over rows (LinCombPerColBiasEltAct)
//   FORGE_HAS_SOURCE       1: a residual C operand (beta * C); 0: no C (ElementC = void)
// D = activation(alpha * (A B) + beta * C + bias), accumulated in float. D and C are row-major.
// Everything about the problem (sizes, leading dimensions, batch strides, buffers, alpha, beta,
// the tile scheduler's raster order and swizzle) is a runtime argument (FORGE_ARG_*).
//
// cutlass_entry_points.cuh follows with the entry points.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"

namespace forge_cutlass {

using LayoutA = FORGE_LAYOUT_A;
using LayoutB = FORGE_LAYOUT_B;
using LayoutD = cutlass::layout::RowMajor;
using ElementAccumulator = float;
using ElementCompute = float;

#if FORGE_PINGPONG
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;
#else
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
#endif

#if FORGE_HAS_SOURCE
using ElementC = Element;
#else
using ElementC = void;
#endif

#if FORGE_HAS_BIAS
using FusionOp = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<
    FORGE_ACTIVATION, Element, ElementCompute, Element, ElementC>;
#else
using FusionOp = cutlass::epilogue::fusion::LinCombEltAct<FORGE_ACTIVATION, Element, ElementCompute,
                                                          ElementC>;
#endif

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, ElementAccumulator, ElementCompute,
    ElementC, LayoutD, kAlignment, Element, LayoutD, kAlignment, EpilogueSchedule,
    FusionOp>::CollectiveOp;

using Gemm = Sm90Gemm<LayoutA, LayoutB, CollectiveEpilogue>;

using StrideA = typename Gemm::GemmKernel::StrideA;
using StrideB = typename Gemm::GemmKernel::StrideB;
using StrideC = typename Gemm::GemmKernel::StrideC;
using StrideD = typename Gemm::GemmKernel::StrideD;

typename Gemm::Arguments MakeArguments(const Args& args, void* const* buffers) {
  const int m = static_cast<int>(args[FORGE_ARG_M]);
  const int n = static_cast<int>(args[FORGE_ARG_N]);
  const int k = static_cast<int>(args[FORGE_ARG_K]);
  const int batch = static_cast<int>(args[FORGE_ARG_BATCH]);
  constexpr bool kAKMajor = std::is_same_v<LayoutA, cutlass::layout::RowMajor>;
  constexpr bool kBKMajor = std::is_same_v<LayoutB, cutlass::layout::ColumnMajor>;
  const StrideA stride_a =
      Sm90Stride<StrideA, kAKMajor>(args[FORGE_ARG_LDA], args[FORGE_ARG_BATCH_STRIDE_A]);
  const StrideB stride_b =
      Sm90Stride<StrideB, kBKMajor>(args[FORGE_ARG_LDB], args[FORGE_ARG_BATCH_STRIDE_B]);
  const StrideC stride_c =
      Sm90Stride<StrideC, true>(args[FORGE_ARG_LDC], args[FORGE_ARG_BATCH_STRIDE_C]);
  const StrideD stride_d =
      Sm90Stride<StrideD, true>(args[FORGE_ARG_LDD], args[FORGE_ARG_BATCH_STRIDE_D]);

  typename Gemm::Arguments arguments{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {m, n, k, batch},
      {args.Buffer<const Element>(buffers, FORGE_ARG_A), stride_a,
       args.Buffer<const Element>(buffers, FORGE_ARG_B), stride_b},
      {{},
#if FORGE_HAS_SOURCE
       args.Buffer<const Element>(buffers, FORGE_ARG_C),
#else
       nullptr,
#endif
       stride_c, args.Buffer<Element>(buffers, FORGE_ARG_D), stride_d}};
  SetSm90EpilogueAndScheduler<Element>(args, buffers, arguments);
  return arguments;
}

constexpr char kTemplateName[] = "sm90_tma_ws: ";

}  // namespace forge_cutlass
