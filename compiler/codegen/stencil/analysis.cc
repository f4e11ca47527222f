#include "compiler/codegen/stencil/analysis.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/dtype/dtype.h"
#include "compiler/codegen/cost_hints.h"

namespace forge::codegen::stencil {
namespace {

using forge::v1::Argument;
using forge::v1::KernelTask;
using forge::v1::Node;
using forge::v1::TensorSpec;

std::vector<int64_t> ShapeOf(const TensorSpec& spec) {
  return {spec.shape().begin(), spec.shape().end()};
}

// Reads one node's arguments into the analysis; `where` names the node in messages.
class NodeReader {
 public:
  explicit NodeReader(const Node& node)
      : node_(node), where_(absl::StrCat("stencil: ", DescribeNode(node))) {}

  const std::string& where() const { return where_; }

  // An int[2] argument (one element stands for both dims), `fallback` when the export left it
  // at its default (or passed an empty list, as max_pool2d's stride does for "the kernel").
  absl::StatusOr<std::array<int64_t, 2>> Pair(const char* name, std::array<int64_t, 2> fallback,
                                              int64_t minimum) const {
    const Argument* argument = FindArgument(node_, name);
    if (argument == nullptr || argument->value_case() == Argument::kNone) return fallback;
    std::vector<int64_t> values;
    if (argument->value_case() == Argument::kInts) {
      values.assign(argument->ints().values().begin(), argument->ints().values().end());
    } else if (argument->value_case() == Argument::kIntValue) {
      values.push_back(argument->int_value());
    } else {
      return absl::UnimplementedError(absl::StrCat(where_, ": '", name, "' is not a list of ints"));
    }
    if (values.empty()) return fallback;
    if (values.size() == 1) values.push_back(values.front());
    if (values.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(where_, ": '", name, "' has ", values.size(), " values, not 2"));
    }
    for (int64_t value : values) {
      if (value < minimum) {
        return absl::InvalidArgumentError(absl::StrCat(where_, ": '", name, "' is [",
                                                       absl::StrJoin(values, ", "),
                                                       "]; each must be >= ", minimum));
      }
    }
    return std::array<int64_t, 2>{values[0], values[1]};
  }

  bool Bool(const char* name, bool fallback) const {
    const Argument* argument = FindArgument(node_, name);
    return argument == nullptr || argument->value_case() != Argument::kBoolValue
               ? fallback
               : argument->bool_value();
  }

  std::string Tensor(const char* name) const { return TensorArgument(node_, name); }

 private:
  const Node& node_;
  std::string where_;
};

// The window's stride (`stride_fallback` when the export left it out), padding and dilation, and
// the output size they give over the input (ceil_mode: pools').
absl::Status ReadWindow(const NodeReader& reader, std::array<int64_t, 2> stride_fallback,
                        bool ceil_mode, StencilTask& analysis) {
  absl::StatusOr<std::array<int64_t, 2>> stride = reader.Pair("stride", stride_fallback, 1);
  absl::StatusOr<std::array<int64_t, 2>> pad = reader.Pair("padding", {0, 0}, 0);
  absl::StatusOr<std::array<int64_t, 2>> dilation = reader.Pair("dilation", {1, 1}, 1);
  for (const auto* status : {&stride, &pad, &dilation}) {
    if (!status->ok()) return status->status();
  }
  analysis.stride = *stride;
  analysis.padding = *pad;
  analysis.dilation = *dilation;
  analysis.oh = WindowOutputSize(analysis.h, analysis.kernel[0], analysis.stride[0],
                                 analysis.padding[0], analysis.dilation[0], ceil_mode);
  analysis.ow = WindowOutputSize(analysis.w, analysis.kernel[1], analysis.stride[1],
                                 analysis.padding[1], analysis.dilation[1], ceil_mode);
  return absl::OkStatus();
}

// The task input position of `value`, which the stencil reads directly (a weight, a bias).
absl::StatusOr<int> DirectInput(const StencilTask& analysis, const std::string& where,
                                const std::string& value, absl::string_view role) {
  const int position = analysis.view.InputPosition(value);
  if (position < 0) {
    return absl::UnimplementedError(absl::StrCat(where, ": its ", role, " '", value,
                                                 "' is computed in the group; it must be a task "
                                                 "input"));
  }
  return position;
}

absl::Status ReadConv(const NodeReader& reader, StencilTask& analysis) {
  const std::string& where = reader.where();
  const std::string weight = reader.Tensor("weight");
  if (weight.empty()) return absl::InvalidArgumentError(absl::StrCat(where, " has no weight"));
  const std::vector<int64_t> weight_shape = analysis.view.Shape(weight);
  const Argument* groups = FindArgument(*analysis.node, "groups");
  const int64_t group_count =
      groups != nullptr && groups->value_case() == Argument::kIntValue ? groups->int_value() : 1;
  if (weight_shape.size() != 4 || weight_shape[0] != analysis.c || weight_shape[1] != 1 ||
      group_count != analysis.c) {
    return absl::UnimplementedError(
        absl::StrCat(where, " is not depthwise with channel multiplier 1 (weight [",
                     absl::StrJoin(weight_shape, ", "), "], groups ", group_count, ", ", analysis.c,
                     " input channels); dense and grouped convolutions are the conv family's"));
  }
  absl::StatusOr<int> weight_input = DirectInput(analysis, where, weight, "weight");
  if (!weight_input.ok()) return weight_input.status();
  analysis.weight_input = *weight_input;
  analysis.kernel = {weight_shape[2], weight_shape[3]};
  const std::string bias = reader.Tensor("bias");
  if (!bias.empty()) {
    if (analysis.view.Shape(bias) != std::vector<int64_t>{analysis.c}) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": its bias is not of shape [", analysis.c, "]"));
    }
    absl::StatusOr<int> bias_input = DirectInput(analysis, where, bias, "bias");
    if (!bias_input.ok()) return bias_input.status();
    analysis.bias_input = *bias_input;
  }
  const Argument* padding = FindArgument(*analysis.node, "padding");
  if (padding != nullptr && padding->value_case() == Argument::kStringValue) {
    return absl::UnimplementedError(
        absl::StrCat(where, ": padding '", padding->string_value(), "' (a string)"));
  }
  return ReadWindow(reader, {1, 1}, /*ceil_mode=*/false, analysis);
}

