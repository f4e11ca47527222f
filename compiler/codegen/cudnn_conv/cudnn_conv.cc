#include "compiler/codegen/cudnn_conv/cudnn_conv.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status/status_macros.h"
#include "common/text/json.h"
#include "compiler/codegen/cuda_expr.h"
#include "compiler/codegen/gemm_analysis/gemm_analysis.h"

namespace forge::codegen {

// batch_norm_fold.cuh and transpose.cuh, embedded by CMake (forge_embed_cuda).
extern const char kBatchNormFold[];
extern const char kTranspose[];

namespace {

using forge::v1::Argument;
using forge::v1::DType;
using forge::v1::KernelTask;
using forge::v1::Node;
using forge::v1::TensorSpec;

absl::Status Declined(absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat("cudnn_conv: ", why));
}

// The convolution ops and how many spatial dims they take (0: as many as the input has).
struct ConvOp {
  absl::string_view op;
  int spatial_dims;
};
constexpr ConvOp kConvOps[] = {
    {"conv2d", 2}, {"conv3d", 3}, {"convolution", 0}, {"_convolution", 0}};

const ConvOp* FindConvOp(const Node& node) {
  for (const ConvOp& op : kConvOps) {
    if (OpName(node) == op.op) return &op;
  }
  return nullptr;
}

// An int[] argument of `spatial` entries: absent gives `fallback` for each, one entry is
// broadcast (the schema's `int[2] stride=1`).
absl::StatusOr<std::vector<int64_t>> SpatialInts(const Node& node, absl::string_view name,
                                                 int spatial, int64_t fallback) {
  const Argument* argument = FindArgument(node, name);
  if (argument == nullptr) return std::vector<int64_t>(spatial, fallback);
  if (argument->value_case() != Argument::kInts) {
    return Declined(absl::StrCat("the ", name, " of ", DescribeNode(node), " is not an int list"));
  }
  std::vector<int64_t> values(argument->ints().values().begin(), argument->ints().values().end());
  if (values.size() == 1) values.assign(spatial, values[0]);
  if (static_cast<int>(values.size()) != spatial) {
    return Declined(absl::StrCat("the ", name, " of ", DescribeNode(node), " has ", values.size(),
                                 " entries for ", spatial, " spatial dims"));
  }
  return values;
}

// A task input read directly as a tensor of cuDNN (no view between): its position and layout.
absl::StatusOr<std::pair<int, ConvTensor>> DirectInput(const GroupView& view,
                                                       absl::string_view value,
                                                       absl::string_view role) {
  const int position = view.InputPosition(value);
  if (position < 0) {
    return Declined(
        absl::StrCat("the ", role, " '", value, "' is computed in the task, not a task input"));
  }
  const TensorSpec& spec = view.InputSpec(position);
  if (spec.storage_offset() != 0) {
    return Declined(absl::StrCat("the ", role, " '", value, "' starts at storage offset ",
                                 spec.storage_offset()));
  }
  ConvTensor tensor;
  tensor.dims.assign(spec.shape().begin(), spec.shape().end());
  tensor.strides = spec.strides().empty()
                       ? ContiguousStrides(tensor.dims)
                       : std::vector<int64_t>(spec.strides().begin(), spec.strides().end());
  for (size_t d = 0; d < tensor.dims.size(); ++d) {
    if (tensor.dims[d] < 1 || tensor.strides[d] < 1) {
      return Declined(absl::StrCat("the ", role, " '", value,
                                   "' has an empty, broadcast or negative-stride dim"));
    }
  }
  return std::make_pair(position, std::move(tensor));
}

// Reads the convolution node into `call` (everything but the epilogue and the output).
absl::Status ReadConv(const GroupView& view, const Node& conv, const ConvOp& op,
                      CudnnConvCall& call) {
  if (const Argument* transposed = FindArgument(conv, "transposed");
      transposed != nullptr && transposed->bool_value()) {
    return Declined(absl::StrCat(DescribeNode(conv), " is a transposed convolution"));
  }
  const std::string x = TensorArgument(conv, "input");
  const std::string w = TensorArgument(conv, "weight");
  FORGE_ASSIGN_OR_RETURN(auto x_input, DirectInput(view, x, "conv input"));
  FORGE_ASSIGN_OR_RETURN(auto w_input, DirectInput(view, w, "conv weight"));
  std::tie(call.x_input, call.x) = std::move(x_input);
  std::tie(call.w_input, call.w) = std::move(w_input);
  const int rank = static_cast<int>(call.x.dims.size());
  const int spatial = rank - 2;
  if (spatial != 2 && spatial != 3) {
    return Declined(absl::StrCat(DescribeNode(conv), " has ", spatial,
                                 " spatial dims (2-d and 3-d convolutions only, batched)"));
  }
  if (op.spatial_dims != 0 && op.spatial_dims != spatial) {
    return Declined(absl::StrCat(DescribeNode(conv), " reads an unbatched input"));
  }
  if (static_cast<int>(call.w.dims.size()) != rank) {
    return absl::InvalidArgumentError(absl::StrCat("cudnn_conv: the weight of ", DescribeNode(conv),
                                                   " has rank ", call.w.dims.size(), ", not ",
                                                   rank));
  }
  call.dtype = view.DType(x);
  if (view.DType(w) != call.dtype) return Declined("the input and the weight differ in dtype");
  if (call.dtype != forge::v1::DTYPE_FLOAT32 && call.dtype != forge::v1::DTYPE_BFLOAT16 &&
      call.dtype != forge::v1::DTYPE_FLOAT16) {
    return Declined(
        absl::StrCat("dtype ", DTypeName(call.dtype), " (float32, bfloat16 and float16 only)"));
  }
  FORGE_ASSIGN_OR_RETURN(call.stride, SpatialInts(conv, "stride", spatial, 1));
  FORGE_ASSIGN_OR_RETURN(call.dilation, SpatialInts(conv, "dilation", spatial, 1));
  const Argument* padding = FindArgument(conv, "padding");
  if (padding != nullptr && padding->value_case() == Argument::kStringValue) {
    // conv2d.padding: "valid" is none; "same" pads each side by half the dilated filter's
    // extent, which cuDNN's symmetric padding expresses only when that extent is even.
    call.padding.assign(spatial, 0);
    if (padding->string_value() == "same") {
      for (int d = 0; d < spatial; ++d) {
        const int64_t extent = call.dilation[d] * (call.w.dims[2 + d] - 1);
        if (extent % 2 != 0) {
          return Declined(
              absl::StrCat("padding=\"same\" of ", DescribeNode(conv), " pads asymmetrically"));
        }
        call.padding[d] = extent / 2;
      }
    } else if (padding->string_value() != "valid") {
      return Declined(absl::StrCat("padding=\"", padding->string_value(), "\""));
    }
  } else {
    FORGE_ASSIGN_OR_RETURN(call.padding, SpatialInts(conv, "padding", spatial, 0));
  }
  if (const Argument* groups = FindArgument(conv, "groups"); groups != nullptr) {
    call.groups = groups->int_value();
  }
  if (op.op == "convolution" || op.op == "_convolution") {
    FORGE_ASSIGN_OR_RETURN(const std::vector<int64_t> output_padding,
                           SpatialInts(conv, "output_padding", spatial, 0));
    if (std::any_of(output_padding.begin(), output_padding.end(), [](int64_t p) { return p; })) {
      return Declined(absl::StrCat(DescribeNode(conv), " has an output padding"));
    }
  }
  const int64_t channels = call.x.dims[1];
  if (call.groups < 1 || channels % call.groups != 0 || call.w.dims[0] % call.groups != 0 ||
      call.w.dims[1] * call.groups != channels) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cudnn_conv: ", DescribeNode(conv), ": ", channels, " input channels, weight [",
        absl::StrJoin(call.w.dims, ", "), "] and groups ", call.groups, " disagree"));
  }
  // y's dims: N, K, then each spatial extent from the usual formula.
  std::vector<int64_t> y_dims = {call.x.dims[0], call.w.dims[0]};
  for (int d = 0; d < spatial; ++d) {
    if (call.stride[d] < 1 || call.dilation[d] < 1 || call.padding[d] < 0) {
      return Declined(absl::StrCat(DescribeNode(conv),
                                   " has a stride or dilation below 1 or a negative padding"));
    }
    const int64_t extent =
        call.x.dims[2 + d] + 2 * call.padding[d] - call.dilation[d] * (call.w.dims[2 + d] - 1) - 1;
    if (extent < 0) return Declined(absl::StrCat(DescribeNode(conv), " has an empty output"));
    y_dims.push_back(extent / call.stride[d] + 1);
  }
  if (y_dims != view.Shape(conv.outputs(0))) {
    return absl::InvalidArgumentError(absl::StrCat("cudnn_conv: ", DescribeNode(conv), " outputs [",
                                                   absl::StrJoin(view.Shape(conv.outputs(0)), ", "),
                                                   "], its arguments give [",
                                                   absl::StrJoin(y_dims, ", "), "]"));
  }
  call.y.dims = std::move(y_dims);
  return absl::OkStatus();
}

