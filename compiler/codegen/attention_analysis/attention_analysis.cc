#include "compiler/codegen/attention_analysis/attention_analysis.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/dtype/dtype.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/cuda_expr.h"
#include "compiler/codegen/gemm_analysis/gemm_analysis.h"

namespace forge::codegen {
namespace {

using ::forge::v1::Node;

AttentionOperand OperandOf(const GroupView& view, const std::string& name) {
  AttentionOperand operand;
  operand.value = name;
  operand.input = view.InputPosition(name);
  const forge::v1::TensorSpec* spec = nullptr;
  if (operand.input >= 0) {
    spec = &view.InputSpec(operand.input);
  } else if (const forge::v1::Value* value = view.FindValue(name); value != nullptr) {
    spec = &value->tensor();
  }
  if (spec == nullptr) return operand;
  operand.shape.assign(spec->shape().begin(), spec->shape().end());
  if (spec->strides_size() == spec->shape_size()) {
    operand.strides.assign(spec->strides().begin(), spec->strides().end());
  } else {
    operand.strides.assign(operand.shape.size(), 1);
    for (int d = static_cast<int>(operand.shape.size()) - 2; d >= 0; --d) {
      operand.strides[d] = operand.strides[d + 1] * operand.shape[d + 1];
    }
  }
  return operand;
}

absl::Status Unimplemented(const forge::v1::KernelTask& task, absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat("task ", task.digest(), ": ", why));
}

// Reads the SDPA node's arguments into `analysis` (operands and sizes are filled after).
absl::Status ReadSdpa(const GroupView& view, const Node& node, AttentionAnalysis& analysis) {
  analysis.spelling = AttentionSpelling::kSdpa;
  analysis.anchor = &node;
  analysis.query = OperandOf(view, TensorArgument(node, "query"));
  analysis.key = OperandOf(view, TensorArgument(node, "key"));
  analysis.value = OperandOf(view, TensorArgument(node, "value"));
  analysis.key_as_read = analysis.key.value;
  analysis.value_as_read = analysis.value.value;
  analysis.output = node.outputs(0);
  if (const forge::v1::Argument* dropout = FindArgument(node, "dropout_p");
      dropout != nullptr && dropout->float_value() != 0) {
    return Unimplemented(view.task(), "attention with dropout (training)");
  }
  const forge::v1::Argument* causal = FindArgument(node, "is_causal");
  const std::string mask = TensorArgument(node, "attn_mask");
  if (!mask.empty()) {
    analysis.mask_operand = OperandOf(view, mask);
    analysis.mask = view.DType(mask) == forge::v1::DTYPE_BOOL ? AttentionMask::kKeep
                                                              : AttentionMask::kAdditive;
    if (causal != nullptr && causal->bool_value()) {
      return Unimplemented(view.task(), "SDPA with both attn_mask and is_causal");
    }
  } else if (causal != nullptr && causal->bool_value()) {
    analysis.mask = AttentionMask::kCausal;
  }
  const forge::v1::Argument* scale = FindArgument(node, "scale");
  const bool explicit_scale =
      scale != nullptr && scale->value_case() == forge::v1::Argument::kFloatValue;
  const std::vector<int64_t>& q = analysis.query.shape;
  analysis.scale = explicit_scale ? scale->float_value()
                   : q.empty()    ? 1.0
                                  : 1.0 / std::sqrt(static_cast<double>(q.back()));
  const forge::v1::Argument* gqa = FindArgument(node, "enable_gqa");
  const bool enable_gqa = gqa != nullptr && gqa->bool_value();
  const std::vector<int64_t>& k = analysis.key.shape;
  if (!enable_gqa && q.size() >= 3 && k.size() == q.size() && q[q.size() - 3] != k[k.size() - 3]) {
    return Unimplemented(view.task(), "SDPA with fewer K/V heads than Q heads without enable_gqa");
  }
  return absl::OkStatus();
}

// Reads the explicit pattern into `analysis`.
void ReadPattern(const GroupView& view, const graph::AttentionPattern& pattern,
                 AttentionAnalysis& analysis) {
  analysis.spelling = AttentionSpelling::kExplicit;
  analysis.pattern = pattern;
  analysis.anchor = &view.group().nodes(pattern.output_matmul);
  analysis.query = OperandOf(view, pattern.query);
  analysis.key = OperandOf(view, pattern.key);
  analysis.value = OperandOf(view, pattern.value);
  const Node& scores = view.group().nodes(pattern.scores_matmul);
  const Node* key_t = view.Producer(TensorArgument(scores, scores.op() == "aten::bmm" ? "mat2" : "other"));
  analysis.key_as_read = key_t != nullptr ? TensorArgument(*key_t, "self") : pattern.key;
  analysis.value_as_read =
      TensorArgument(*analysis.anchor, analysis.anchor->op() == "aten::bmm" ? "mat2" : "other");
  analysis.output = pattern.output;
  analysis.scale = pattern.has_scale ? pattern.scale : 1.0;
  analysis.mask_before_scale = pattern.has_scale && !pattern.scale_before_mask &&
                               pattern.mask_kind != graph::AttentionMaskKind::kNone;
  analysis.mask_fill = pattern.mask_fill;
  switch (pattern.mask_kind) {
    case graph::AttentionMaskKind::kNone: analysis.mask = AttentionMask::kNone; break;
    case graph::AttentionMaskKind::kMaskedFill: analysis.mask = AttentionMask::kMaskOut; break;
    case graph::AttentionMaskKind::kWhere: analysis.mask = AttentionMask::kKeep; break;
    case graph::AttentionMaskKind::kAdditive: analysis.mask = AttentionMask::kAdditive; break;
  }
  if (pattern.causal) {
    analysis.mask = AttentionMask::kCausal;
  } else if (analysis.mask != AttentionMask::kNone) {
    analysis.mask_operand = OperandOf(view, pattern.mask);
  }
}

}  // namespace

