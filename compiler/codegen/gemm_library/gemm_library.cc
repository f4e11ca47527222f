#include "compiler/codegen/gemm_library/gemm_library.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "compiler/codegen/cuda_expr.h"
#include "compiler/codegen/pointwise/pointwise.h"

namespace forge::codegen {
namespace {

using forge::v1::Argument;
using forge::v1::DType;
using forge::v1::KernelTask;
using forge::v1::Node;
using forge::v1::TensorSpec;

absl::string_view OpName(const Node& node) { return absl::StripPrefix(node.op(), "aten::"); }

// The values `node` reads, in argument order.
std::vector<std::string> ReadValues(const Node& node) {
  std::vector<std::string> names;
  for (const Argument& argument : node.arguments()) {
    if (argument.has_tensor()) names.push_back(argument.tensor());
    if (argument.has_optional_tensor() && argument.optional_tensor().has_value_name()) {
      names.push_back(argument.optional_tensor().value_name());
    }
    for (const std::string& name : argument.tensors().value_names()) names.push_back(name);
  }
  return names;
}

// The value a Tensor or Tensor? argument names; empty when absent or None.
std::string TensorArgument(const Node& node, absl::string_view name) {
  const Argument* argument = FindArgument(node, name);
  if (argument == nullptr) return "";
  if (argument->has_tensor()) return argument->tensor();
  if (argument->has_optional_tensor()) return argument->optional_tensor().value_name();
  return "";
}

// True when a Scalar argument is absent (its default, 1) or equals 1.
bool IsUnitScalar(const Node& node, absl::string_view name) {
  const Argument* argument = FindArgument(node, name);
  if (argument == nullptr) return true;
  if (argument->has_int_value()) return argument->int_value() == 1;
  if (argument->has_float_value()) return argument->float_value() == 1.0;
  return false;
}

std::vector<int64_t> Strides(const TensorSpec& spec) {
  if (spec.strides_size() == spec.shape_size()) return {spec.strides().begin(), spec.strides().end()};
  return ContiguousStrides({spec.shape().begin(), spec.shape().end()});
}

// A strided tensor over one task input's storage.
struct StridedOperand {
  int input = -1;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;
};

bool IsRowMajor(const StridedOperand& operand) {
  const std::vector<int64_t> contiguous = ContiguousStrides(operand.shape);
  for (size_t d = 0; d < operand.shape.size(); ++d) {
    if (operand.shape[d] != 1 && operand.strides[d] != contiguous[d]) return false;
  }
  return true;
}

int64_t WrapDim(int64_t dim, size_t rank) { return dim < 0 ? dim + static_cast<int64_t>(rank) : dim; }

// `value` as strides over a task input, following the views between them; Unimplemented for a
// view that moves data (or any other producer).
absl::StatusOr<StridedOperand> ResolveOperand(const GroupView& view, absl::string_view value) {
  if (const int position = view.InputPosition(value); position >= 0) {
    const TensorSpec& spec = view.InputSpec(position);
    return StridedOperand{position, {spec.shape().begin(), spec.shape().end()}, Strides(spec),
                          spec.storage_offset()};
  }
  const Node* producer = view.Producer(value);
  if (producer == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_library: value '", value, "' is undefined"));
  }
  const absl::string_view op = OpName(*producer);
  absl::StatusOr<StridedOperand> source = ResolveOperand(view, TensorArgument(*producer, "self"));
  if (!source.ok()) return source.status();
  const std::vector<int64_t> shape = view.Shape(value);
  if ((op == "view" || op == "reshape" || op == "_unsafe_view") && IsRowMajor(*source)) {
    source->shape = shape;
    source->strides = ContiguousStrides(shape);
    return source;
  }
  if (op == "t" || op == "transpose" || op == "permute") {
    std::vector<int64_t> order(source->shape.size());
    for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int64_t>(d);
    if (op == "permute") {
      const Argument* dims = FindArgument(*producer, "dims");
      if (dims == nullptr || dims->ints().values_size() != static_cast<int>(order.size())) {
        return absl::InvalidArgumentError(absl::StrCat("gemm_library: ", DescribeNode(*producer),
                                                       " has no dims of rank ", order.size()));
      }
      for (size_t d = 0; d < order.size(); ++d) order[d] = WrapDim(dims->ints().values(d), order.size());
    } else if (order.size() >= 2) {
      const Argument* dim0 = FindArgument(*producer, "dim0");
      const Argument* dim1 = FindArgument(*producer, "dim1");
      const int64_t first = op == "t" ? 0 : WrapDim(dim0 ? dim0->int_value() : 0, order.size());
      const int64_t second = op == "t" ? 1 : WrapDim(dim1 ? dim1->int_value() : 1, order.size());
      std::swap(order[first], order[second]);
    }
    StridedOperand permuted = *source;
    for (size_t d = 0; d < order.size(); ++d) {
      permuted.shape[d] = source->shape[order[d]];
      permuted.strides[d] = source->strides[order[d]];
    }
    return permuted;
  }
  return absl::UnimplementedError(
      absl::StrCat("gemm_library: matmul operand '", value, "' comes from ", DescribeNode(*producer),
                   ", which is not a reinterpretation of a task input's strides"));
}

// Dimensions [begin, end) of `operand` merged into one (size, stride); nullopt when they are not
// evenly nested in memory. Size-1 dimensions do not count.
std::optional<std::pair<int64_t, int64_t>> MergeDims(const StridedOperand& operand, size_t begin,
                                                     size_t end) {
  int64_t size = 1;
  int64_t stride = 0;
  bool seen = false;
  for (size_t d = end; d-- > begin;) {
    if (operand.shape[d] == 1) continue;
    if (seen && operand.strides[d] != stride * size) return std::nullopt;
    if (!seen) stride = operand.strides[d];
    seen = true;
    size *= operand.shape[d];
  }
  return std::make_pair(size, stride);
}

// A (rows x cols) matrix with the given strides as cuBLASLt sees it: one unit-stride dimension.
absl::StatusOr<LibraryMatrix> ToMatrix(int input, int64_t rows, int64_t row_stride, int64_t cols,
                                       int64_t col_stride, int64_t batch_stride,
                                       absl::string_view what) {
  LibraryMatrix matrix{input, false, 0, batch_stride};
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= cols)) {
    matrix.leading_dim = rows == 1 ? std::max<int64_t>(cols, 1) : row_stride;
    return matrix;
  }
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= rows)) {
    matrix.transposed = true;
    matrix.leading_dim = cols == 1 ? std::max<int64_t>(rows, 1) : col_stride;
    return matrix;
  }
  return absl::UnimplementedError(absl::StrCat("gemm_library: ", what, " (", rows, " x ", cols,
                                               ", strides ", row_stride, ", ", col_stride,
                                               ") has no unit-stride dimension"));
}