// A per-channel vector of K elements, contiguous, of the conv's dtype, a task input at offset 0:
// its position, or -1. `conv_bias`: the conv's own bias argument, [K]. Otherwise an addend that
// broadcasts against y (aligned at the trailing dims) along everything but the channels:
// [K, 1, 1] or [1, K, 1, 1] for a 2-d conv ([K] alone would line up with W).
int ChannelVector(const GroupView& view, absl::string_view value, const CudnnConvCall& call,
                  bool conv_bias) {
  const int position = view.InputPosition(value);
  if (position < 0) return -1;
  const TensorSpec& spec = view.InputSpec(position);
  if (spec.dtype() != call.dtype || spec.storage_offset() != 0 || !IsContiguous(spec)) return -1;
  const std::vector<int64_t> shape(spec.shape().begin(), spec.shape().end());
  const int64_t channels = call.y.dims[1];
  if (conv_bias) return shape == std::vector<int64_t>{channels} ? position : -1;
  const size_t rank = call.y.dims.size();
  if (shape.size() > rank || rank - shape.size() > 1) return -1;
  const size_t lead = rank - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != (lead + d == 1 ? channels : 1)) return -1;
  }
  return position;
}

// Adds the step of `node`, a consumer of `current` (the running result), to `call`; Declined
// when the node is not one cuDNN's pointwise modes express here.
using StepReader = absl::Status (*)(const GroupView&, const Node&, absl::string_view current,
                                    CudnnConvCall&);