absl::Status ReadPool(const NodeReader& reader, StencilTask& analysis) {
  const std::string& where = reader.where();
  absl::StatusOr<std::array<int64_t, 2>> kernel = reader.Pair("kernel_size", {0, 0}, 1);
  if (!kernel.ok()) return kernel.status();
  if ((*kernel)[0] == 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has no kernel_size"));
  }
  analysis.kernel = *kernel;
  if (absl::Status status = ReadWindow(reader, *kernel, reader.Bool("ceil_mode", false), analysis);
      !status.ok()) {
    return status;
  }
  for (int d = 0; d < 2; ++d) {
    if (2 * analysis.padding[d] > analysis.kernel[d]) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": padding ", analysis.padding[d],
                                                     " is more than half the kernel ",
                                                     analysis.kernel[d]));
    }
  }
  if (analysis.kind == StencilKind::kAverage) {
    const Argument* divisor = FindArgument(*analysis.node, "divisor_override");
    if (divisor != nullptr && divisor->value_case() == Argument::kIntValue) {
      return absl::UnimplementedError(absl::StrCat(where, " has a divisor_override"));
    }
    analysis.count_include_pad = reader.Bool("count_include_pad", true);
  }
  return absl::OkStatus();
}

absl::Status ReadAdaptivePool(const NodeReader& reader, StencilTask& analysis) {
  absl::StatusOr<std::array<int64_t, 2>> size = reader.Pair("output_size", {0, 0}, 1);
  if (!size.ok()) return size.status();
  if ((*size)[0] == 0) {
    return absl::InvalidArgumentError(absl::StrCat(reader.where(), " has no output_size"));
  }
  if (analysis.h % (*size)[0] != 0 || analysis.w % (*size)[1] != 0) {
    return absl::UnimplementedError(absl::StrCat(
        reader.where(), " pools [", analysis.h, ", ", analysis.w, "] to [", (*size)[0], ", ",
        (*size)[1], "]: windows of different sizes (only even adaptive pools are stencils)"));
  }
  analysis.kernel = {analysis.h / (*size)[0], analysis.w / (*size)[1]};
  analysis.stride = analysis.kernel;
  analysis.oh = (*size)[0];
  analysis.ow = (*size)[1];
  return absl::OkStatus();
}

using NodeRead = absl::Status (*)(const NodeReader&, StencilTask&);

struct StencilOp {
  absl::string_view op;
  StencilKind kind;
  const char* input_argument;
  NodeRead read;
};

constexpr StencilOp kStencilOps[] = {
    {"aten::conv2d", StencilKind::kConv, "input", ReadConv},
    {"aten::max_pool2d", StencilKind::kMax, "self", ReadPool},
    {"aten::avg_pool2d", StencilKind::kAverage, "self", ReadPool},
    {"aten::adaptive_avg_pool2d", StencilKind::kAverage, "self", ReadAdaptivePool},
};

const StencilOp* FindStencilOp(absl::string_view op) {
  for (const StencilOp& entry : kStencilOps) {
    if (entry.op == op) return &entry;
  }
  return nullptr;
}

