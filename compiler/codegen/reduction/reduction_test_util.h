// Test support for the reduction family's tests: hand-made reduction tasks shaped like the
// exporter's (softmax, layer norm, RMS norm, statistics, var_mean, cross-entropy), a sample of
// them covering every reduction kind and both templates (Cases), and schedule points.
#ifndef FORGE_COMPILER_CODEGEN_REDUCTION_REDUCTION_TEST_UTIL_H_
#define FORGE_COMPILER_CODEGEN_REDUCTION_REDUCTION_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "compiler/codegen/family.h"
#include "forge/v1/task.pb.h"

namespace forge::codegen::testing {

inline constexpr forge::v1::DType kF32 = forge::v1::DTYPE_FLOAT32;
inline constexpr forge::v1::DType kF16 = forge::v1::DTYPE_FLOAT16;
inline constexpr forge::v1::DType kBF16 = forge::v1::DTYPE_BFLOAT16;
inline constexpr forge::v1::DType kF64 = forge::v1::DTYPE_FLOAT64;
inline constexpr auto kReduction = forge::v1::KERNEL_FAMILY_REDUCTION;

// softmax (or `op`: log_softmax) over the last dim.
forge::v1::KernelTask Softmax(forge::v1::DType dtype, std::vector<int64_t> shape,
                              const char* op = "softmax");
// layer_norm(x, (C,), w, b, 1e-5) then gelu, as the layer-norm+GELU test model exports it.
forge::v1::KernelTask LayerNormGelu(forge::v1::DType dtype, int64_t rows, int64_t columns);
// nn.LayerNorm((C, H, W)) over x of shape (N, C, H, W), then `epilogue` (none, or "gelu");
// `x_strides` as the kernel sees x (contiguous when empty).
forge::v1::KernelTask LayerNormTrailing(forge::v1::DType dtype, std::vector<int64_t> shape,
                                        int normalized_dims, std::vector<int64_t> x_strides = {},
                                        std::vector<int64_t> weight_shape = {});
// The RMSNorm pattern of the Llama block: x * rsqrt(mean(x^2, -1, keepdim) + eps) * w.
forge::v1::KernelTask RmsNorm(forge::v1::DType dtype, int64_t rows, int64_t columns);
// `op` over the last dim of x * 2, x of shape (6, 5, 100).
forge::v1::KernelTask RowStatistic(const char* op, const char* overload, bool keepdim,
                                   forge::v1::DType dtype = kF32);
// Channel RMS norm as exported from x * rsqrt(x.pow(2).mean(dim=1, keepdim=True) + eps) * w on
// (N, C, H, W), w of shape (C, 1, 1).
forge::v1::KernelTask ChannelRmsNorm(forge::v1::DType dtype, std::vector<int64_t> shape);
// _softmax over dim `dim`.
forge::v1::KernelTask SoftmaxDim(forge::v1::DType dtype, std::vector<int64_t> shape, int64_t dim);
// `op` over dim `dim` of x * 2 (var: var.correction with `correction`).
forge::v1::KernelTask Statistic(const char* op, const char* overload, std::vector<int64_t> shape,
                                int64_t dim, bool keepdim, forge::v1::DType dtype = kF32,
                                int64_t correction = 1);
// torch.var_mean(x, dim, correction=0, keepdim=True): outputs "vm.0" (var) and "vm.1" (mean).
forge::v1::KernelTask VarMean(std::vector<int64_t> shape, int64_t dim);
// nn.GroupNorm(groups, C) on x of shape (N, C, ...) then F.silu, as forge.export emits it
// (aten::group_norm(x, groups, w, b, eps, False), then aten::silu); `epilogue` false: the norm
// alone.
forge::v1::KernelTask GroupNormSilu(forge::v1::DType dtype, std::vector<int64_t> shape,
                                    int64_t groups, bool epilogue = true);
// aten::native_group_norm(x, w, b, N, C, HxW, groups, 1e-5) with its three outputs (y, mean,
// rstd; named "gn.0", "gn.1", "gn.2") all task outputs, y through `+ residual` (a second input
// of x's shape).
forge::v1::KernelTask NativeGroupNormResidual(forge::v1::DType dtype, std::vector<int64_t> shape,
                                              int64_t groups);
// nn.InstanceNorm2d(C, affine=True) as exported: aten::instance_norm without running statistics.
forge::v1::KernelTask InstanceNorm(forge::v1::DType dtype, std::vector<int64_t> shape);
// Labelled tasks of every reduction kind, dtype and both templates, with views in the group.
std::vector<std::pair<std::string, forge::v1::KernelTask>> Cases();
// F.cross_entropy(logits, target, ...) as forge.export emits it: one aten::cross_entropy_loss
// node; `arguments` are those after self and target that differ from their defaults (reduction 0
// makes the output one loss per row; an argument "weight" naming "w" adds the class weights as
// the third input); `op` "nll_loss_nd": F.nll_loss on log-probabilities.
forge::v1::KernelTask CrossEntropy(forge::v1::DType dtype, int64_t rows, int64_t classes,
                                   std::vector<forge::v1::Argument> arguments = {},
                                   std::vector<int64_t> logits_strides = {},
                                   const std::string& op = "cross_entropy_loss");

// Points of the templates.
SchedulePoint ClusterPoint(int64_t blocks, int64_t threads, int64_t width, int64_t online = 1);
SchedulePoint ColumnPoint(int64_t block, int64_t split, int64_t cache);
SchedulePoint Point(int64_t threads, int64_t rows, int64_t width, int64_t cache, int64_t online);
SchedulePoint CrossEntropyPoint(int64_t threads, int64_t rows, int64_t width);
// `prefix` and the point's parameters, for failure messages.
std::string Label(const std::string& prefix, const SchedulePoint& point);

}  // namespace forge::codegen::testing

#endif  // FORGE_COMPILER_CODEGEN_REDUCTION_REDUCTION_TEST_UTIL_H_