absl::Status ReadAdd(const GroupView& view, const Node& node, absl::string_view current,
                     CudnnConvCall& call) {
  if (!IsUnitScalar(node, "alpha"))
    return Declined(absl::StrCat(DescribeNode(node), " scales by alpha"));
  const std::string self = TensorArgument(node, "self");
  const std::string other = TensorArgument(node, "other");
  if (self == other || (self != current && other != current)) {
    return Declined(absl::StrCat(DescribeNode(node), " adds the result to itself or not at all"));
  }
  const std::string& addend = self == current ? other : self;
  if (addend.empty()) return Declined(absl::StrCat(DescribeNode(node), " adds a scalar"));
  if (const int bias = ChannelVector(view, addend, call, /*conv_bias=*/false); bias >= 0) {
    call.epilogue.push_back({ConvStep::kBias, bias, 1});
    return absl::OkStatus();
  }
  if (view.Shape(addend) != call.y.dims || view.DType(addend) != call.dtype) {
    return Declined(absl::StrCat(DescribeNode(node),
                                 " adds a tensor that is neither a per-channel "
                                 "bias nor of the output's shape and dtype"));
  }
  FORGE_ASSIGN_OR_RETURN(auto residual, DirectInput(view, addend, "residual"));
  call.epilogue.push_back({ConvStep::kResidual, residual.first, 1});
  call.residuals.push_back(std::move(residual.second));
  return absl::OkStatus();
}

absl::StatusOr<double> ScalarOperand(const Node& node) {
  const Argument* other = FindArgument(node, "other");
  if (other == nullptr) return Declined(absl::StrCat(DescribeNode(node), " has no scalar operand"));
  if (other->value_case() == Argument::kFloatValue) return other->float_value();
  if (other->value_case() == Argument::kIntValue) return static_cast<double>(other->int_value());
  return Declined(absl::StrCat(DescribeNode(node), " multiplies by a tensor"));
}

absl::Status ReadMul(const GroupView&, const Node& node, absl::string_view, CudnnConvCall& call) {
  FORGE_ASSIGN_OR_RETURN(const double scalar, ScalarOperand(node));
  call.epilogue.push_back({ConvStep::kScale, -1, scalar});
  return absl::OkStatus();
}

absl::Status ReadDiv(const GroupView&, const Node& node, absl::string_view, CudnnConvCall& call) {
  if (FindArgument(node, "rounding_mode") != nullptr) {
    return Declined(absl::StrCat(DescribeNode(node), " rounds"));
  }
  FORGE_ASSIGN_OR_RETURN(const double scalar, ScalarOperand(node));
  if (scalar == 0) return Declined(absl::StrCat(DescribeNode(node), " divides by zero"));
  call.epilogue.push_back({ConvStep::kScale, -1, 1.0 / scalar});
  return absl::OkStatus();
}

