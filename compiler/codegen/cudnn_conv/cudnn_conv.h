// The cuDNN convolution family (KERNEL_FAMILY_CUDNN_CONV): a convolution task (aten::conv2d,
// conv3d or convolution, not transposed, on float32, bfloat16 or float16) and the pointwise
// epilogue the partitioner fused after it, run as ONE cuDNN fused graph (cuDNN frontend's graph
// API): conv fprop, then the epilogue's steps in the task's order, each a cuDNN pointwise node:
//  - bias add: the conv's own bias, or an add of a [K], [K, 1, 1] or [1, K, 1, 1] task input (one
//    value per output channel, contiguous);
//  - residual add: an add of a task input of the output's shape (any strides);
//  - scale: a mul or div by a Python scalar;
//  - activation: relu, gelu (erf; approximate="tanh" too), silu (cuDNN's swish), sigmoid, tanh;
//  - clamp: hardtanh (min_val, max_val), relu6, clamp with a scalar min (and max): cuDNN's relu
//    with a lower and an upper clip;
//  - batch norm in eval mode (aten::_native_batch_norm_legit_no_training, or aten::batch_norm
//    with training=False): its running mean and variance, and its weight and bias when present,
//    [K] task inputs of float32, bfloat16 or float16, contiguous. Folded by the candidate, not
//    the task: the task keeps the batch norm node (the judge's float64 reference computes the
//    unfolded ops), and each run of the candidate first folds the task's operands into three
//    float32 rows, mean, weight / sqrt(var + eps) and bias (batch_norm_fold.cuh, a kernel of one
//    thread per channel), which the graph applies as (v - mean) * scale + bias in float32.
// Groups, dilation, stride and padding (ints, or "valid" / symmetric "same") are the conv's. The
// graph computes in float32 and writes the task's one output in its dtype and strides. Anything
// else (batch norm in training mode, several outputs, a second reader of an intermediate, another
// op, mixed dtypes, a storage offset, a reshape after the epilogue) is declined by Applies with
// the obstacle named: the task keeps the ATen fallback. Why batch norm folds into a per-channel
// scale in the candidate rather than into the weights: docs/ARCHITECTURE.md.
//
// Two templates, "graph" and "graph_nhwc", whose parameters choose cuDNN's engine
// configuration, the schedule space cuDNN itself exposes. "graph" runs the graph on the task's
// own tensors and strides. "graph_nhwc", offered for a 2-d convolution whose input, weight,
// residuals and output are all NCHW-contiguous (row-major), runs it channels-last: each run
// transposes x to NHWC, the weight to KRSC and the residuals to NHWC (transpose.cuh, into the
// workspace), runs the graph on those, and transposes its NHWC result into the task's NCHW
// output, the conversions in the candidate's time (cuDNN's NHWC engines can be twice as fast as
// its NCHW ones on Hopper, more than the conversions cost). The memory format is thus a schedule
// decision the judge and the timer settle per task, and the candidate stays correct for NCHW
// callers. Both templates' parameters:
//  - `heuristic`: the heuristic mode that ranks the engine configurations: 0 = A (fast, the
//    default), 1 = B (slower, more accurate ranking), 2 = FALLBACK (the configurations cuDNN
//    keeps for graphs the others cannot run);
//  - `engine`: the index in that mode's list of configurations cuDNN supports for the graph (after
//    removing those that down-convert inputs, and for float32 those that use tensor cores, which
//    would compute in TF32: the judge holds float32 to 1e-4). The list is only known on the GPU;
//    an index past its end is an unsupported candidate there, not an error.
//
// Generation is pure: DescribeCudnnConv turns (task, point) into a CudnnConvCall (data only);
// the worker (worker/library/cudnn_conv.h) builds, checks and caches the graph through
// runtime/extension/cudnn_conv_graph.h, the header the runtime extension builds with too. The
// family's source is the call's canonical description as a comment: nothing to compile.
#ifndef FORGE_COMPILER_CODEGEN_CUDNN_CONV_CUDNN_CONV_H_
#define FORGE_COMPILER_CODEGEN_CUDNN_CONV_CUDNN_CONV_H_

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/codegen/family.h"

namespace forge::codegen {

// One step of the fused epilogue; cuDNN's pointwise mode in the comment.
enum class ConvStep {
  kBias,      // ADD of a per-channel vector (CudnnConvStep::input)
  kResidual,  // ADD of a tensor of the output's shape (CudnnConvStep::input)
  kScale,     // MUL by CudnnConvStep::scalar
  kRelu,      // RELU_FWD
  kGelu,      // GELU_FWD (erf)
  kGeluTanh,  // GELU_APPROX_TANH_FWD
  kSilu,      // SWISH_FWD (beta 1)
  kSigmoid,   // SIGMOID_FWD
  kTanh,      // TANH_FWD
  kBatchNorm,  // SUB, MUL, ADD of the folded rows (CudnnConvCall::batch_norms)
  kClamp,      // RELU_FWD clipped to [CudnnConvStep::scalar, CudnnConvStep::upper]
};
// "bias", "residual", "scale", "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh",
// "batch_norm", "clamp".
const char* ConvStepName(ConvStep step);

struct CudnnConvStep {
  ConvStep step = ConvStep::kRelu;
  int input = -1;     // kBias, kResidual: the operand's position among the task inputs
  double scalar = 1;  // kScale; kClamp: the lower bound
  double upper = 0;   // kClamp: the upper bound (may be infinite)