bool IsLibraryDType(DType dtype) {
  return dtype == forge::v1::DTYPE_FLOAT32 || dtype == forge::v1::DTYPE_BFLOAT16 ||
         dtype == forge::v1::DTYPE_FLOAT16;
}

// A task input usable as cuBLASLt's bias: contiguous [n] or [1, n] of the product's dtype.
std::optional<int> BiasInput(const GroupView& view, absl::string_view value, int64_t n, DType dtype) {
  const int position = view.InputPosition(value);
  if (position < 0) return std::nullopt;
  const TensorSpec& spec = view.InputSpec(position);
  const std::vector<int64_t> shape(spec.shape().begin(), spec.shape().end());
  const bool vector = shape == std::vector<int64_t>{n} || shape == std::vector<int64_t>{1, n};
  if (!vector || spec.dtype() != dtype || spec.storage_offset() != 0 || !IsContiguous(spec)) {
    return std::nullopt;
  }
  return position;
}

// What the templates need to know about a task, found once.
struct GemmAnalysis {
  LibraryGemmCall call;  // algo left at 0
  // The value cuBLASLt's epilogue ends at: the product, its bias add or its activation.
  std::string native_result;
  // The rest of the group (what computes the outputs from native_result), as a pointwise task;
  // nullopt when the rest is only reshapes of native_result into the one output.
  std::optional<KernelTask> epilogue_task;
  std::vector<int> epilogue_task_inputs;
  // Why each template does not apply; empty when it does.
  std::string cublaslt_obstacle;
  std::string then_pointwise_obstacle;
};

// The node that alone reads `value`, or nullptr when `value` is a group output or is read by
// other than exactly one node.
const Node* SoleConsumer(const forge::v1::Graph& group, absl::string_view value) {
  for (const forge::v1::GraphOutput& output : group.outputs()) {
    if (output.value_name() == value) return nullptr;
  }
  const Node* consumer = nullptr;
  for (const Node& node : group.nodes()) {
    const std::vector<std::string> reads = ReadValues(node);
    const int uses = static_cast<int>(std::count(reads.begin(), reads.end(), value));
    if (uses == 0) continue;
    if (consumer != nullptr || uses > 1) return nullptr;
    consumer = &node;
  }
  return consumer;
}