absl::StatusOr<AttentionAnalysis> AnalyzeAttention(const forge::v1::KernelTask& task) {
  if (task.family() != forge::v1::KERNEL_FAMILY_ATTENTION) {
    return Unimplemented(task, "not an ATTENTION task");
  }
  FORGE_ASSIGN_OR_RETURN(const GroupView view, GroupView::Create(task));
  AttentionAnalysis analysis;
  const Node* sdpa = nullptr;
  for (const Node& node : task.group().nodes()) {
    if (node.op() != "aten::scaled_dot_product_attention") continue;
    if (sdpa != nullptr) return Unimplemented(task, "two attentions in one task");
    sdpa = &node;
  }
  const graph::AttentionMatches matches = graph::FindExplicitAttention(task.group());
  if (sdpa != nullptr && !matches.patterns.empty()) {
    return Unimplemented(task, "two attentions in one task");
  }
  if (sdpa != nullptr) {
    FORGE_RETURN_IF_ERROR(ReadSdpa(view, *sdpa, analysis));
  } else if (matches.patterns.size() == 1) {
    ReadPattern(view, matches.patterns.front(), analysis);
  } else {
    return Unimplemented(task, matches.patterns.empty()
                                   ? "no scaled_dot_product_attention and no explicit attention"
                                   : "two attentions in one task");
  }
  const std::vector<int64_t>& q = analysis.query.shape;
  const std::vector<int64_t>& k = analysis.key.shape;
  const std::vector<int64_t>& v = analysis.value.shape;
  if ((q.size() != 3 && q.size() != 4) || k.size() != q.size() || v.size() != q.size()) {
    return Unimplemented(task, absl::StrCat("attention over rank-", q.size(),
                                            " tensors (3 or 4 are analysed)"));
  }
  const size_t rank = q.size();
  analysis.batch = q[0];
  analysis.heads = rank == 4 ? q[1] : 1;
  analysis.kv_heads = rank == 4 ? k[1] : 1;
  if (rank == 4 && (k[0] != q[0] || v[0] != q[0] || v[1] != k[1])) {
    return Unimplemented(task, "Q, K and V differ in batch, or K and V in heads");
  }
  if (rank == 3 && (k[0] != q[0] || v[0] != q[0])) {
    return Unimplemented(task, "Q, K and V differ in batch");
  }
  if (analysis.kv_heads <= 0 || analysis.heads % analysis.kv_heads != 0) {
    return Unimplemented(task, absl::StrCat(analysis.heads, " query heads over ",
                                            analysis.kv_heads, " K/V heads"));
  }
  analysis.q_len = q[rank - 2];
  analysis.head_dim = q[rank - 1];
  analysis.kv_len = k[rank - 2];
  analysis.value_dim = v[rank - 1];
  if (k[rank - 1] != analysis.head_dim || v[rank - 2] != analysis.kv_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", task.digest(), ": Q, K and V sizes disagree (D ", analysis.head_dim, " vs ",
        k[rank - 1], ", Sk ", analysis.kv_len, " vs ", v[rank - 2], ")"));
  }
  analysis.dtype = view.DType(analysis.query.value);
  if (view.DType(analysis.key.value) != analysis.dtype ||
      view.DType(analysis.value.value) != analysis.dtype) {
    return Unimplemented(task, "Q, K and V of different dtypes");
  }
  analysis.epilogue = RemainingNodes(view, analysis.output);
  return analysis;
}

std::string DescribeAttention(const AttentionAnalysis& analysis) {
  std::string mask;
  switch (analysis.mask) {
    case AttentionMask::kNone: break;
    case AttentionMask::kCausal: mask = " causal"; break;
    case AttentionMask::kKeep: mask = " bool mask (kept)"; break;
    case AttentionMask::kMaskOut: mask = " bool mask (masked out)"; break;
    case AttentionMask::kAdditive: mask = " additive mask"; break;
  }
  return absl::StrFormat("B%d H%d/%d Sq%d Sk%d D%d/%d %s%s scale %.4g", analysis.batch,
                         analysis.heads, analysis.kv_heads, analysis.q_len, analysis.kv_len,
                         analysis.head_dim, analysis.value_dim, DTypeName(analysis.dtype), mask,
                         analysis.scale);
}

}  // namespace forge::codegen
