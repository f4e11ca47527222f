// The gemv family: GEMM tasks with few rows (M <= 16 per product: decode's linear layers), which
// are bound by reading the weight once, as one generated NVRTC kernel (gemv.cuh plus a template's
// body) that streams B with 16-byte loads and reads the few rows of A through L1.
//
// Tasks: whatever gemm_analysis accepts (linear / addmm / mm / bmm / matmul, N-d x 2-d and
// batched 3-d x 3-d, broadcast batches, any operand transposes) in float32, float16 or bfloat16,
// with M <= 16, followed by any elementwise epilogue the pointwise family can emit (bias,
// activations, scale, residual, casts, several outputs): the epilogue is ElementEmitter's (the
// pointwise family's expression emitter), fed the float32 product at each element; linear's
// bias and addmm's addend (beta = alpha = 1) are added to it first. Every output must be
// contiguous, at storage offset 0, and of the product's element count.
//
// Both templates accumulate in float32 and are deterministic (no atomics). Shared parameters:
//   split_k        1, 2, 4, 8   blocks of one thread block cluster that split K; they sum their
//                               parts in rank order through distributed shared memory (sm_90)
//   warps          warps per block
//
// Template "gemv" (gemv_ffma.cuh: FFMA on float32 conversions; every dtype, both layouts): B is
// read as W[n, k] (B stored transposed: linear's weight; each warp owns `rows` outputs and its
// lanes stride along K, a shuffle butterfly sums them) or as W[k, n] (matmul's; each lane owns
// `rows` vectors of columns and the block's warps stride along K, summed through shared memory in
// warp order). Parameters besides split_k and warps (2, 4, 8):
//   rows           1, 2, 4, 8   W[n, k]: outputs per warp (each vector of A read serves that
//                               many of W: at M = 8 A's loads and conversions per element of W
//                               are M / rows); W[k, n]: column vectors per lane
//   vector_width   1, 2, 4, 8   elements of B per load (at most 16 bytes; must divide B's
//                               contiguous extent and leading dimension)
//   unroll         1, 2, 4, 8   vector loads of B per row a thread issues before using them
//   m_per_pass     1, 2, 4, 8, 16  rows of A per pass over the block's slice of B (the next
//                               pass re-reads the slice, from L2)
// A's rows are read as vectors too when A is row-major and its leading dimension and K allow;
// odd K or N are predicated (vector_width 1 runs any size).
//
// Template "gemv_mma" (gemv_mma.cuh: tensor cores, sm_80 and newer): float16 / bfloat16 whose
// weight splits into 16-byte vectors along its contiguous extent (W[n, k]: K, else N, and B's
// leading dimension and batch stride multiples of 8; else declined with the reason, the FFMA
// template runs those). mma.sync m16n8k16 with fragments loaded straight from global memory in
// 16-byte vectors (no shared memory, no conversions): W[n, k] computes Y^T = W X^T, 16 rows of W
// by 8 rows of A per mma (two n-tiles for M > 8), K in steps of 32; W[k, n] computes Y = X W, the
// rows of A (M <= 16) by 8 of W's columns per mma, 64-column tiles, K in steps of 16. The block's
// warps take steps of K in turn and are summed in warp order through shared memory. It moves W's
// conversions and multiplies off the FFMA pipes, which bound template "gemv" at M = 8.
// Parameters besides split_k and warps (1, 2, 4, 8):
//   tiles          1, 2, 4      tiles of W per warp (W[n, k]: 16 rows; W[k, n]: 64 columns);
//                               each fragment of A read serves them all
//   unroll         1, 2, 4, 8   steps along K a warp loads before it uses them
//   l2_prefetch    0, 1         W's loads ask L2 for whole 256-byte lines
// Odd N and K are predicated (W[n, k]: rows past N read row N - 1 and are not stored).
#ifndef FORGE_COMPILER_CODEGEN_GEMV_GEMV_H_
#define FORGE_COMPILER_CODEGEN_GEMV_GEMV_H_

#include "compiler/codegen/family.h"

namespace forge::codegen {

class GemvFamily : public KernelFamily {
 public:
  static constexpr char kTemplateName[] = "gemv";
  static constexpr char kMmaTemplateName[] = "gemv_mma";
  static constexpr char kKernelName[] = "forge_gemv";
  // The largest M (rows of A per product) the family takes: beyond it a tiled GEMM wins.
  static constexpr int64_t kMaxRows = 16;

  forge::v1::KernelFamily kind() const override { return forge::v1::KERNEL_FAMILY_GEMV; }
  absl::string_view name() const override { return "gemv"; }
  absl::string_view generator_version() const override { return "gemv-2"; }

  absl::Status Applies(const forge::v1::KernelTask& task) const override;
  absl::StatusOr<std::vector<TemplateSpace>> ScheduleSpace(
      const forge::v1::KernelTask& task) const override;
  absl::Status Validate(const forge::v1::KernelTask& task,
                        const SchedulePoint& point) const override;
  absl::StatusOr<LaunchPlan> Plan(const forge::v1::KernelTask& task,
                                  const SchedulePoint& point) const override;
  absl::StatusOr<std::string> Emit(const forge::v1::KernelTask& task,
                                   const LaunchPlan& plan) const override;
  // split_k > 1 needs thread block clusters: sm_90 and newer; template gemv_mma sm_80 and newer.
  absl::Status SupportsArch(const forge::v1::KernelTask& task, const SchedulePoint& point,
                            absl::string_view target_arch) const override;
};

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_GEMV_GEMV_H_
