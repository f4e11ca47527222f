// The sm80_3xtf32 template: a CUTLASS 2.x GEMM for float32 tasks on the tensor cores with
// float32 accuracy: OpMultiplyAddFastF32 splits each operand into a TF32 "big" part and a TF32
// "small" remainder and adds three mma.sync products (big*big + big*small + small*big), which
// keeps the error near float32's (CUTLASS example 27). mma.sync runs on sm_80 and later, sm_90
// included. Embedded at build time after the generated prologue and cutlass_common.cuh; the
// prologue defines the configuration:
//   FORGE_LAYOUT_A/_B          cutlass::layout::RowMajor or ColumnMajor (A is m x k, B is k x n)
//   FORGE_TB_M/_N/_K           the threadblock tile;  FORGE_WARP_M/_N/_K  the warp tile
//   FORGE_STAGES               the multistage (cp.async) pipeline depth
//   FORGE_ALIGNMENT            elements per global access (4: 16 bytes; 1: any leading dimension)
//   FORGE_ACTIVATION           the activation functor template (as in sm90_tma_ws.cuh)
// D = activation(alpha * (A B) + beta * C): a bias is C with leading dimension 0 and beta 1, a
// residual is C with its own leading dimension (the plan's runtime arguments say which; never
// both). FORGE_ARG_BIAS is unused here (-1). D and C are row-major.
//
// cutlass_entry_points.cuh follows with the entry points.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN
#include "cutlass/epilogue/thread/linear_combination_generic.h"
#include "cutlass/gemm/device/gemm_universal.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"

namespace forge_cutlass {

using EpilogueOp = cutlass::epilogue::thread::LinearCombinationGeneric<
    FORGE_ACTIVATION, float, FORGE_ALIGNMENT, float, float>;

using Gemm = cutlass::gemm::device::GemmUniversal<
    float, FORGE_LAYOUT_A, float, FORGE_LAYOUT_B, float, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<FORGE_TB_M, FORGE_TB_N, FORGE_TB_K>,
    cutlass::gemm::GemmShape<FORGE_WARP_M, FORGE_WARP_N, FORGE_WARP_K>,
    cutlass::gemm::GemmShape<16, 8, 8>, EpilogueOp,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8>, FORGE_STAGES, FORGE_ALIGNMENT,
    FORGE_ALIGNMENT, cutlass::arch::OpMultiplyAddFastF32>;

typename Gemm::Arguments MakeArguments(const Args& args, void* const* buffers) {
  const int batch = static_cast<int>(args[FORGE_ARG_BATCH]);
  return typename Gemm::Arguments(
      batch > 1 ? cutlass::gemm::GemmUniversalMode::kBatched
                : cutlass::gemm::GemmUniversalMode::kGemm,
      {static_cast<int>(args[FORGE_ARG_M]), static_cast<int>(args[FORGE_ARG_N]),
       static_cast<int>(args[FORGE_ARG_K])},
      batch,
      {static_cast<float>(args.Scalar(FORGE_ARG_ALPHA)),
       static_cast<float>(args.Scalar(FORGE_ARG_BETA))},
      args.Buffer<const float>(buffers, FORGE_ARG_A), args.Buffer<const float>(buffers, FORGE_ARG_B),
      args.Buffer<const float>(buffers, FORGE_ARG_C), args.Buffer<float>(buffers, FORGE_ARG_D),
      args[FORGE_ARG_BATCH_STRIDE_A], args[FORGE_ARG_BATCH_STRIDE_B],
      args[FORGE_ARG_BATCH_STRIDE_C], args[FORGE_ARG_BATCH_STRIDE_D], args[FORGE_ARG_LDA],
      args[FORGE_ARG_LDB], args[FORGE_ARG_LDC], args[FORGE_ARG_LDD]);
}

constexpr char kTemplateName[] = "sm80_3xtf32: ";

}  // namespace forge_cutlass