// The operands of the matmul node as cuBLASLt matrices, and the call's sizes.
absl::Status DescribeProduct(const GroupView& view, const Node& matmul, LibraryGemmCall& call) {
  const absl::string_view op = OpName(matmul);
  std::string left_name, right_name;
  bool right_is_weight = false;  // linear: the right operand is weight[n, k], used transposed
  if (op == "linear") {
    left_name = TensorArgument(matmul, "input");
    right_name = TensorArgument(matmul, "weight");
    right_is_weight = true;
  } else if (op == "addmm") {
    left_name = TensorArgument(matmul, "mat1");
    right_name = TensorArgument(matmul, "mat2");
  } else if (op == "mm" || op == "bmm") {
    left_name = TensorArgument(matmul, "self");
    right_name = TensorArgument(matmul, "mat2");
  } else {  // matmul
    left_name = TensorArgument(matmul, "self");
    right_name = TensorArgument(matmul, "other");
  }
  absl::StatusOr<StridedOperand> left = ResolveOperand(view, left_name);
  if (!left.ok()) return left.status();
  absl::StatusOr<StridedOperand> right = ResolveOperand(view, right_name);
  if (!right.ok()) return right.status();
  if (right_is_weight && right->shape.size() == 2) {
    std::swap(right->shape[0], right->shape[1]);
    std::swap(right->strides[0], right->strides[1]);
  }
  const size_t left_rank = left->shape.size();
  const size_t right_rank = right->shape.size();
  if (left->storage_offset != 0 || right->storage_offset != 0) {
    return absl::UnimplementedError(absl::StrCat("gemm_library: ", DescribeNode(matmul),
                                                 " reads an operand at a storage offset"));
  }
  const bool batched = left_rank == 3 && right_rank == 3;
  if (!(right_rank == 2 && left_rank >= 2) && !batched) {
    return absl::UnimplementedError(absl::StrCat("gemm_library: ", DescribeNode(matmul),
                                                 " multiplies ranks ", left_rank, " and ",
                                                 right_rank, "; supported: N-d x 2-d, 3-d x 3-d"));
  }
  if (batched && left->shape[0] != right->shape[0]) {
    return absl::UnimplementedError(absl::StrCat("gemm_library: ", DescribeNode(matmul),
                                                 " broadcasts its batch dimension"));
  }
  // Leading dimensions of the left operand fold into its rows (linear on [b, s, k] inputs).
  const size_t row_begin = batched ? 1 : 0;
  const auto rows = MergeDims(*left, row_begin, left_rank - 1);
  if (!rows) {
    return absl::UnimplementedError(absl::StrCat("gemm_library: ", DescribeNode(matmul),
                                                 ": the leading dimensions of '", left_name,
                                                 "' do not fold into rows without a copy"));
  }
  call.m = rows->first;
  call.k = left->shape[left_rank - 1];
  call.n = right->shape[right_rank - 1];
  call.batch = batched ? left->shape[0] : 1;
  if (right->shape[right_rank - 2] != call.k) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_library: ", DescribeNode(matmul),
                                                   ": inner dimensions ", call.k, " and ",
                                                   right->shape[right_rank - 2], " differ"));
  }
  absl::StatusOr<LibraryMatrix> a =
      ToMatrix(left->input, call.m, rows->second, call.k, left->strides[left_rank - 1],
               batched ? left->strides[0] : 0, absl::StrCat("operand '", left_name, "'"));
  if (!a.ok()) return a.status();
  absl::StatusOr<LibraryMatrix> b = ToMatrix(
      right->input, call.k, right->strides[right_rank - 2], call.n, right->strides[right_rank - 1],
      batched ? right->strides[0] : 0, absl::StrCat("operand '", right_name, "'"));
  if (!b.ok()) return b.status();
  call.a = *a;
  call.b = *b;
  call.dtype = view.DType(matmul.outputs(0));
  for (const std::string& name : {left_name, right_name}) {
    if (view.DType(name) != call.dtype) {
      return absl::UnimplementedError(absl::StrCat("gemm_library: ", DescribeNode(matmul),
                                                   " mixes dtypes"));
    }
  }
  if (!IsLibraryDType(call.dtype)) {
    return absl::UnimplementedError(absl::StrCat("gemm_library: ", DescribeNode(matmul), " is ",
                                                 DTypeName(call.dtype),
                                                 "; cuBLASLt is used for float32, bfloat16, float16"));
  }
  if (NumElements(view.FindValue(matmul.outputs(0))->tensor().shape()) != call.output_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_library: ", DescribeNode(matmul),
                                                   ": output size disagrees with its operands"));
  }
  return absl::OkStatus();
}

