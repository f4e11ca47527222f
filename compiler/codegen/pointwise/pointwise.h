// The pointwise family: any DAG of elementwise ATen ops (arithmetic, comparisons, where, unary
// math, activations, casts), with broadcasting, arbitrary input strides, 0-d tensors, scalar
// constants, several outputs, view ops (view, reshape, permute, transpose, expand, slice, select,
// squeeze, unsqueeze, split, unbind) folded in as index remapping, and the glue ops (cat, stack,
// flip, roll, repeat, repeat_interleave, triu/tril, arange, index_select, gather, embedding:
// compiler/codegen/glue_forms.h) read through by index arithmetic. One kernel computes every
// output.
//
// Template "pointwise_flat": each thread handles `elements_per_thread` chunks of `vector_width`
// consecutive elements (in the row-major order of the outputs); the chunks of one block are
// interleaved across threads so that every load and store instruction is coalesced. There is no
// grid-stride loop: the grid covers every element (one block per threads*elements*vector
// elements), which keeps the index arithmetic free of loop-carried state. Inputs laid out like the
// outputs (same shape, contiguous) are read at the element's position directly ("contiguous fast
// path"), with 16-byte vector loads when vector_width > 1; an input read through views
// (transpose, permute, slice, select, expand, broadcast: RoPE's q read as heads, its cos / sin
// tables) is also loaded as one vector per chunk where lane_vectors.h proves from the index
// arithmetic that the chunk's lanes read consecutive elements of unit stride from an aligned
// start; any other read (a glue op's alternatives, a reshape's re-split, a misaligned slice) is
// gathered element by element through its strides. Index arithmetic is 32-bit unless some tensor
// of the group reaches past 2^31 elements.
//
// Parameters: threads_per_block {128, 256, 512, 1024}, elements_per_thread {1, 2, 4, 8},
// vector_width {1, 2, 4, 8} (elements; needs contiguous outputs, a width that divides the element
// count and the storage offsets, and at most 16 bytes per vector access).
//
// Template "pointwise_tile", offered (and the default) when a full-size value reaches the outputs
// through a permute or transpose that moves its contiguous dim to output dim `tile_dim` (a GEMM's
// NHWC output permuted back to NCHW, x.permute(...).contiguous()): the outputs are split at
// tile_dim into outer x tile_dim x inner (the dims after tile_dim must be one contiguous block of
// every output); a block of 32 x threads_y threads computes a 32 x 32 tile of (tile_dim, inner)
// with its lanes along tile_dim, where that read is coalesced, into shared memory, then stores it
// with its lanes along the inner block, where the outputs are contiguous. Without it one of the
// two sides is read or written 2-byte-at-a-stride. Parameters: tile_dim (0 .. rank - 2),
// threads_y {4, 8}.
#ifndef FORGE_COMPILER_CODEGEN_POINTWISE_POINTWISE_H_
#define FORGE_COMPILER_CODEGEN_POINTWISE_POINTWISE_H_

#include "compiler/codegen/family.h"

namespace forge::codegen {

class PointwiseFamily : public KernelFamily {
 public:
  static constexpr char kTemplateName[] = "pointwise_flat";
  static constexpr char kTileTemplateName[] = "pointwise_tile";
  static constexpr char kKernelName[] = "forge_pointwise";

  forge::v1::KernelFamily kind() const override { return forge::v1::KERNEL_FAMILY_POINTWISE; }
  absl::string_view name() const override { return "pointwise"; }
  absl::string_view generator_version() const override { return "pointwise-4"; }

  absl::Status Applies(const forge::v1::KernelTask& task) const override;
  absl::StatusOr<std::vector<TemplateSpace>> ScheduleSpace(
      const forge::v1::KernelTask& task) const override;
  absl::Status Validate(const forge::v1::KernelTask& task,
                        const SchedulePoint& point) const override;
  absl::StatusOr<LaunchPlan> Plan(const forge::v1::KernelTask& task,
                                  const SchedulePoint& point) const override;
  absl::StatusOr<std::string> Emit(const forge::v1::KernelTask& task,
                                   const LaunchPlan& plan) const override;
};

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_POINTWISE_POINTWISE_H_
