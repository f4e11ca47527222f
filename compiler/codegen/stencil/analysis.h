// The stencil family's task analysis: what a stencil kernel needs to know about a task, checked
// once. A task is one sliding-window node over the two spatial dims of an (N, C, H, W) tensor,
// channel by channel:
//   - aten::conv2d, depthwise with channel multiplier 1 (weight (C, 1, kh, kw), groups == C), any
//     stride, padding, dilation, with or without bias;
//   - aten::max_pool2d (kernel, stride, padding, dilation, ceil_mode; NaN propagates as in ATen);
//   - aten::avg_pool2d (kernel, stride, padding, ceil_mode, count_include_pad; no
//     divisor_override);
//   - aten::adaptive_avg_pool2d when it is an even pool: H and W multiples of the output's (a
//     global pool included), i.e. avg_pool2d with kernel = stride = H / OH, W / OW;
// with elementwise and view ops fused before it (the windowed tensor computed from the task's
// inputs element by element: batch norm's affine, an activation) and after it (every task output
// computed from the window's result at the same output element: bias, GELU, a cast). The
// window's input may have any strides (NCHW, channels-last); every task output has the stencil's
// output shape. Floating dtypes; float32 accumulation (float64 for float64 tensors).
//
// Analyze fails with Unimplemented naming the first obstacle when the family cannot implement the
// task (no stencil node or two, a dense convolution, an uneven adaptive pool, a rank other than
// 4, an integer dtype, a weight or bias that is not a task input), and with InvalidArgument when
// the task is malformed (missing or out-of-range arguments, an output of the wrong shape).
#ifndef FORGE_COMPILER_CODEGEN_STENCIL_ANALYSIS_H_
#define FORGE_COMPILER_CODEGEN_STENCIL_ANALYSIS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/codegen/cuda_expr.h"
#include "forge/v1/task.pb.h"

namespace forge::codegen::stencil {

// What the window computes; the values are the kernel's kStencilOp (stencil_prelude.cuh).
enum class StencilKind { kConv = 0, kMax = 1, kAverage = 2 };

struct StencilTask {
  explicit StencilTask(GroupView group_view) : view(std::move(group_view)) {}
  GroupView view;
  const forge::v1::Node* node = nullptr;
  StencilKind kind = StencilKind::kMax;
  std::string input;      // the windowed value, (N, C, H, W)
  std::string output;     // the stencil's result, (N, C, OH, OW)
  int weight_input = -1;  // conv: the task input position of the weight (C, 1, KH, KW)
  int bias_input = -1;    // conv with bias: the task input position of the bias (C)
  int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
  std::array<int64_t, 2> kernel = {1, 1};
  std::array<int64_t, 2> stride = {1, 1};
  std::array<int64_t, 2> padding = {0, 0};
  std::array<int64_t, 2> dilation = {1, 1};
  bool count_include_pad = true;  // avg
  std::string acc_type;           // "float" or "double"
  bool wide_index = false;        // some tensor reaches past 2^30 elements: 64-bit index math
  bool channels_last = false;     // the largest input's C stride is 1 (NHWC in memory)
  int64_t widest_access = 1;      // bytes of the widest element of an input or output
};

absl::StatusOr<StencilTask> Analyze(const forge::v1::KernelTask& task);

// The output size of a window `kernel` wide with `stride`, `padding`, `dilation` over `size`
// elements, as ATen computes it (ceil_mode: a last window that starts inside the input or its
// left padding counts); 0 or less when no window fits.
int64_t WindowOutputSize(int64_t size, int64_t kernel, int64_t stride, int64_t padding,
                         int64_t dilation, bool ceil_mode);

}  // namespace forge::codegen::stencil

#endif  // FORGE_COMPILER_CODEGEN_STENCIL_ANALYSIS_H_