// Folds the bias and the activation that cuBLASLt's epilogues express into `analysis`, starting at
// the matmul's output; leaves analysis.native_result at the last value folded.
absl::Status FoldNativeEpilogue(const GroupView& view, const Node& matmul, GemmAnalysis& analysis) {
  LibraryGemmCall& call = analysis.call;
  const absl::string_view op = OpName(matmul);
  analysis.native_result = matmul.outputs(0);
  if (op == "linear" || op == "addmm") {
    const std::string bias = TensorArgument(matmul, op == "linear" ? "bias" : "self");
    if (op == "addmm" && (!IsUnitScalar(matmul, "beta") || !IsUnitScalar(matmul, "alpha"))) {
      return absl::UnimplementedError(
          absl::StrCat("gemm_library: ", DescribeNode(matmul), " scales by beta or alpha"));
    }
    if (!bias.empty()) {
      const std::optional<int> position = BiasInput(view, bias, call.n, call.dtype);
      if (!position) {
        return absl::UnimplementedError(absl::StrCat(
            "gemm_library: the bias '", bias, "' of ", DescribeNode(matmul),
            " is not a contiguous task input of shape [", call.n, "] and the product's dtype"));
      }
      call.bias_input = *position;
    }
  }
  const forge::v1::Graph& group = view.group();
  const DType dtype = call.dtype;
  auto same_layout = [&](const Node& node) {
    return view.DType(node.outputs(0)) == dtype &&
           view.Shape(node.outputs(0)) == view.Shape(analysis.native_result);
  };
  const Node* next = SoleConsumer(group, analysis.native_result);
  if (call.bias_input < 0 && next != nullptr && OpName(*next) == "add" && same_layout(*next) &&
      IsUnitScalar(*next, "alpha")) {
    const std::string self = TensorArgument(*next, "self");
    const std::string other = TensorArgument(*next, "other");
    const std::string& addend = self == analysis.native_result ? other : self;
    if (const std::optional<int> position = BiasInput(view, addend, call.n, dtype)) {
      call.bias_input = *position;
      analysis.native_result = next->outputs(0);
      next = SoleConsumer(group, analysis.native_result);
    }
  }
  const bool bias = call.bias_input >= 0;
  call.epilogue = bias ? LibraryEpilogue::kBias : LibraryEpilogue::kNone;
  if (next != nullptr && same_layout(*next)) {
    const Argument* approximate = FindArgument(*next, "approximate");
    if (OpName(*next) == "relu") {
      call.epilogue = bias ? LibraryEpilogue::kReluBias : LibraryEpilogue::kRelu;
      analysis.native_result = next->outputs(0);
    } else if (OpName(*next) == "gelu" && approximate != nullptr &&
               approximate->string_value() == "tanh") {
      call.epilogue = bias ? LibraryEpilogue::kGeluBias : LibraryEpilogue::kGelu;
      analysis.native_result = next->outputs(0);
    }
  }
  return absl::OkStatus();
}

// The nodes that compute the group outputs from native_result and the task inputs, in group
// order: what is left for the pointwise kernel.
std::vector<const Node*> RemainingNodes(const GroupView& view, absl::string_view native_result) {
  std::set<std::string, std::less<>> needed;
  std::vector<std::string> pending;
  for (const forge::v1::GraphOutput& output : view.group().outputs()) {
    pending.push_back(output.value_name());
  }
  std::set<const Node*> nodes;
  while (!pending.empty()) {
    const std::string value = std::move(pending.back());
    pending.pop_back();
    if (value == native_result || !needed.insert(value).second) continue;
    const Node* producer = view.Producer(value);
    if (producer == nullptr || !nodes.insert(producer).second) continue;
    for (std::string& read : ReadValues(*producer)) pending.push_back(std::move(read));
  }
  std::vector<const Node*> ordered;
  for (const Node& node : view.group().nodes()) {
    if (nodes.contains(&node)) ordered.push_back(&node);
  }
  return ordered;
}