// A clamp of the running value to [lower, upper]: cuDNN's relu with both clips. Per op the
// bounds' arguments and their schema defaults (nullopt: required).
struct ClampOp {
  absl::string_view op;
  absl::string_view lower;
  std::optional<double> lower_default;
  absl::string_view upper;
  std::optional<double> upper_default;
};
constexpr double kInfinity = std::numeric_limits<double>::infinity();
const ClampOp kClampOps[] = {
    {"hardtanh", "min_val", -1.0, "max_val", 1.0},
    {"relu6", "", 0.0, "", 6.0},
    {"clamp", "min", std::nullopt, "max", kInfinity},
};

// The bound `name` of `node` (a float or int scalar), `fallback` when absent or None.
absl::StatusOr<double> ClampBound(const Node& node, absl::string_view name,
                                  std::optional<double> fallback) {
  const Argument* argument = name.empty() ? nullptr : FindArgument(node, name);
  if (argument != nullptr && argument->value_case() == Argument::kFloatValue) {
    return argument->float_value();
  }
  if (argument != nullptr && argument->value_case() == Argument::kIntValue) {
    return static_cast<double>(argument->int_value());
  }
  if ((argument == nullptr || argument->value_case() == Argument::kNone) && fallback.has_value()) {
    return *fallback;
  }
  return Declined(absl::StrCat(DescribeNode(node), " has no scalar ", name, " bound"));
}

absl::Status ReadClamp(const GroupView&, const Node& node, absl::string_view, CudnnConvCall& call) {
  const ClampOp* clamp = nullptr;
  for (const ClampOp& candidate : kClampOps) {
    if (OpName(node) == candidate.op) clamp = &candidate;
  }
  if (clamp == nullptr) return Declined(absl::StrCat(DescribeNode(node), " is not a clamp"));
  FORGE_ASSIGN_OR_RETURN(const double lower, ClampBound(node, clamp->lower, clamp->lower_default));
  FORGE_ASSIGN_OR_RETURN(const double upper, ClampBound(node, clamp->upper, clamp->upper_default));
  if (!(std::isfinite(lower) && lower <= upper)) {
    return Declined(absl::StrCat(DescribeNode(node), " clamps to [", lower, ", ", upper, "]"));
  }
  call.epilogue.push_back({ConvStep::kClamp, -1, lower, upper});
  return absl::OkStatus();
}

absl::Status ReadGelu(const GroupView&, const Node& node, absl::string_view, CudnnConvCall& call) {
  const Argument* approximate = FindArgument(node, "approximate");
  const bool tanh = approximate != nullptr && approximate->string_value() == "tanh";
  if (approximate != nullptr && !tanh && approximate->string_value() != "none") {
    return Declined(
        absl::StrCat(DescribeNode(node), ": approximate=", approximate->string_value()));
  }
  call.epilogue.push_back({tanh ? ConvStep::kGeluTanh : ConvStep::kGelu, -1, 1});
  return absl::OkStatus();
}

template <ConvStep kStep>
absl::Status ReadActivation(const GroupView&, const Node&, absl::string_view, CudnnConvCall& call) {
  call.epilogue.push_back({kStep, -1, 1});
  return absl::OkStatus();
}

// A [K] operand of a batch norm: a contiguous task input at offset 0 of a float type, K its
// channels. `optional`: the argument may be absent (or None), giving input -1.
absl::StatusOr<ChannelOperand> BatchNormOperand(const GroupView& view, const Node& node,
                                                absl::string_view name, const CudnnConvCall& call,
                                                bool optional) {
  const std::string value = TensorArgument(node, name);
  if (value.empty()) {
    if (optional) return ChannelOperand();
    return Declined(absl::StrCat(DescribeNode(node), " has no ", name));
  }
  const int position = view.InputPosition(value);
  if (position < 0) {
    return Declined(absl::StrCat("the ", name, " of ", DescribeNode(node),
                                 " is computed in the task, not a task input"));
  }
  const TensorSpec& spec = view.InputSpec(position);
  if (spec.storage_offset() != 0 || !IsContiguous(spec) || spec.shape_size() != 1 ||
      spec.shape(0) != call.y.dims[1] || !BatchNormFoldType(spec.dtype()).ok()) {
    return Declined(absl::StrCat("the ", name, " of ", DescribeNode(node), " is not a contiguous [",
                                 call.y.dims[1], "] float32, bfloat16 or float16 task input"));
  }
  return ChannelOperand{position, spec.dtype()};
}

