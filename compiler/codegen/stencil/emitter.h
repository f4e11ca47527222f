// The source of a stencil kernel: the kernel prelude, the task's types and constants, the
// element functions the template's kernel calls, stencil_prelude.cuh and the template's kernel
// (layout.h's templates, one .cuh each). The element functions, whose vector lanes run along C
// (channels_last, channels_last_tiled) or along W (tiled, window_reduce; planar has one lane):
//   forge_stencil_load(args, n, c, h, w, x): x[v] = the windowed tensor's element at
//     (n, c + v, h, w) or (n, c, h, w + v), v < kVectorWidth, computed from the task's inputs by
//     the fused prologue (a vector load where the tensor allows);
//   forge_stencil_weight(args, c, kh, kw): a depthwise convolution's weight at (c, 0, kh, kw) in
//     the accumulator's type (1 for a pool: the window's plain sum or max);
//   forge_stencil_bias(args, c): its bias at c (0 without one, and for a pool);
//   forge_stencil_store(args, n, c, oh, ow, y): every task output at (n, c + v, oh, ow) or
//     (n, c, oh, ow + v), v < kStoreWidth (kVectorWidth, or 1 for window_reduce), from y[v], the
//     window's results, by the fused epilogue, and its stores.
//
// Emitting is a pure function of (task, analysis, point): the same inputs give byte-identical
// source. It fails (Unimplemented) when an op or view of the group cannot be expressed, e.g. an
// epilogue that reads the window's result at another element than the one it writes.
#ifndef FORGE_COMPILER_CODEGEN_STENCIL_EMITTER_H_
#define FORGE_COMPILER_CODEGEN_STENCIL_EMITTER_H_

#include <string>

#include "absl/status/statusor.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/stencil/analysis.h"
#include "forge/v1/task.pb.h"

namespace forge::codegen::stencil {

// The source of a valid point of `analysis` (an analysis of `task`).
absl::StatusOr<std::string> EmitStencilKernel(const forge::v1::KernelTask& task,
                                              const StencilTask& analysis,
                                              const SchedulePoint& point);

}  // namespace forge::codegen::stencil

#endif  // FORGE_COMPILER_CODEGEN_STENCIL_EMITTER_H_