// The pointwise task of `nodes`: inputs native_result (as a contiguous scratch tensor), then the
// task inputs the nodes read, in task order; outputs the task's.
KernelTask EpilogueTask(const GroupView& view, absl::string_view native_result,
                        const std::vector<const Node*>& nodes, std::vector<int>& task_inputs) {
  const KernelTask& task = view.task();
  KernelTask epilogue;
  epilogue.set_family(forge::v1::KERNEL_FAMILY_POINTWISE);
  forge::v1::Graph& group = *epilogue.mutable_group();
  std::set<std::string, std::less<>> values = {std::string(native_result)};
  for (const Node* node : nodes) {
    *group.add_nodes() = *node;
    for (const std::string& read : ReadValues(*node)) values.insert(read);
    for (const std::string& output : node->outputs()) values.insert(output);
  }
  for (const forge::v1::GraphOutput& output : task.group().outputs()) {
    values.insert(output.value_name());
  }
  for (const forge::v1::Value& value : task.group().values()) {
    if (values.contains(value.name())) *group.add_values() = value;
  }
  forge::v1::GraphInput* scratch = group.add_inputs();
  scratch->set_kind(forge::v1::INPUT_KIND_USER_INPUT);
  scratch->set_value_name(std::string(native_result));
  TensorSpec& scratch_spec = *epilogue.add_inputs();
  scratch_spec = view.FindValue(native_result)->tensor();
  const std::vector<int64_t> shape = view.Shape(native_result);
  scratch_spec.clear_strides();
  for (int64_t stride : ContiguousStrides(shape)) scratch_spec.add_strides(stride);
  scratch_spec.set_storage_offset(0);
  task_inputs.clear();
  for (int i = 0; i < task.group().inputs_size(); ++i) {
    if (!values.contains(task.group().inputs(i).value_name())) continue;
    *group.add_inputs() = task.group().inputs(i);
    *epilogue.add_inputs() = task.inputs(i);
    task_inputs.push_back(i);
  }
  *group.mutable_outputs() = task.group().outputs();
  *epilogue.mutable_outputs() = task.outputs();
  // The epilogue never enters the search on its own: it shares the GEMM task's digest.
  epilogue.set_digest(task.digest());
  epilogue.set_occurrences(task.occurrences());
  return epilogue;
}

bool IsReshape(const Node& node) {
  const absl::string_view op = OpName(node);
  return op == "view" || op == "reshape" || op == "_unsafe_view";
}

absl::StatusOr<GemmAnalysis> Analyze(const KernelTask& task) {
  absl::StatusOr<GroupView> view = GroupView::Create(task);
  if (!view.ok()) return view.status();
  const Node* matmul = nullptr;
  for (const Node& node : task.group().nodes()) {
    const absl::string_view op = OpName(node);
    if (op != "linear" && op != "addmm" && op != "mm" && op != "bmm" && op != "matmul") continue;
    if (matmul != nullptr) {
      return absl::UnimplementedError(absl::StrCat("gemm_library: ", DescribeNode(node),
                                                   " is a second matrix product in the group"));
    }
    matmul = &node;
  }
  if (matmul == nullptr) {
    return absl::UnimplementedError(
        "gemm_library: the group has no linear, addmm, mm, bmm or matmul node");
  }
  GemmAnalysis analysis;
  if (absl::Status status = DescribeProduct(*view, *matmul, analysis.call); !status.ok()) {
    return status;
  }
  if (absl::Status status = FoldNativeEpilogue(*view, *matmul, analysis); !status.ok()) {
    return status;
  }
  const std::vector<const Node*> remaining = RemainingNodes(*view, analysis.native_result);
  if (remaining.empty() && task.outputs_size() == 1 &&
      task.group().outputs(0).value_name() != analysis.native_result) {
    // Only possible when an output does not depend on the product at all.
    return absl::UnimplementedError("gemm_library: the output does not depend on the product");
  }
  const bool only_reshapes =
      std::all_of(remaining.begin(), remaining.end(), [](const Node* node) { return IsReshape(*node); });
  if (task.outputs_size() != 1) {
    analysis.cublaslt_obstacle = absl::StrCat("the task has ", task.outputs_size(), " outputs");
  } else if (!only_reshapes) {
    const Node* first = *std::find_if(remaining.begin(), remaining.end(),
                                      [](const Node* node) { return !IsReshape(*node); });
    analysis.cublaslt_obstacle =
        absl::StrCat(DescribeNode(*first), " has no native cuBLASLt epilogue");
  } else {
    const TensorSpec& output = task.outputs(0);
    if (output.dtype() != analysis.call.dtype || !IsContiguous(output) ||
        output.storage_offset() != 0 ||
        NumElements(output.shape()) != analysis.call.output_elements()) {
      analysis.cublaslt_obstacle = "the output is not the product's contiguous row-major result";
    }
  }
  if (remaining.empty() || (only_reshapes && analysis.cublaslt_obstacle.empty())) {
    analysis.then_pointwise_obstacle = "no epilogue is left after cuBLASLt's";
  } else {
    KernelTask epilogue =
        EpilogueTask(*view, analysis.native_result, remaining, analysis.epilogue_task_inputs);
    if (absl::Status status = PointwiseFamily().Applies(epilogue); !status.ok()) {
      analysis.then_pointwise_obstacle =
          absl::StrCat("the epilogue is not pointwise: ", status.message());
    } else {
      analysis.epilogue_task = std::move(epilogue);
    }
  }
  if (!analysis.cublaslt_obstacle.empty() && !analysis.then_pointwise_obstacle.empty()) {
    return absl::UnimplementedError(absl::StrCat("gemm_library: cublaslt: ",
                                                 analysis.cublaslt_obstacle,
                                                 "; cublaslt_then_pointwise: ",
                                                 analysis.then_pointwise_obstacle));
  }
  return analysis;
}