// An eval-mode batch norm of the running value: aten::_native_batch_norm_legit_no_training, or
// aten::batch_norm with training=False (training mode updates its statistics: declined).
absl::Status ReadBatchNorm(const GroupView& view, const Node& node, absl::string_view current,
                           CudnnConvCall& call) {
  if (const Argument* training = FindArgument(node, "training");
      training != nullptr && training->bool_value()) {
    return Declined(absl::StrCat(DescribeNode(node), " is batch norm in training mode"));
  }
  if (TensorArgument(node, "input") != current) {
    return Declined(absl::StrCat(DescribeNode(node), " normalizes another tensor"));
  }
  const Argument* eps = FindArgument(node, "eps");
  if (eps == nullptr || eps->value_case() != Argument::kFloatValue || !(eps->float_value() >= 0)) {
    return Declined(absl::StrCat(DescribeNode(node), " has no non-negative float eps"));
  }
  CudnnBatchNorm batch_norm;
  batch_norm.eps = eps->float_value();
  FORGE_ASSIGN_OR_RETURN(batch_norm.mean, BatchNormOperand(view, node, "running_mean", call, false));
  FORGE_ASSIGN_OR_RETURN(batch_norm.var, BatchNormOperand(view, node, "running_var", call, false));
  FORGE_ASSIGN_OR_RETURN(batch_norm.weight, BatchNormOperand(view, node, "weight", call, true));
  FORGE_ASSIGN_OR_RETURN(batch_norm.bias, BatchNormOperand(view, node, "bias", call, true));
  call.epilogue.push_back({ConvStep::kBatchNorm, -1, 1});
  call.batch_norms.push_back(batch_norm);
  return absl::OkStatus();
}

struct EpilogueOp {
  absl::string_view op;
  StepReader read;
};
constexpr EpilogueOp kEpilogueOps[] = {
    {"add", ReadAdd},
    {"mul", ReadMul},
    {"div", ReadDiv},
    {"gelu", ReadGelu},
    {"relu", ReadActivation<ConvStep::kRelu>},
    {"silu", ReadActivation<ConvStep::kSilu>},
    {"sigmoid", ReadActivation<ConvStep::kSigmoid>},
    {"tanh", ReadActivation<ConvStep::kTanh>},
    {"hardtanh", ReadClamp},
    {"relu6", ReadClamp},
    {"clamp", ReadClamp},
    {"_native_batch_norm_legit_no_training", ReadBatchNorm},
    {"batch_norm", ReadBatchNorm},
};

// The call without its engine choice (heuristic and engine 0), or why the task is declined.
absl::StatusOr<CudnnConvCall> Analyze(const KernelTask& task) {
  FORGE_ASSIGN_OR_RETURN(const GroupView view, GroupView::Create(task));
  const forge::v1::Graph& group = task.group();
  const Node* conv = nullptr;
  const ConvOp* conv_op = nullptr;
  for (const Node& node : group.nodes()) {
    if (const ConvOp* op = FindConvOp(node); op != nullptr) {
      if (conv != nullptr) return Declined("the task has two convolutions");
      conv = &node;
      conv_op = op;
    }
  }
  if (conv == nullptr) return Declined("the task has no convolution");
  if (conv->outputs_size() < 1) {
    return Declined(absl::StrCat(DescribeNode(*conv), " has no output"));
  }
  CudnnConvCall call;
  FORGE_RETURN_IF_ERROR(ReadConv(view, *conv, *conv_op, call));
  if (const std::string bias = TensorArgument(*conv, "bias"); !bias.empty()) {
    const int position = ChannelVector(view, bias, call, /*conv_bias=*/true);
    if (position < 0) {
      return Declined(absl::StrCat("the bias of ", DescribeNode(*conv),
                                   " is not a contiguous task input of the conv's dtype"));
    }
    call.epilogue.push_back({ConvStep::kBias, position, 1});
  }
  std::string current = conv->outputs(0);
  int nodes = 1;
  while (const Node* next = SoleConsumer(group, current)) {
    if (next->outputs_size() < 1)
      return Declined(absl::StrCat(DescribeNode(*next), " has no output"));
    const EpilogueOp* op = nullptr;
    for (const EpilogueOp& candidate : kEpilogueOps) {
      if (OpName(*next) == candidate.op) op = &candidate;
    }
    if (op == nullptr) {
      return Declined(absl::StrCat(DescribeNode(*next), " has no cuDNN pointwise form here"));
    }
    if (view.Shape(next->outputs(0)) != call.y.dims || view.DType(next->outputs(0)) != call.dtype) {
      return Declined(absl::StrCat(DescribeNode(*next), " changes the shape or dtype"));
    }
    FORGE_RETURN_IF_ERROR(op->read(view, *next, current, call));
    current = next->outputs(0);
    ++nodes;
  }
  if (task.outputs_size() != 1 || group.outputs_size() != 1 ||
      group.outputs(0).value_name() != current || nodes != group.nodes_size()) {
    return Declined(absl::StrCat("the group is not one chain from the conv to its one output (",
                                 group.nodes_size(), " nodes, ", task.outputs_size(),
                                 " outputs; the chain ends at '", current, "')"));
  }
  const TensorSpec& output = task.outputs(0);
  if (output.storage_offset() != 0) return Declined("the output starts at a storage offset");
  call.y.strides = output.strides().empty()
                       ? ContiguousStrides(call.y.dims)
                       : std::vector<int64_t>(output.strides().begin(), output.strides().end());
  return call;
}