  bool operator==(const CudnnConvStep&) const = default;
};

// A per-channel [K] operand of a batch norm step: its position among the task inputs (-1:
// absent) and dtype.
struct ChannelOperand {
  int input = -1;
  forge::v1::DType dtype = forge::v1::DTYPE_UNSPECIFIED;

  bool operator==(const ChannelOperand&) const = default;
};

// An eval-mode batch norm step: y = (v - mean) / sqrt(var + eps) * weight + bias.
struct CudnnBatchNorm {
  ChannelOperand mean;
  ChannelOperand var;
  ChannelOperand weight;  // absent: 1
  ChannelOperand bias;    // absent: 0
  double eps = 1e-5;

  bool operator==(const CudnnBatchNorm&) const = default;
};

// A tensor as cuDNN sees it: dims in N, C, spatial... order and the element strides of each.
struct ConvTensor {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;

  bool operator==(const ConvTensor&) const = default;
};

// One fused graph: y = epilogue(conv(x, w)). x is (N, C, spatial...), w (K, C / groups,
// filter...), y (N, K, out...); every tensor shares `dtype`; the graph computes in float32.
struct CudnnConvCall {
  forge::v1::DType dtype = forge::v1::DTYPE_UNSPECIFIED;
  int x_input = -1;  // positions among the task inputs
  int w_input = -1;
  ConvTensor x;
  ConvTensor w;
  ConvTensor y;  // the task's output
  std::vector<int64_t> padding;
  std::vector<int64_t> stride;
  std::vector<int64_t> dilation;
  int64_t groups = 1;
  std::vector<CudnnConvStep> epilogue;
  // kResidual steps' tensors, in step order.
  std::vector<ConvTensor> residuals;
  // kBatchNorm steps' operands, in step order.
  std::vector<CudnnBatchNorm> batch_norms;
  // "graph_nhwc": x, w, y and the residuals above are the channels-last copies the run makes (their
  // strides NHWC / KRSC); the task's own tensors are NCHW-contiguous.
  bool channels_last_inside = false;
  int heuristic = 0;  // 0 A, 1 B, 2 FALLBACK
  int engine = 0;     // index into that heuristic's supported configurations

  bool operator==(const CudnnConvCall&) const = default;
};

// The canonical one-line description of `call` (what the candidate's source is).
std::string DescribeCall(const CudnnConvCall& call);

// `call` as JSON, with cuDNN's name of the engine configuration the worker measured (empty when
// not recorded): what plan.json carries for a runtime to build and run the same graph through
// runtime/extension/cudnn_conv_graph.h (forge_cudnn::ParseCall, whose comment lists the fields):
// every field, scalars exactly, an infinite clamp bound as null, each batch norm operand's
// BatchNormFoldType code.
std::string CudnnConvCallJson(const CudnnConvCall& call, absl::string_view engine_name);

class CudnnConvFamily : public KernelFamily {
 public:
  static constexpr char kGraphTemplate[] = "graph";
  static constexpr char kChannelsLastTemplate[] = "graph_nhwc";
  // Engine configurations per heuristic mode the search may pick from: `engine` is 0 .. this - 1.
  static constexpr int kEngineConfigs = 8;
  static constexpr int kHeuristicModes = 3;

  forge::v1::KernelFamily kind() const override { return forge::v1::KERNEL_FAMILY_CUDNN_CONV; }
  absl::string_view name() const override { return "cudnn_conv"; }
  absl::string_view generator_version() const override { return "cudnn_conv-1"; }

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

// The call for a valid point of the family; fails as CudnnConvFamily::Validate does.
absl::StatusOr<CudnnConvCall> DescribeCudnnConv(const forge::v1::KernelTask& task,
                                                const SchedulePoint& point);

// The kernels a run launches around the graph (after the kernel prelude: batch_norm_fold.cuh and
// transpose.cuh), CUDA source for NVRTC. kBatchNormFoldKernel: a run of a call with kBatchNorm
// steps launches it once per step (one thread per channel) before the graph, with the parameters
//   (const void* mean, int mean_type, const void* var, int var_type, const void* weight,
//    int weight_type, const void* bias, int bias_type, float eps, int channels, float* out)
// types as BatchNormFoldType gives them, an absent operand as a null pointer, and `out` the
// step's 3 * channels float32 rows (kBatchNormFoldRows) the graph reads.
// kTranspose2Kernel and kTranspose4Kernel (2- and 4-byte elements): a call with
// channels_last_inside converts its tensors with them, parameters (const void* in, void* out,
// long long batch, long long rows, long long columns), out[b][c][r] = in[b][r][c]; launch shape
// TransposeLaunch.
absl::string_view RunKernelsSource();
inline constexpr char kBatchNormFoldKernel[] = "forge_batch_norm_fold";
inline constexpr char kTranspose2Kernel[] = "forge_transpose_2";
inline constexpr char kTranspose4Kernel[] = "forge_transpose_4";
// The grid and block of a transpose of `batch` [rows, columns] matrices.
struct TransposeShape {
  uint32_t grid[3];
  uint32_t block[3];
};
TransposeShape TransposeLaunch(int64_t batch, int64_t rows, int64_t columns);
inline constexpr int kBatchNormFoldRows = 3;
// The kernel's code of a dtype: 0 float32, 1 bfloat16, 2 float16; InvalidArgument otherwise.
absl::StatusOr<int> BatchNormFoldType(forge::v1::DType dtype);

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_CUDNN_CONV_CUDNN_CONV_H_
