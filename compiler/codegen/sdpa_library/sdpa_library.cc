#include "compiler/codegen/sdpa_library/sdpa_library.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/dtype/dtype.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/attention_analysis/attention_analysis.h"
#include "compiler/codegen/cuda_expr.h"
#include "compiler/codegen/gemm_analysis/gemm_analysis.h"

namespace forge::codegen {
namespace {

using ::forge::v1::DType;
using ::forge::v1::Node;

// aten::scaled_dot_product_attention's schema in torch 2.11, which the worker's LibTorch checks
// the node against (a different one makes the candidate unsupported, never wrong).
constexpr char kSdpaSchema[] =
    "aten::scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? "
    "attn_mask=None, float dropout_p=0., bool is_causal=False, *, float? scale=None, bool "
    "enable_gqa=False) -> Tensor";
constexpr char kLogicalNotSchema[] = "aten::logical_not(Tensor self) -> Tensor";

bool IsHalf(DType dtype) {
  return dtype == forge::v1::DTYPE_FLOAT16 || dtype == forge::v1::DTYPE_BFLOAT16;
}

bool HasTensorMask(const AttentionAnalysis& a) {
  return a.mask == AttentionMask::kKeep || a.mask == AttentionMask::kMaskOut ||
         a.mask == AttentionMask::kAdditive;
}

absl::Status Decline(absl::string_view backend, const AttentionAnalysis& a,
                     absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("sdpa_library: PyTorch's ", backend,
                                                 " backend refuses ", DescribeAttention(a), ": ",
                                                 why));
}

// What the fused kernels share (sdp_utils' check_tensor_shapes and last-dim strides).
absl::Status CheckFused(absl::string_view backend, const AttentionAnalysis& a) {
  if (a.query.shape.size() != 4) return Decline(backend, a, "it takes 4-d Q, K and V only");
  for (const AttentionOperand* operand : {&a.query, &a.key, &a.value}) {
    if (operand->strides.empty() || operand->strides.back() != 1) {
      return Decline(backend, a, absl::StrCat(operand->value, "'s last dim is not contiguous"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFlash(const AttentionAnalysis& a) {
  FORGE_RETURN_IF_ERROR(CheckFused("flash", a));
  if (!IsHalf(a.dtype)) return Decline("flash", a, "it runs float16 and bfloat16 only");
  if (a.head_dim != a.value_dim || a.head_dim > 256) {
    return Decline("flash", a, "it needs one head dim for Q, K and V, at most 256");
  }
  if (HasTensorMask(a)) return Decline("flash", a, "it takes no attn_mask tensor");
  // sdp_utils' check_flash_causal_non_square_seqlens (found on the H200: "Invalid backend").
  if (a.mask == AttentionMask::kCausal && a.q_len != a.kv_len) {
    return Decline("flash", a, "it takes no is_causal when the query and key lengths differ");
  }
  return absl::OkStatus();
}

absl::Status CheckEfficient(const AttentionAnalysis& a) {
  FORGE_RETURN_IF_ERROR(CheckFused("efficient", a));
  const bool float32 = a.dtype == forge::v1::DTYPE_FLOAT32;
  if (!float32 && !IsHalf(a.dtype)) {
    return Decline("efficient", a, "it runs float32, float16 and bfloat16 only");
  }
  const int64_t alignment = float32 ? 4 : 8;
  if (a.head_dim % alignment != 0 || a.value_dim % alignment != 0) {
    return Decline("efficient", a,
                   absl::StrCat("its head dims must be multiples of ", alignment));
  }
  if (a.spelling == AttentionSpelling::kSdpa && a.kv_repeat() > 1) {
    return Decline("efficient", a, "it takes no grouped-query heads (enable_gqa)");
  }
  return absl::OkStatus();
}

absl::Status CheckCudnn(const AttentionAnalysis& a) {
  FORGE_RETURN_IF_ERROR(CheckFused("cudnn", a));
  if (!IsHalf(a.dtype)) return Decline("cudnn", a, "it runs float16 and bfloat16 only");
  if (a.head_dim % 8 != 0 || a.value_dim % 8 != 0 || a.head_dim > 256 || a.value_dim > 256) {
    return Decline("cudnn", a, "its head dims must be multiples of 8, at most 256");
  }
  return absl::OkStatus();
}

absl::Status CheckMath(const AttentionAnalysis& a) {
  if (!IsHalf(a.dtype) && a.dtype != forge::v1::DTYPE_FLOAT32 &&
      a.dtype != forge::v1::DTYPE_FLOAT64) {
    return Decline("math", a, "it runs floating dtypes only");
  }
  return absl::OkStatus();
}

// The backends: template, the name SDPA's backend selection knows it by, PyTorch's checks.
struct Backend {
  absl::string_view template_name;
  absl::string_view name;
  absl::Status (*check)(const AttentionAnalysis&);
};
constexpr Backend kBackends[] = {
    {"sdpa_flash", "flash", CheckFlash},
    {"sdpa_efficient", "efficient", CheckEfficient},
    {"sdpa_cudnn", "cudnn", CheckCudnn},
    {"sdpa_math", "math", CheckMath},
};

const Backend* FindBackend(absl::string_view template_name) {
  for (const Backend& backend : kBackends) {
    if (backend.template_name == template_name) return &backend;
  }
  return nullptr;
}

absl::StatusOr<AttentionAnalysis> Analyze(const forge::v1::KernelTask& task) {
  absl::StatusOr<AttentionAnalysis> analysis = AnalyzeAttention(task);
  if (!analysis.ok()) {
    return absl::Status(analysis.status().code(),
                        absl::StrCat("sdpa_library: ", analysis.status().message()));
  }
  if (analysis->mask == AttentionMask::kAdditive && analysis->mask_before_scale &&
      analysis->scale != 1.0) {
    return absl::UnimplementedError(absl::StrCat(
        "sdpa_library: task ", task.digest(),
        ": an additive mask before the scale (SDPA adds its mask to the scaled scores)"));
  }
  return analysis;
}

// The point's backend after Validate's checks.
absl::StatusOr<const Backend*> CheckPoint(const forge::v1::KernelTask& task,
                                          const SchedulePoint& point,
                                          const AttentionAnalysis& analysis) {
  const Backend* backend = FindBackend(point.template_name);
  if (backend == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("sdpa_library: no template '", point.template_name, "'"));
  }
  FORGE_RETURN_IF_ERROR(CheckPointInSpace(TemplateSpace{std::string(backend->template_name), {}},
                                          point));
  absl::Status checked = backend->check(analysis);
  if (!checked.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(checked.message(), " (task ", task.digest(), ")"));
  }
  return backend;
}

forge::v1::Argument* AddArgument(Node& node, absl::string_view name, bool keyword = false) {
  forge::v1::Argument* argument = node.add_arguments();
  argument->set_name(std::string(name));
  argument->set_keyword(keyword);
  return argument;
}

// A value name not yet in `group`, from `base`.
std::string FreshValueName(const forge::v1::Graph& group, const std::string& base) {
  absl::flat_hash_set<std::string> names;
  for (const forge::v1::Value& value : group.values()) names.insert(value.name());
  std::string name = base;
  while (names.contains(name)) name += "_";
  return name;
}

// Replaces the explicit pattern's chain (scores matmul .. output matmul) in `group` by one SDPA
// node, adds the mask's logical_not where SDPA needs the kept scores, and drops what nothing
// reads any more (the causal mask's builders, the scale's constant).
void RewriteExplicit(const AttentionAnalysis& a, absl::string_view backend,
                     forge::v1::Graph& group) {
  const graph::AttentionPattern& pattern = a.pattern;
  // The chain: from the scores matmul, each node's sole reader, up to the output matmul.
  std::set<int> chain;
  for (int at = pattern.scores_matmul; at >= 0;) {
    chain.insert(at);
    if (at == pattern.output_matmul) break;
    const std::string& result = group.nodes(at).outputs(0);
    int next = -1;
    for (int i = at + 1; i < group.nodes_size() && next < 0; ++i) {
      for (const std::string& read : ReadValues(group.nodes(i))) {
        if (read == result) next = i;
      }
    }
    at = next;
  }
  const Node& anchor = group.nodes(pattern.output_matmul);
  Node sdpa;
  sdpa.set_name(anchor.name());
  sdpa.set_op("aten::scaled_dot_product_attention");
  sdpa.set_overload("default");
  sdpa.set_schema(kSdpaSchema);
  (*sdpa.mutable_attributes())[kSdpaBackendAttribute] = std::string(backend);
  sdpa.add_outputs(pattern.output);
  AddArgument(sdpa, "query")->set_tensor(a.query.value);
  AddArgument(sdpa, "key")->set_tensor(a.key_as_read);
  AddArgument(sdpa, "value")->set_tensor(a.value_as_read);
  std::vector<Node> before;  // nodes to insert ahead of the SDPA node
  forge::v1::Argument* mask = AddArgument(sdpa, "attn_mask");
  if (a.mask == AttentionMask::kMaskOut) {
    Node keep;
    keep.set_name(FreshValueName(group, absl::StrCat(anchor.name(), "_keep")));
    keep.set_op("aten::logical_not");
    keep.set_overload("default");
    keep.set_schema(kLogicalNotSchema);
    AddArgument(keep, "self")->set_tensor(a.mask_operand.value);
    keep.add_outputs(keep.name());
    forge::v1::Value* value = group.add_values();
    value->set_name(keep.name());
    value->mutable_tensor()->set_dtype(forge::v1::DTYPE_BOOL);
    value->mutable_tensor()->mutable_shape()->Add(a.mask_operand.shape.begin(),
                                                  a.mask_operand.shape.end());
    std::vector<int64_t> strides(a.mask_operand.shape.size(), 1);
    for (int d = static_cast<int>(strides.size()) - 2; d >= 0; --d) {
      strides[d] = strides[d + 1] * a.mask_operand.shape[d + 1];
    }
    value->mutable_tensor()->mutable_strides()->Add(strides.begin(), strides.end());
    mask->mutable_optional_tensor()->set_value_name(keep.name());
    before.push_back(std::move(keep));
  } else if (a.mask == AttentionMask::kKeep || a.mask == AttentionMask::kAdditive) {
    mask->mutable_optional_tensor()->set_value_name(a.mask_operand.value);
  } else {
    mask->mutable_none();
  }
  AddArgument(sdpa, "dropout_p")->set_float_value(0.0);
  AddArgument(sdpa, "is_causal")->set_bool_value(a.mask == AttentionMask::kCausal);
  AddArgument(sdpa, "scale", true)->set_float_value(a.scale);
  AddArgument(sdpa, "enable_gqa", true)->set_bool_value(false);

  std::vector<Node> nodes;
  for (int i = 0; i < group.nodes_size(); ++i) {
    if (i == pattern.output_matmul) {
      for (Node& node : before) nodes.push_back(std::move(node));
      nodes.push_back(sdpa);
    } else if (!chain.contains(i)) {
      nodes.push_back(group.nodes(i));
    }
  }
  // Drop nodes nothing reads any more, from the last back.
  absl::flat_hash_set<std::string> read;
  for (const forge::v1::GraphOutput& output : group.outputs()) read.insert(output.value_name());
  std::vector<bool> keep(nodes.size(), true);
  for (int i = static_cast<int>(nodes.size()) - 1; i >= 0; --i) {
    keep[i] = std::any_of(nodes[i].outputs().begin(), nodes[i].outputs().end(),
                          [&](const std::string& output) { return read.contains(output); });
    if (!keep[i]) continue;
    for (std::string& value : ReadValues(nodes[i])) read.insert(std::move(value));
  }
  group.clear_nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (keep[i]) *group.add_nodes() = std::move(nodes[i]);
  }
}

}  // namespace

bool IsSdpaLibraryTemplate(absl::string_view template_name) {
  return FindBackend(template_name) != nullptr;
}

absl::string_view SdpaBackendOf(absl::string_view template_name) {
  const Backend* backend = FindBackend(template_name);
  return backend == nullptr ? absl::string_view() : backend->name;
}

absl::StatusOr<forge::v1::KernelTask> SdpaLibraryTask(const forge::v1::KernelTask& task,
                                                      const SchedulePoint& point) {
  FORGE_ASSIGN_OR_RETURN(const AttentionAnalysis analysis, Analyze(task));
  FORGE_ASSIGN_OR_RETURN(const Backend* backend, CheckPoint(task, point, analysis));
  forge::v1::KernelTask rewritten = task;
  forge::v1::Graph& group = *rewritten.mutable_group();
  if (analysis.spelling == AttentionSpelling::kSdpa) {
    for (Node& node : *group.mutable_nodes()) {
      if (node.name() == analysis.anchor->name()) {
        (*node.mutable_attributes())[kSdpaBackendAttribute] = std::string(backend->name);
      }
    }
    return rewritten;
  }
  RewriteExplicit(analysis, backend->name, group);
  return rewritten;
}

absl::StatusOr<forge::v1::KernelTask> AtenExecutedTask(const forge::v1::KernelTask& task,
                                                       const SchedulePoint& point) {
  if (!IsSdpaLibraryTemplate(point.template_name)) return task;
  return SdpaLibraryTask(task, point);
}

absl::Status SdpaLibraryFamily::Applies(const forge::v1::KernelTask& task) const {
  return Analyze(task).status();
}

absl::StatusOr<std::vector<TemplateSpace>> SdpaLibraryFamily::ScheduleSpace(
    const forge::v1::KernelTask& task) const {
  FORGE_RETURN_IF_ERROR(Applies(task));
  std::vector<TemplateSpace> spaces;
  for (const Backend& backend : kBackends) {
    spaces.push_back(TemplateSpace{std::string(backend.template_name), {}});
  }
  return spaces;
}

absl::Status SdpaLibraryFamily::Validate(const forge::v1::KernelTask& task,
                                         const SchedulePoint& point) const {
  FORGE_ASSIGN_OR_RETURN(const AttentionAnalysis analysis, Analyze(task));
  return CheckPoint(task, point, analysis).status();
}

absl::StatusOr<LaunchPlan> SdpaLibraryFamily::Plan(const forge::v1::KernelTask& task,
                                                   const SchedulePoint& point) const {
  FORGE_ASSIGN_OR_RETURN(const forge::v1::KernelTask rewritten, SdpaLibraryTask(task, point));
  LaunchPlan plan;
  plan.launch.grid = {0, 0, 0};
  plan.launch.block = {0, 0, 0};
  plan.template_name = point.template_name;
  plan.generator_version = std::string(generator_version());
  plan.hints.executor = Executor::kAten;
  plan.hints.kernel_launches = static_cast<int>(
      std::count_if(rewritten.group().nodes().begin(), rewritten.group().nodes().end(),
                    [](const Node& node) { return !IsViewOp(node); }));
  return plan;
}

absl::StatusOr<std::string> SdpaLibraryFamily::Emit(const forge::v1::KernelTask& /*task*/,
                                                    const LaunchPlan& /*plan*/) const {
  return std::string();  // no source: the worker runs SdpaLibraryTask through ATen
}

}  // namespace forge::codegen