absl::Status ReadStencilNode(const StencilOp& op, StencilTask& analysis) {
  const Node& node = *analysis.node;
  NodeReader reader(node);
  const std::string& where = reader.where();
  analysis.kind = op.kind;
  analysis.input = reader.Tensor(op.input_argument);
  if (analysis.input.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has no tensor input"));
  }
  const std::vector<int64_t> shape = analysis.view.Shape(analysis.input);
  if (shape.size() != 4) {
    return absl::UnimplementedError(absl::StrCat(where, " windows a rank-", shape.size(),
                                                 " tensor; the family takes (N, C, H, W)"));
  }
  analysis.n = shape[0];
  analysis.c = shape[1];
  analysis.h = shape[2];
  analysis.w = shape[3];
  if (node.outputs_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has ", node.outputs_size(), " outputs, not 1"));
  }
  analysis.output = node.outputs(0);
  if (absl::Status status = op.read(reader, analysis); !status.ok()) return status;
  if (analysis.oh <= 0 || analysis.ow <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": no window fits the input [", absl::StrJoin(shape, ", "), "]"));
  }
  const std::vector<int64_t> expected = {analysis.n, analysis.c, analysis.oh, analysis.ow};
  if (analysis.view.Shape(analysis.output) != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": its output has shape [",
                     absl::StrJoin(analysis.view.Shape(analysis.output), ", "),
                     "], not the window's [", absl::StrJoin(expected, ", "), "]"));
  }
  const forge::v1::DType dtype = analysis.view.DType(analysis.input);
  if (!IsFloatingDType(dtype) || analysis.view.DType(analysis.output) != dtype) {
    return absl::UnimplementedError(absl::StrCat(where, " windows ", DTypeName(dtype), " into ",
                                                 DTypeName(analysis.view.DType(analysis.output)),
                                                 "; it takes floating tensors of one dtype"));
  }
  analysis.acc_type = dtype == forge::v1::DTYPE_FLOAT64 ? "double" : "float";
  return absl::OkStatus();
}

}  // namespace

int64_t WindowOutputSize(int64_t size, int64_t kernel, int64_t stride, int64_t padding,
                         int64_t dilation, bool ceil_mode) {
  const int64_t span = size + 2 * padding - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t output = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  if (ceil_mode && (output - 1) * stride >= size + padding) --output;
  return output;
}

absl::StatusOr<StencilTask> Analyze(const KernelTask& task) {
  absl::StatusOr<GroupView> view = GroupView::Create(task);
  if (!view.ok()) return view.status();
  StencilTask analysis(*std::move(view));
  const forge::v1::Graph& group = task.group();
  const StencilOp* op = nullptr;
  for (const Node& node : group.nodes()) {
    if (const StencilOp* entry = FindStencilOp(node.op()); entry != nullptr) {
      if (analysis.node != nullptr) {
        return absl::UnimplementedError(absl::StrCat(
            "stencil: ", DescribeNode(node), " is a second stencil; one kernel computes one"));
      }
      analysis.node = &node;
      op = entry;
      continue;
    }
    if (!IsElementOp(node)) {
      return absl::UnimplementedError(absl::StrCat(
          "stencil: ", DescribeNode(node), " is neither a stencil, elementwise nor a view"));
    }
  }
  if (analysis.node == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("stencil: task ", task.digest(), " has no stencil"));
  }
  if (absl::Status status = ReadStencilNode(*op, analysis); !status.ok()) return status;
  for (const forge::v1::Value& value : group.values()) {
    if (!StorageType(value.tensor().dtype()).ok()) {
      return absl::UnimplementedError(absl::StrCat("stencil: value '", value.name(),
                                                   "' has unsupported dtype ",
                                                   DTypeName(value.tensor().dtype())));
    }
  }
  if (task.outputs_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("stencil: task ", task.digest(), " has no outputs"));
  }
  const std::vector<int64_t> output_shape = {analysis.n, analysis.c, analysis.oh, analysis.ow};
  int64_t largest =
      analysis.n * analysis.c * std::max(analysis.h * analysis.w, analysis.oh * analysis.ow);
  for (int o = 0; o < task.outputs_size(); ++o) {
    const TensorSpec& spec = task.outputs(o);
    const std::string& name = group.outputs(o).value_name();
    if (ShapeOf(spec) != analysis.view.Shape(name) || spec.dtype() != analysis.view.DType(name)) {
      return absl::InvalidArgumentError(absl::StrCat("stencil: output ", o, " ('", name,
                                                     "') TensorSpec disagrees with its Value"));
    }
    if (ShapeOf(spec) != output_shape) {
      return absl::UnimplementedError(absl::StrCat(
          "stencil: output ", o, " ('", name, "') has shape [", absl::StrJoin(spec.shape(), ", "),
          "], not the window's output [", absl::StrJoin(output_shape, ", "), "]"));
    }
    largest = std::max(largest, MaxOffset(spec) + 1);
    analysis.widest_access = std::max(analysis.widest_access, ElementBytes(spec.dtype()));
  }
  for (int i = 0; i < task.inputs_size(); ++i) {
    largest = std::max(largest, MaxOffset(task.inputs(i)) + 1);
    analysis.widest_access = std::max(analysis.widest_access, ElementBytes(task.inputs(i).dtype()));
  }
  if (const TensorSpec* input = LargestInput(task);
      input != nullptr && input->shape_size() == 4 && input->strides_size() == 4) {
    analysis.channels_last = input->shape(1) > 1 && input->strides(1) == 1;
  }
  analysis.wide_index = largest >= (int64_t{1} << 30);
  return analysis;
}

}  // namespace forge::codegen::stencil
