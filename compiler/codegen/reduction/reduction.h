// The reduction family: reductions along one dimension with the group's elementwise ops fused
// before and after them. Supported reductions: softmax, log_softmax, logsumexp, sum / mean /
// amax / amin, var and var_mean (correction or unbiased, keepdim or not) over any one dimension;
// layer_norm (weight, bias, eps) over the last dimension, or over several trailing ones as over
// one dim of their product when every tensor of the task is contiguous across them; group_norm,
// native_group_norm and instance_norm (without running statistics) as layer norm over each
// (sample, group) of the task rewritten to (N, G, C/G * spatial), the affine read per channel
// (analysis.h). The RMSNorm pattern
// (pow, mean, add eps, rsqrt, mul, mul weight) is mean plus elementwise ops. Several reductions
// may be chained (e.g. layer_norm then softmax): a reduction whose input depends on another's
// result runs in a later pass over the row. Every reduction of a task reduces the same dimension
// of tensors of one shape; a "row" is the set of elements that share every other coordinate. View
// ops in the group (transpose, permute, view, expand, slice, ...) fold into the indices their
// sources are read at, except a view that would read a softmax / log_softmax / layer_norm result
// at another row's element.
//
// Template "row_reduce": a row (all elements that share the leading coordinates) is reduced by a
// group of `threads_per_row` threads: one warp (32) or several warps (64..1024, combining warps
// through shared memory). A block holds `rows_per_block` such groups. Each pass walks the row in
// chunks of `vector_width` consecutive elements per thread; `cache_row` loads the row-sized
// inputs into registers once instead of re-reading them every pass. `online_softmax` computes
// softmax's max and sum in one pass (else two); `welford` computes layer_norm's mean and variance
// in one pass (else two: mean, then the sum of squared deviations), about a shift (the first
// element each thread sees), so rows with a large mean and a small spread keep their precision. Accumulation is in float32
// (float64 when the task has float64 values). Rows too long for one block's registers (more than
// 64 x 1024 elements of row-sized inputs) also get `cluster_blocks`: 2-8 blocks of one thread
// block cluster share a row, each taking a contiguous part, and combine every reduction's partial
// results in rank order through distributed shared memory; with cache_row (required) each block
// keeps its part in shared memory and reads its input once. Needs sm_90 or newer (SupportsArch).
// `max_registers` (0, or 64 to 128) caps a thread's registers through __launch_bounds__ (blocks
// per SM), for more resident warps.
//
// Template "col_reduce", for a reduced dimension followed by inner elements (e.g. dim 1 of
// (N, C, H, W), H*W inner elements): consecutive threads own consecutive rows (consecutive inner
// positions, so every load of a warp is coalesced) and each walks its row's reduced dimension;
// `reduce_threads` threads may split one row's reduced dimension, combining through shared
// memory in a fixed order (deterministic). A block holds threads_per_block / reduce_threads rows.
// `cache_row`, `online_softmax` and `welford` are as above. Var and var_mean use `welford` too.
//
// Template "transpose_reduce", offered first (the default) beside row_reduce when the rows are
// read across memory: some row-shaped value is a group input, or a permute / transpose of one,
// whose reduced dim is strided and whose innermost other dim has unit stride (a layer norm, RMS
// norm or softmax over the channels of a permuted NCHW tensor: ConvNeXt's dwconv -> permute ->
// LayerNorm). A block takes a tile of `tile_rows` consecutive rows (consecutive in memory) with
// `threads_per_block` threads: it computes the reductions' inputs with its lanes on consecutive
// rows (coalesced loads) into a shared-memory tile, reduces each row as col_reduce does
// (threads_per_block / tile_rows threads a row, combined in a fixed order), then writes the
// outputs from the tile in their own order (along the row for an output contiguous along the
// reduced dim: coalesced stores), the fused prologue and epilogue included. `online_softmax` and
// `welford` as above. Validate declines a tile over kMaxTransposeTileBytes (layout.h) of shared
// memory, a task whose rows are not read across memory, and idle threads or tile rows.
//
// Template "cross_entropy", for a task that is one aten::cross_entropy_loss node (or
// aten::nll_loss / nll_loss_nd, whose rows are log-probabilities: the loss is -x[target], with no
// pass over the row): (N, C) logits (float32 / bfloat16 / float16, accumulated in float32;
// float64 in float64), int64 class-index targets of shape (N), reduction mean, sum or none (a
// loss per row, 0 where ignored), ignore_index, class weights ((C), the logits' dtype: a row's
// loss times its target's weight, the mean over the counted rows' weights) or label smoothing
// (not both). A row's loss is logsumexp(logits) - logits[target] (with label smoothing e: lse -
// (1 - e) logits[target] - e/C sum(logits)), computed by `threads_per_row` threads in one
// online-softmax pass of `vector_width`-element loads;
// `rows_per_block` row groups per block. Blocks stride over the rows (at most 4096 blocks) and
// leave per-block partial sums in a __device__ array; the last block to finish adds them in block
// order, so the result is deterministic. Launches of one loaded module must not overlap.
//
// This folder: analysis.h (what a task reduces), layout.h (a point's layout, its constraints, its
// cost hints and the default point), reduction_emitter.h with row_emitter.h, column_emitter.h and
// transpose_emitter.h (the row_reduce, col_reduce and transpose_reduce sources), cross_entropy.h
// (that template whole), and the CUDA the emitters embed (reduction_prelude.cuh,
// cluster_prelude.cuh, cross_entropy.cuh; cuda_sources.h).
#ifndef FORGE_COMPILER_CODEGEN_REDUCTION_REDUCTION_H_
#define FORGE_COMPILER_CODEGEN_REDUCTION_REDUCTION_H_

#include "compiler/codegen/family.h"

namespace forge::codegen {

class ReductionFamily : public KernelFamily {
 public:
  static constexpr char kTemplateName[] = "row_reduce";
  static constexpr char kColumnTemplateName[] = "col_reduce";
  static constexpr char kTransposeTemplateName[] = "transpose_reduce";
  static constexpr char kKernelName[] = "forge_row_reduce";
  static constexpr char kCrossEntropyTemplateName[] = "cross_entropy";
  static constexpr char kCrossEntropyKernelName[] = "forge_cross_entropy";
  // row_reduce with cluster_blocks: the chunk loops unroll this deep, so that the loads filling the
  // shared-memory row cache are in flight together (CostHints::unrolled_elements counts it).
  static constexpr int kClusterChunkUnroll = 4;

  forge::v1::KernelFamily kind() const override { return forge::v1::KERNEL_FAMILY_REDUCTION; }
  absl::string_view name() const override { return "reduction"; }
  absl::string_view generator_version() const override { return "reduction-9"; }

  absl::Status Applies(const forge::v1::KernelTask& task) const override;
  absl::StatusOr<std::vector<TemplateSpace>> ScheduleSpace(
      const forge::v1::KernelTask& task) const override;
  absl::Status Validate(const forge::v1::KernelTask& task,
                        const SchedulePoint& point) const override;
  absl::StatusOr<LaunchPlan> Plan(const forge::v1::KernelTask& task,
                                  const SchedulePoint& point) const override;
  absl::StatusOr<std::string> Emit(const forge::v1::KernelTask& task,
                                   const LaunchPlan& plan) const override;
  // cluster_blocks > 1 needs sm_90 or newer.
  absl::Status SupportsArch(const forge::v1::KernelTask& task, const SchedulePoint& point,
                            absl::string_view target_arch) const override;
};

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_REDUCTION_REDUCTION_H_
