// Test support for the generators: hand-made KernelTasks shaped like the exporter's, and NVRTC
// compiles of generated kernels through the worker's compile pool.
#ifndef FORGE_COMPILER_CODEGEN_TESTING_CODEGEN_TEST_UTIL_H_
#define FORGE_COMPILER_CODEGEN_TESTING_CODEGEN_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "absl/status/statusor.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/generated_kernel.h"
#include "forge/v1/task.pb.h"
#include "worker/compile/compile_pool.h"

namespace forge::codegen::testing {

// Argument constructors, named as the exporter names them.
forge::v1::Argument TensorArg(const std::string& name, const std::string& value);
forge::v1::Argument OptionalTensorArg(const std::string& name, const std::string& value);
forge::v1::Argument NoneArg(const std::string& name);
forge::v1::Argument FloatArg(const std::string& name, double value);
forge::v1::Argument IntArg(const std::string& name, int64_t value);
forge::v1::Argument BoolArg(const std::string& name, bool value);
forge::v1::Argument StringArg(const std::string& name, const std::string& value);
forge::v1::Argument IntsArg(const std::string& name, const std::vector<int64_t>& values);
// A `Tensor[]` argument (cat's and stack's `tensors`).
forge::v1::Argument TensorsArg(const std::string& name, const std::vector<std::string>& values);
forge::v1::Argument DTypeArg(const std::string& name, forge::v1::DType value);

class TaskBuilder {
 public:
  // A kernel input; contiguous unless `strides` is given.
  TaskBuilder& Input(const std::string& name, forge::v1::DType dtype, std::vector<int64_t> shape,
                     std::vector<int64_t> strides = {}, int64_t storage_offset = 0);
  // A node "aten::<op>.<overload>" whose one output is `output`.
  TaskBuilder& Node(const std::string& output, const std::string& op, const std::string& overload,
                    std::vector<forge::v1::Argument> arguments, forge::v1::DType dtype,
                    std::vector<int64_t> shape);
  // A node `name` of several outputs (split, unbind), `outputs[k]` of shape `shapes[k]`.
  TaskBuilder& MultiOutputNode(const std::string& name, const std::vector<std::string>& outputs,
                               const std::string& op, const std::string& overload,
                               std::vector<forge::v1::Argument> arguments, forge::v1::DType dtype,
                               const std::vector<std::vector<int64_t>>& shapes);
  // Marks `name` as a kernel output; contiguous unless `strides` is given.
  TaskBuilder& Output(const std::string& name, std::vector<int64_t> strides = {});
  forge::v1::KernelTask Build(forge::v1::KernelFamily family) const;

