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
#include "compiler/codegen/gemm_analysis/gemm_analysis.h"
#include "compiler/codegen/pointwise/pointwise.h"

namespace forge::codegen {
namespace {

using forge::v1::Argument;
using forge::v1::DType;
using forge::v1::KernelTask;
using forge::v1::Node;
using forge::v1::TensorSpec;

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

// The shared analysis's error with this family's prefix.
absl::Status Prefixed(const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("gemm_library: ", status.message()));
}

absl::StatusOr<GemmAnalysis> Analyze(const KernelTask& task) {
  absl::StatusOr<GroupView> view = GroupView::Create(task);
  if (!view.ok()) return view.status();
  absl::StatusOr<ProductAnalysis> product = AnalyzeProduct(*view);
  if (!product.ok()) return Prefixed(product.status());
  const Node* matmul = product->matmul;
  GemmAnalysis analysis;
  static_cast<GemmProduct&>(analysis.call) = product->product;
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
