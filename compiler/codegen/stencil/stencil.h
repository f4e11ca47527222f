// The stencil family: one sliding-window op over the spatial dims (H, W) of an (N, C, H, W)
// tensor, channel by channel — a depthwise 2-d convolution (channel multiplier 1, any kernel,
// stride, padding, dilation, with or without bias), max pooling, average pooling
// (count_include_pad, ceil_mode) or an even adaptive average pooling (analysis.h says exactly
// which) — with the group's elementwise and view ops fused before it (the windowed tensor
// computed element by element from the task's inputs: batch norm's affine then ReLU before a max
// pool) and after it (every task output computed from the window's result at the same element:
// bias then GELU after a depthwise convolution). Any input and output strides (NCHW and
// channels-last); every floating dtype, accumulated in float32 (float64 for float64 tensors).
//
// Templates (layout.h): "planar" (a tile of one (n, c) plane per block, consecutive threads on
// consecutive output columns, the input window optionally staged in shared memory),
// "channels_last" (consecutive threads on consecutive channel vectors, inputs read through L1 as
// vectors where the tensor allows), their register-tiled counterparts "tiled" (a thread computes
// rows x columns of adjacent outputs from an input tile staged in shared memory in vectors along
// W, each staged input read once per thread) and "channels_last_tiled" (a block a chunk of
// channels over a spatial tile, weights in shared memory, input vectors reused across a thread's
// columns), and "window_reduce" (a window as a reduction over many threads: global pools). Taps
// combine in a fixed order: the same bits every launch.
//
// This folder: analysis.h (what a task windows), layout.h (a point's layout, constraints,
// default, launch and cost hints), emitter.h (the source), and the CUDA it embeds
// (stencil_prelude.cuh, planar.cuh, channels_last.cuh, tiled.cuh, channels_last_tiled.cuh,
// window_reduce.cuh; cuda_sources.h).
//
// Hand-written rather than a library's: cuDNN's depthwise convolution and ATen's pooling kernels
// are separate launches that take no fused prologue or epilogue (the bias, the activation, the
// batch norm before a pool each cost another pass over memory), and CUTLASS has no depthwise or
// pooling kernel for NCHW.
#ifndef FORGE_COMPILER_CODEGEN_STENCIL_STENCIL_H_
#define FORGE_COMPILER_CODEGEN_STENCIL_STENCIL_H_

#include "compiler/codegen/family.h"

namespace forge::codegen {

class StencilFamily : public KernelFamily {
 public:
  forge::v1::KernelFamily kind() const override { return forge::v1::KERNEL_FAMILY_STENCIL; }
  absl::string_view name() const override { return "stencil"; }
  absl::string_view generator_version() const override { return "stencil-2"; }

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

#endif  // FORGE_COMPILER_CODEGEN_STENCIL_STENCIL_H_