 private:
  forge::v1::TensorSpec Spec(forge::v1::DType dtype, const std::vector<int64_t>& shape,
                             std::vector<int64_t> strides, int64_t storage_offset) const;
  forge::v1::KernelTask task_;
};

// relu over a float32 vector of 16 (a pointwise task).
forge::v1::KernelTask ReluTask();
// relu(mm(a, b)), a (4, 8), b (8, 2) float32 (a GEMM task).
forge::v1::KernelTask MatmulReluTask();
// softmax(x, dim=-1) over a [rows, columns] tensor of `dtype`, with its flops (5 per element) and
// min_bytes (read and write once) set.
forge::v1::KernelTask SoftmaxTask(forge::v1::DType dtype, int64_t rows, int64_t columns);
// cumsum(x, dim=-1) over a [rows, columns] tensor of `dtype` (a scan task), with its flops (1 per
// element) and min_bytes (read and write once) set.
forge::v1::KernelTask CumsumTask(forge::v1::DType dtype, int64_t rows, int64_t columns);

// Stencil tasks of the stencil family's tests (unit and GPU), over x (N, C, H, W) of `shape`,
// stored channels-last (NHWC) when `channels_last`; outputs in the same memory order.
// A square window: kernel, stride, padding and dilation, the same along H and W.
struct Window2d {
  int64_t kernel = 3;
  int64_t stride = 1;
  int64_t padding = 1;
  int64_t dilation = 1;
};
// The strides of an (N, C, H, W) tensor stored channels-last.
std::vector<int64_t> ChannelsLastStrides(const std::vector<int64_t>& shape);
// conv2d(x, w[C, 1, k, k], bias b[C] when `bias`, groups = C), then gelu when `gelu`.
forge::v1::KernelTask DepthwiseConvTask(forge::v1::DType dtype, const std::vector<int64_t>& shape,
                                        const Window2d& window, bool bias, bool gelu,
                                        bool channels_last = false);
// max_pool2d(relu(x * scale + shift)), scale and shift (C, 1, 1): batch norm's eval affine.
forge::v1::KernelTask AffineReluMaxPoolTask(forge::v1::DType dtype,
                                            const std::vector<int64_t>& shape,
                                            const Window2d& window, bool ceil_mode = false,
                                            bool channels_last = false);
// avg_pool2d(x) (no dilation: avg_pool2d has none).
forge::v1::KernelTask AvgPoolTask(forge::v1::DType dtype, const std::vector<int64_t>& shape,
                                  const Window2d& window, bool ceil_mode, bool count_include_pad,
                                  bool channels_last = false);

// Every point of `family`'s spaces for `task` that Validate accepts, space by space in
// EnumeratePoints order (empty when the family does not apply).
std::vector<SchedulePoint> ValidPoints(const KernelFamily& family,
                                       const forge::v1::KernelTask& task);
// `count` of `points`, evenly spread from the first (all of them when there are no more).
std::vector<SchedulePoint> EvenSample(const std::vector<SchedulePoint>& points, size_t count);

// GEMM tasks of the GEMM families' tests (unit and GPU):
// linear(x[m, k], w[n, k], bias[n] when `bias`), then `activation` when not empty (with gelu's
// `approximate` when not empty).
forge::v1::KernelTask LinearActivationTask(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k,
                                           bool bias, const std::string& activation,
                                           const std::string& approximate = "");
// linear(x[m, k], w[n, k]) * 2, then `activation` on it with `arguments` after its `self`
// (leaky_relu's slope, a clamp's bounds). Inputs: x, w, and `low` [m, n] when an argument is a
// tensor (a clamp's tensor bound, which must name "low").
forge::v1::KernelTask ScaledActivationTask(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k,
                                           const std::string& activation,
                                           std::vector<forge::v1::Argument> arguments);
// A gated product (SwiGLU's gate and up projections of a Llama MLP):
// activation(linear(x[m, k], wg[n, k])) * linear(x, wu[n, k]).
forge::v1::KernelTask GatedLinearTask(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k,
                                      const std::string& activation = "silu");
// mm(a[m, k], b[k, n]) * scale + residual[m, n].
forge::v1::KernelTask ScaleResidualTask(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k,
                                        double scale);
// matmul(a[batch_a, m, k], b) with b = transpose(bt[batch_b, n, k], 1, 2) when `b_transposed`,
// else b[batch_b, k, n] (batch_a != batch_b broadcasts the batch of size 1); then `activation`
// when not empty. batch_a = batch_b = 0: 2-d mm(a[m, k], b[k, n]).
forge::v1::KernelTask MatmulTask(forge::v1::DType dtype, int64_t batch_a, int64_t batch_b,
                                 int64_t m, int64_t n, int64_t k, bool b_transposed = false,
                                 const std::string& activation = "");

// Convolution tasks of the cudnn_conv family's tests (unit and GPU): conv2d(x[n, c, h, w],
// weight[k, c / groups, r, s], bias[k] when `bias`, stride, padding, dilation, groups), then each
// step of `epilogue` in order: "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "relu6",
// "hardtanh" (the activation; hardtanh's default bounds -1, 1), "clamp" (min -0.25, no max), "residual" (+ residual[n, k, p, q], a task input), "channel_bias" (+ a task input
// channel_bias[1, k, 1, 1]), "scale" (* 0.5), "batch_norm" (the exporter's eval-mode
// _native_batch_norm_legit_no_training, with weight and bias, eps 1e-5), "batch_norm_eval" and
// "batch_norm_training" (aten::batch_norm without weight and bias, eps 1e-3, training false or
// true); a batch norm's [k] operands are task inputs of `dtype` named after its step ("step0_
// running_var"). `channels_last`: x and the output in NHWC strides.
// Its flops and min_bytes are set.
struct ConvShape {
  int64_t n = 1, c = 1, h = 1, w = 1, k = 1, r = 1, s = 1;
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
};
forge::v1::KernelTask ConvEpilogueTask(forge::v1::DType dtype, const ConvShape& shape, bool bias,
                                       const std::vector<std::string>& epilogue,
                                       bool channels_last = false);

// Attention tasks of the attention families' tests (unit and GPU): one
// aten::scaled_dot_product_attention of q[batch, heads, q_len, head_dim] over
// k, v[batch, kv_heads, kv_len, head_dim] (enable_gqa when kv_heads < heads), an ATTENTION task
// with its flops (2 products) and min_bytes (Q, K, V and the output once) set. `mask`: "" (none),
// "causal" (is_causal), "bool" (a bool attn_mask m[batch, 1, q_len, kv_len] of kept scores) or
// "additive" (a float attn_mask m[1, 1, q_len, kv_len] of `dtype`, added to the scores).
struct AttentionShape {
  int64_t batch = 1, heads = 1, kv_heads = 1, q_len = 1, kv_len = 1, head_dim = 64;
};
forge::v1::KernelTask SdpaTask(forge::v1::DType dtype, const AttentionShape& shape,
                               const std::string& mask = "");
// Llama-3-8B's decode attention: 32 query heads over 8 K/V heads, D 128, one query per head.
AttentionShape LlamaDecodeShape(int64_t batch, int64_t kv_len);

// Decode attention as a model spells it: SDPA (enable_gqa, 8 query heads over 2 K/V heads, D 64,
// batch 2) of q = transpose(q_bshd[2, 1, 8, 64], 1, 2) over k and v = the keys start..start+1000
// of caches [2, 2, 4096, 64] (slices along dim 2); the views carry the strides and storage
// offsets an export records.
forge::v1::KernelTask SdpaCacheSliceTask(forge::v1::DType dtype, int64_t start);

// One process-wide pool (2 threads) shared by the tests.
forge::compile::CompilePool& Pool();
forge::compile::CompileRequest RequestFor(const GeneratedKernel& kernel, const std::string& arch);

// Compiles every kernel for every arch of `archs` through Pool(), in parallel, and checks that
// each compiles and (when `expect_no_spills`) that ptxas reports no spills for it. Failures name
// `labels[i]`.
void ExpectCompiles(const std::vector<GeneratedKernel>& kernels,
                    const std::vector<std::string>& labels, bool expect_no_spills,
                    const std::vector<std::string>& archs = {"sm_80", "sm_90"});

// True when CUTLASS's headers are where Pool() looks ($FORGE_CUTLASS_INCLUDE, else the build's
// FORGE_CUTLASS_INCLUDE): the tests that compile host-launched candidates skip without them.
// Pool() runs $FORGE_NVCC where set, else the toolkit's nvcc.
bool HaveCutlass();

// The shared object of a host-launched candidate (CompileOutput::kNvccSharedObject) for `arch`,
// compiled through Pool() as the worker compiles it (compile::CompileRequestFor: its nvcc command
// line, arch and options); fails with nvcc's log.
absl::StatusOr<std::string> CompileSharedObject(const GeneratedKernel& kernel,
                                                const std::string& arch);

}  // namespace forge::codegen::testing

#endif  // FORGE_COMPILER_CODEGEN_TESTING_CODEGEN_TEST_UTIL_H_