TemplateSpace SpaceOf(const std::string& template_name) {
  std::vector<int64_t> algorithms(GemmLibraryFamily::kHeuristicAlgorithms);
  for (int i = 0; i < GemmLibraryFamily::kHeuristicAlgorithms; ++i) algorithms[i] = i;
  return {template_name, {{"algo", algorithms, 0}}};
}

absl::Status ValidateAgainst(const GemmAnalysis& analysis, const SchedulePoint& point) {
  const bool native = point.template_name == GemmLibraryFamily::kCublasLtTemplate;
  if (!native && point.template_name != GemmLibraryFamily::kCublasLtThenPointwiseTemplate) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm_library has no template '", point.template_name, "'"));
  }
  const std::string& obstacle =
      native ? analysis.cublaslt_obstacle : analysis.then_pointwise_obstacle;
  if (!obstacle.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("template '", point.template_name,
                                                   "' does not apply: ", obstacle));
  }
  return CheckPointInSpace(SpaceOf(point.template_name), point);
}

const std::string& GeneratorVersion() {
  // The epilogue kernels come from the pointwise family: its version is part of ours.
  static const std::string* version =
      new std::string(absl::StrCat("gemm_library-1+", PointwiseFamily().generator_version()));
  return *version;
}

}  // namespace

const char* LibraryEpilogueName(LibraryEpilogue epilogue) {
  switch (epilogue) {
    case LibraryEpilogue::kNone: return "NONE";
    case LibraryEpilogue::kBias: return "BIAS";
    case LibraryEpilogue::kRelu: return "RELU";
    case LibraryEpilogue::kReluBias: return "RELU_BIAS";
    case LibraryEpilogue::kGelu: return "GELU";
    case LibraryEpilogue::kGeluBias: return "GELU_BIAS";
  }
  return "?";
}

std::string DescribeCall(const LibraryGemmCall& call) {
  auto matrix = [](const LibraryMatrix& m) {
    return absl::StrCat("input ", m.input, m.transposed ? " transposed" : "", " ld ", m.leading_dim,
                        " batch_stride ", m.batch_stride);
  };
  return absl::StrCat("cublaslt ", DTypeName(call.dtype), " batch ", call.batch, " m ", call.m,
                      " n ", call.n, " k ", call.k, " a (", matrix(call.a), ") b (",
                      matrix(call.b), ") epilogue ", LibraryEpilogueName(call.epilogue),
                      " bias input ", call.bias_input, " algo ", call.algo);
}

absl::string_view GemmLibraryFamily::generator_version() const { return GeneratorVersion(); }

absl::Status GemmLibraryFamily::Applies(const KernelTask& task) const {
  return Analyze(task).status();
}