// The largest grid y of a transpose (CUDA's limit): rows of up to 65535 * 32.
constexpr int64_t kMaxTransposeRows = int64_t{65535} * 32;

// Whether `tensor` is a row-major 4-d tensor.
bool RowMajor4d(const ConvTensor& tensor) {
  return tensor.dims.size() == 4 && tensor.strides == ContiguousStrides(tensor.dims);
}

// The strides of a 4-d (N, C, H, W) tensor stored channels-last (NHWC; a filter: KRSC).
std::vector<int64_t> ChannelsLast(const std::vector<int64_t>& d) {
  return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
}

// Why `call` cannot run channels-last inside ("" when it can).
std::string ChannelsLastObstacle(const CudnnConvCall& call) {
  bool row_major = RowMajor4d(call.x) && RowMajor4d(call.w) && RowMajor4d(call.y);
  for (const ConvTensor& residual : call.residuals) row_major = row_major && RowMajor4d(residual);
  if (!row_major) {
    return "graph_nhwc converts a 2-d convolution's NCHW-contiguous tensors (this task's are not)";
  }
  const int64_t rows =
      std::max({call.x.dims[1], call.y.dims[1], call.y.dims[2] * call.y.dims[3], call.w.dims[1]});
  if (rows > kMaxTransposeRows) return "graph_nhwc: a transpose's rows exceed its grid";
  return "";
}

TemplateSpace GraphSpace(absl::string_view name = CudnnConvFamily::kGraphTemplate) {
  std::vector<int64_t> modes(CudnnConvFamily::kHeuristicModes);
  for (int i = 0; i < CudnnConvFamily::kHeuristicModes; ++i) modes[i] = i;
  std::vector<int64_t> engines(CudnnConvFamily::kEngineConfigs);
  for (int i = 0; i < CudnnConvFamily::kEngineConfigs; ++i) engines[i] = i;
  return {std::string(name), {{"heuristic", modes, 0}, {"engine", engines, 0}}};
}

std::string DescribeOperand(absl::string_view name, const ChannelOperand& operand) {
  if (operand.input < 0) return absl::StrCat(name, " none");
  return absl::StrCat(name, " ", operand.input, " ", DTypeName(operand.dtype));
}

std::string DescribeTensor(const ConvTensor& tensor) {
  return absl::StrCat("[", absl::StrJoin(tensor.dims, ","), "]/[",
                      absl::StrJoin(tensor.strides, ","), "]");
}

}  // namespace

const char* ConvStepName(ConvStep step) {
  switch (step) {
    case ConvStep::kBias: return "bias";
    case ConvStep::kResidual: return "residual";
    case ConvStep::kScale: return "scale";
    case ConvStep::kRelu: return "relu";
    case ConvStep::kGelu: return "gelu";
    case ConvStep::kGeluTanh: return "gelu_tanh";
    case ConvStep::kSilu: return "silu";
    case ConvStep::kSigmoid: return "sigmoid";
    case ConvStep::kTanh: return "tanh";
    case ConvStep::kBatchNorm: return "batch_norm";
    case ConvStep::kClamp: return "clamp";
  }
  return "?";
}

