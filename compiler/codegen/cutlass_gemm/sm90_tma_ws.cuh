// The sm90_tma_ws template: a CUTLASS 3.x GEMM for Hopper (TMA loads, WGMMA, a warp-specialized
// persistent kernel, TMA epilogue with an epilogue fusion), embedded at build time after the
// generated prologue and cutlass_common.cuh. The prologue defines the configuration:
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

namespace forge_cutlass {

using Element = FORGE_ELEMENT;
using LayoutA = FORGE_LAYOUT_A;
using LayoutB = FORGE_LAYOUT_B;
using LayoutD = cutlass::layout::RowMajor;
using ElementAccumulator = float;
using ElementCompute = float;
constexpr int kAlignment = 128 / cutlass::sizeof_bits<Element>::value;

using TileShape = cute::Shape<cute::Int<FORGE_TILE_M>, cute::Int<FORGE_TILE_N>, cute::Int<FORGE_TILE_K>>;
using ClusterShape = cute::Shape<cute::Int<FORGE_CLUSTER_M>, cute::Int<FORGE_CLUSTER_N>, cute::_1>;

#if FORGE_PINGPONG
using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;
#else
using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
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

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, kAlignment, Element,
    LayoutB, kAlignment, ElementAccumulator, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename CollectiveEpilogue::SharedStorage))>,
    MainloopSchedule>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>,
                                                        CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

using StrideA = typename Gemm::GemmKernel::StrideA;
using StrideB = typename Gemm::GemmKernel::StrideB;
using StrideC = typename Gemm::GemmKernel::StrideC;
using StrideD = typename Gemm::GemmKernel::StrideD;
using RasterOrder =
    typename cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90Params::RasterOrderOptions;

// CUTLASS's (M, K, L) stride of A and (N, K, L) stride of B from a leading dimension: the
// unit-stride mode is the one the layout makes contiguous.
template <class Stride, bool kKMajor>
Stride OperandStride(int64_t leading_dim, int64_t batch_stride) {
  Stride stride{};
  if constexpr (kKMajor) {
    cute::get<0>(stride) = leading_dim;
  } else {
    cute::get<1>(stride) = leading_dim;
  }
  cute::get<2>(stride) = batch_stride;
  return stride;
}

typename Gemm::Arguments MakeArguments(const Args& args, void* const* buffers) {
  const int m = static_cast<int>(args[FORGE_ARG_M]);
  const int n = static_cast<int>(args[FORGE_ARG_N]);
  const int k = static_cast<int>(args[FORGE_ARG_K]);
  const int batch = static_cast<int>(args[FORGE_ARG_BATCH]);
  constexpr bool kAKMajor = std::is_same_v<LayoutA, cutlass::layout::RowMajor>;
  constexpr bool kBKMajor = std::is_same_v<LayoutB, cutlass::layout::ColumnMajor>;
  const StrideA stride_a =
      OperandStride<StrideA, kAKMajor>(args[FORGE_ARG_LDA], args[FORGE_ARG_BATCH_STRIDE_A]);
  const StrideB stride_b =
      OperandStride<StrideB, kBKMajor>(args[FORGE_ARG_LDB], args[FORGE_ARG_BATCH_STRIDE_B]);
  StrideC stride_c{};
  cute::get<0>(stride_c) = args[FORGE_ARG_LDC];
  cute::get<2>(stride_c) = args[FORGE_ARG_BATCH_STRIDE_C];
  StrideD stride_d{};
  cute::get<0>(stride_d) = args[FORGE_ARG_LDD];
  cute::get<2>(stride_d) = args[FORGE_ARG_BATCH_STRIDE_D];

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
  auto& fusion = arguments.epilogue.thread;
  fusion.alpha = static_cast<ElementCompute>(args.Scalar(FORGE_ARG_ALPHA));
  fusion.beta = static_cast<ElementCompute>(args.Scalar(FORGE_ARG_BETA));
#if FORGE_HAS_BIAS
  fusion.bias_ptr = args.Buffer<const Element>(buffers, FORGE_ARG_BIAS);
#endif
  static constexpr RasterOrder kRasterOrders[] = {RasterOrder::Heuristic, RasterOrder::AlongM,
                                                  RasterOrder::AlongN};
  const int64_t raster = args[FORGE_ARG_RASTER];
  arguments.scheduler.raster_order = kRasterOrders[raster >= 0 && raster < 3 ? raster : 0];
  arguments.scheduler.max_swizzle_size = static_cast<int>(args[FORGE_ARG_SWIZZLE]);
  return arguments;
}

}  // namespace forge_cutlass

extern "C" int64_t forge_workspace_bytes(const int64_t* runtime_args, int32_t runtime_arg_count) {
  const forge_cutlass::Args args{runtime_args, runtime_arg_count};
  if (forge_cutlass::CheckArgs(args, -1)[0] != '\0') return -1;
  // Only sizes and scalars enter the workspace size: no buffers here.
  return static_cast<int64_t>(
      forge_cutlass::Gemm::get_workspace_size(forge_cutlass::MakeArguments(args, nullptr)));
}

extern "C" int32_t forge_launch(void* const* buffers, int32_t buffer_count,
                                const int64_t* runtime_args, int32_t runtime_arg_count,
                                void* workspace, int64_t workspace_bytes, void* stream,
                                char* error, int32_t error_capacity) {
  const forge_cutlass::Args args{runtime_args, runtime_arg_count};
  if (const char* reason = forge_cutlass::CheckArgs(args, buffer_count); reason[0] != '\0') {
    return forge_cutlass::Fail(error, error_capacity, "sm90_tma_ws: ", reason);
  }
  forge_cutlass::Gemm gemm;
  const typename forge_cutlass::Gemm::Arguments arguments =
      forge_cutlass::MakeArguments(args, buffers);
  if (static_cast<int64_t>(forge_cutlass::Gemm::get_workspace_size(arguments)) > workspace_bytes) {
    return forge_cutlass::Fail(error, error_capacity, "sm90_tma_ws: ",
                               "the workspace is smaller than forge_workspace_bytes");
  }
  cutlass::Status status = gemm.can_implement(arguments);
  if (status != cutlass::Status::kSuccess) {
    return forge_cutlass::Fail(error, error_capacity, "sm90_tma_ws: can_implement: ",
                               cutlass::cutlassGetStatusString(status));
  }
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  status = gemm.initialize(arguments, workspace, cuda_stream);
  if (status != cutlass::Status::kSuccess) {
    return forge_cutlass::Fail(error, error_capacity, "sm90_tma_ws: initialize: ",
                               cutlass::cutlassGetStatusString(status));
  }
  status = gemm.run(cuda_stream);
  if (status != cutlass::Status::kSuccess) {
    return forge_cutlass::Fail(error, error_capacity, "sm90_tma_ws: run: ",
                               cutlass::cutlassGetStatusString(status));
  }
  return 0;
}