absl::StatusOr<std::vector<TemplateSpace>> GemmLibraryFamily::ScheduleSpace(
    const KernelTask& task) const {
  absl::StatusOr<GemmAnalysis> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  std::vector<TemplateSpace> spaces;
  if (analysis->cublaslt_obstacle.empty()) spaces.push_back(SpaceOf(kCublasLtTemplate));
  if (analysis->then_pointwise_obstacle.empty()) {
    spaces.push_back(SpaceOf(kCublasLtThenPointwiseTemplate));
  }
  return spaces;
}

absl::Status GemmLibraryFamily::Validate(const KernelTask& task, const SchedulePoint& point) const {
  absl::StatusOr<GemmAnalysis> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  return ValidateAgainst(*analysis, point);
}

namespace {

// The epilogue kernel's point of a cublaslt_then_pointwise candidate: the pointwise family's
// default point for the epilogue task.
absl::StatusOr<SchedulePoint> EpiloguePoint(const GemmAnalysis& analysis) {
  absl::StatusOr<std::vector<TemplateSpace>> spaces =
      PointwiseFamily().ScheduleSpace(*analysis.epilogue_task);
  if (!spaces.ok()) return spaces.status();
  return DefaultPoint(spaces->front());
}

}  // namespace

absl::StatusOr<GemmLibraryCandidate> DescribeGemmLibrary(const KernelTask& task,
                                                         const SchedulePoint& point) {
  absl::StatusOr<GemmAnalysis> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  if (absl::Status status = ValidateAgainst(*analysis, point); !status.ok()) return status;
  GemmLibraryCandidate candidate;
  candidate.task_inputs = task.inputs_size();
  candidate.gemm = analysis->call;
  candidate.gemm.algo = static_cast<int>(point.parameters.at("algo"));
  if (point.template_name == GemmLibraryFamily::kCublasLtThenPointwiseTemplate) {
    absl::StatusOr<SchedulePoint> epilogue_point = EpiloguePoint(*analysis);
    if (!epilogue_point.ok()) return epilogue_point.status();
    absl::StatusOr<GeneratedKernel> kernel =
        PointwiseFamily().Generate(*analysis->epilogue_task, *epilogue_point);
    if (!kernel.ok()) return kernel.status();
    candidate.epilogue = *std::move(kernel);
    candidate.epilogue_task_inputs = analysis->epilogue_task_inputs;
  }
  return candidate;
}

absl::StatusOr<LaunchPlan> GemmLibraryFamily::Plan(const KernelTask& task,
                                                   const SchedulePoint& point) const {
  absl::StatusOr<GemmAnalysis> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  if (absl::Status status = ValidateAgainst(*analysis, point); !status.ok()) return status;
  LaunchPlan plan;
  if (point.template_name == kCublasLtThenPointwiseTemplate) {
    absl::StatusOr<SchedulePoint> epilogue_point = EpiloguePoint(*analysis);
    if (!epilogue_point.ok()) return epilogue_point.status();
    absl::StatusOr<LaunchPlan> epilogue =
        PointwiseFamily().Plan(*analysis->epilogue_task, *epilogue_point);
    if (!epilogue.ok()) return epilogue.status();
    plan = *std::move(epilogue);
  }
  plan.template_name = point.template_name;
  plan.parameters = point.parameters;
  plan.generator_version = GeneratorVersion();
  // The library's kernels are not Forge's: only their number and the scratch buffer between the
  // matmul and the epilogue kernel are known.
  plan.hints = CostHints();
  plan.hints.executor = Executor::kCublasLt;
  if (point.template_name == kCublasLtThenPointwiseTemplate) {
    plan.hints.kernel_launches = 2;
    plan.hints.output_through_scratch = true;
  }
  return plan;
}

absl::StatusOr<std::string> GemmLibraryFamily::Emit(const KernelTask& task,
                                                    const LaunchPlan& plan) const {
  absl::StatusOr<GemmLibraryCandidate> candidate =
      DescribeGemmLibrary(task, {plan.template_name, plan.parameters});
  if (!candidate.ok()) return candidate.status();
  std::string source = absl::StrCat("// forge library call: ", DescribeCall(candidate->gemm), "\n");
  if (candidate->epilogue) {
    absl::StrAppend(&source, "// epilogue kernel reads scratch, then task inputs {",
                    absl::StrJoin(candidate->epilogue_task_inputs, ", "), "}\n",
                    candidate->epilogue->source);
  }
  return source;
}

}  // namespace forge::codegen