std::string DescribeCall(const CudnnConvCall& call) {
  std::vector<std::string> steps;
  size_t residual = 0;
  size_t batch_norm = 0;
  for (const CudnnConvStep& step : call.epilogue) {
    std::string text = ConvStepName(step.step);
    if (step.step == ConvStep::kBias) absl::StrAppend(&text, "(input ", step.input, ")");
    if (step.step == ConvStep::kResidual) {
      absl::StrAppend(&text, "(input ", step.input, " ", DescribeTensor(call.residuals[residual++]),
                      ")");
    }
    if (step.step == ConvStep::kScale) absl::StrAppend(&text, "(", step.scalar, ")");
    if (step.step == ConvStep::kClamp) absl::StrAppend(&text, "(", step.scalar, ", ", step.upper, ")");
    if (step.step == ConvStep::kBatchNorm) {
      const CudnnBatchNorm& norm = call.batch_norms[batch_norm++];
      absl::StrAppend(&text, "(", DescribeOperand("mean", norm.mean), ", ",
                      DescribeOperand("var", norm.var), ", ", DescribeOperand("weight", norm.weight),
                      ", ", DescribeOperand("bias", norm.bias), ", eps ", norm.eps, ")");
    }
    steps.push_back(std::move(text));
  }
  return absl::StrCat(
      "cudnn conv_fprop ", DTypeName(call.dtype), " x (input ", call.x_input, " ",
      DescribeTensor(call.x), ") w (input ", call.w_input, " ", DescribeTensor(call.w), ") y ",
      DescribeTensor(call.y), " padding [", absl::StrJoin(call.padding, ","), "] stride [",
      absl::StrJoin(call.stride, ","), "] dilation [", absl::StrJoin(call.dilation, ","),
      "] groups ", call.groups, " epilogue [", absl::StrJoin(steps, " "), "]",
      call.channels_last_inside ? " channels_last_inside" : "", " heuristic ",
      call.heuristic, " engine ", call.engine);
}

namespace {

std::string ConvTensorJson(const ConvTensor& tensor) {
  return absl::StrCat("{\"dims\": [", absl::StrJoin(tensor.dims, ", "), "], \"strides\": [",
                      absl::StrJoin(tensor.strides, ", "), "]}");
}

// A number exactly; null where JSON has none (infinities, NaN).
std::string JsonNumber(double value) {
  return std::isfinite(value) ? absl::StrFormat("%.17g", value) : "null";
}

std::string ChannelOperandJson(const ChannelOperand& operand) {
  // An absent operand's type is never read; 0 keeps the field an integer.
  const absl::StatusOr<int> type = BatchNormFoldType(operand.dtype);
  return absl::StrCat("{\"input\": ", operand.input, ", \"type\": ", type.ok() ? *type : 0, "}");
}

}  // namespace

std::string CudnnConvCallJson(const CudnnConvCall& call, absl::string_view engine_name) {
  std::vector<std::string> steps;
  for (const CudnnConvStep& step : call.epilogue) {
    steps.push_back(absl::StrCat("{\"step\": ", JsonString(ConvStepName(step.step)),
                                 ", \"input\": ", step.input, ", \"scalar\": ",
                                 JsonNumber(step.scalar), ", \"upper\": ", JsonNumber(step.upper),
                                 "}"));
  }
  std::vector<std::string> residuals;
  for (const ConvTensor& residual : call.residuals) residuals.push_back(ConvTensorJson(residual));
  std::vector<std::string> batch_norms;
  for (const CudnnBatchNorm& norm : call.batch_norms) {
    batch_norms.push_back(absl::StrCat(
        "{\"mean\": ", ChannelOperandJson(norm.mean), ", \"var\": ", ChannelOperandJson(norm.var),
        ", \"weight\": ", ChannelOperandJson(norm.weight),
        ", \"bias\": ", ChannelOperandJson(norm.bias), ", \"eps\": ", JsonNumber(norm.eps), "}"));
  }
  return absl::StrCat(
      "{\"dtype\": ", JsonString(DTypeName(call.dtype)), ", \"x_input\": ", call.x_input,
      ", \"w_input\": ", call.w_input, ", \"x\": ", ConvTensorJson(call.x),
      ", \"w\": ", ConvTensorJson(call.w), ", \"y\": ", ConvTensorJson(call.y),
      ", \"padding\": [", absl::StrJoin(call.padding, ", "), "], \"stride\": [",
      absl::StrJoin(call.stride, ", "), "], \"dilation\": [", absl::StrJoin(call.dilation, ", "),
      "], \"groups\": ", call.groups, ", \"epilogue\": [", absl::StrJoin(steps, ", "),
      "], \"residuals\": [", absl::StrJoin(residuals, ", "), "], \"batch_norms\": [",
      absl::StrJoin(batch_norms, ", "), "], \"channels_last_inside\": ",
      call.channels_last_inside ? "true" : "false", ", \"heuristic\": ", call.heuristic,
      ", \"engine\": ", call.engine, ", \"engine_name\": ", JsonString(engine_name), "}");
}

absl::string_view RunKernelsSource() {
  static const std::string* const source =
      new std::string(absl::StrCat(KernelPrelude(), kBatchNormFold, kTranspose));
  return *source;
}

TransposeShape TransposeLaunch(int64_t batch, int64_t rows, int64_t columns) {
  return {{static_cast<uint32_t>((columns + 31) / 32), static_cast<uint32_t>((rows + 31) / 32),
           static_cast<uint32_t>(std::clamp<int64_t>(batch, 1, 65535))},
          {32, 8, 1}};
}

absl::StatusOr<int> BatchNormFoldType(DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT32: return 0;
    case forge::v1::DTYPE_BFLOAT16: return 1;
    case forge::v1::DTYPE_FLOAT16: return 2;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("the batch norm fold reads float32, bfloat16 and float16, not ",
                       DTypeName(dtype)));
  }
}

absl::Status CudnnConvFamily::Applies(const KernelTask& task) const {
  return Analyze(task).status();
}

absl::StatusOr<std::vector<TemplateSpace>> CudnnConvFamily::ScheduleSpace(
    const KernelTask& task) const {
  FORGE_ASSIGN_OR_RETURN(const CudnnConvCall call, Analyze(task));
  std::vector<TemplateSpace> spaces = {GraphSpace()};
  if (ChannelsLastObstacle(call).empty()) spaces.push_back(GraphSpace(kChannelsLastTemplate));
  return spaces;
}

absl::Status CudnnConvFamily::Validate(const KernelTask& task, const SchedulePoint& point) const {
  return DescribeCudnnConv(task, point).status();
}

absl::StatusOr<CudnnConvCall> DescribeCudnnConv(const KernelTask& task,
                                                const SchedulePoint& point) {
  FORGE_ASSIGN_OR_RETURN(CudnnConvCall call, Analyze(task));
  if (point.template_name == CudnnConvFamily::kChannelsLastTemplate) {
    if (const std::string obstacle = ChannelsLastObstacle(call); !obstacle.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("cudnn_conv: ", obstacle));
    }
    FORGE_RETURN_IF_ERROR(CheckPointInSpace(GraphSpace(point.template_name), point));
    call.channels_last_inside = true;
    call.x.strides = ChannelsLast(call.x.dims);
    call.w.strides = ChannelsLast(call.w.dims);
    call.y.strides = ChannelsLast(call.y.dims);
    for (ConvTensor& residual : call.residuals) residual.strides = ChannelsLast(residual.dims);
  } else {
    FORGE_RETURN_IF_ERROR(CheckPointInSpace(GraphSpace(), point));
  }
  call.heuristic = static_cast<int>(point.parameters.at("heuristic"));
  call.engine = static_cast<int>(point.parameters.at("engine"));
  return call;
}

absl::StatusOr<LaunchPlan> CudnnConvFamily::Plan(const KernelTask& task,
                                                 const SchedulePoint& point) const {
  FORGE_ASSIGN_OR_RETURN(const CudnnConvCall call, DescribeCudnnConv(task, point));
  LaunchPlan plan;
  plan.template_name = point.template_name;
  plan.parameters = point.parameters;
  plan.generator_version = std::string(generator_version());
  // cuDNN's kernels are not Forge's: the graph (one launch for a fused engine), after each batch
  // norm's fold and, channels-last inside, between the transposes in (x, w, residuals) and the
  // one out, whose result goes through the workspace.
  plan.hints.executor = Executor::kCudnn;
  plan.hints.kernel_launches = 1 + static_cast<int>(call.batch_norms.size());
  if (call.channels_last_inside) {
    plan.hints.kernel_launches += 3 + static_cast<int>(call.residuals.size());
    plan.hints.output_through_scratch = true;
  }
  return plan;
}

absl::StatusOr<std::string> CudnnConvFamily::Emit(const KernelTask& task,
                                                  const LaunchPlan& plan) const {
  FORGE_ASSIGN_OR_RETURN(const CudnnConvCall call,
                         DescribeCudnnConv(task, {plan.template_name, plan.parameters}));
  return absl::StrCat("// forge library call: ", DescribeCall(call), "\n");
}

}  // namespace forge::codegen
