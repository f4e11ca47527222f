#include "compiler/ops/op_table.h"

#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "compiler/ops/pointwise_emitters.h"

namespace forge::ops {
namespace {

namespace e = emitters;
using C = OpClass;
using F = ElementForm;

// Entry makers for the common shapes; the rare ones are spelled out in the table.
// A pointwise op the generator computes with `emitter`. Pointwise ops cost about one flop per
// output element (transcendentals too: on a GPU they run on the special-function units and
// rarely bound a fused kernel).
constexpr OpEntry Pointwise(absl::string_view name, PointwiseEmitter emitter) {
  return {.name = name, .op_class = C::kPointwise, .flops_per_element = 1,
          .form = F::kCompute, .emitter = emitter};
}
// A pointwise op the partitioner fuses but the generator does not have yet.
constexpr OpEntry PointwiseWithoutEmitter(absl::string_view name) {
  return {.name = name, .op_class = C::kPointwise, .flops_per_element = 1};
}
// A pointwise op that copies its operand (form kCopy).
constexpr OpEntry PointwiseCopy(absl::string_view name) {
  return {.name = name, .op_class = C::kPointwise, .flops_per_element = 1, .form = F::kCopy};
}
// A view; `form` kNone for views the generator does not remap.
constexpr OpEntry View(absl::string_view name, ElementForm form) {
  return {.name = name, .op_class = C::kView, .form = form};
}
// A copy-producing variant of a view (view_copy): remapped by the generator, not fused by the
// partitioner.
constexpr OpEntry ViewCopy(absl::string_view name, ElementForm form) {
  return {.name = name, .op_class = C::kOpaque, .form = form};
}
// A glue op (cat, flip, gather, arange, ...): fused like a pointwise op, its element an operand's
// at an index its form computes (or, for a source, a function of the index). Charged one flop per
// output element, as a pointwise op: the index arithmetic and the choice of operand.
constexpr OpEntry Glue(absl::string_view name, ElementForm form,
                       InputDomainRule domain = InputDomainRule::kAny, unsigned adversarial = 0) {
  return {.name = name, .op_class = C::kPointwise, .flops_per_element = 1, .form = form,
          .domain = domain, .adversarial = adversarial};
}
// An overload no family generates, and why.
constexpr OpEntry Opaque(absl::string_view name, absl::string_view overload,
                         absl::string_view reason) {
  return {.name = name, .overload = overload, .opaque_reason = reason};
}
// A reduction, charged `flops` per input element.
constexpr OpEntry Reduction(absl::string_view name, double flops) {
  return {.name = name, .op_class = C::kReduction, .flops_per_element = flops};
}
// A prefix scan, charged `flops` per input element.
constexpr OpEntry Scan(absl::string_view name, double flops) {
  return {.name = name, .op_class = C::kScan, .flops_per_element = flops};
}
// An op of a class whose flops follow from shapes (GEMM, conv, attention).
// A sliding-window op (the stencil family: compiler/codegen/stencil), `flops` per input element.
constexpr OpEntry Stencil(absl::string_view name, double flops) {
  return {.name = name, .op_class = C::kStencil, .flops_per_element = flops};
}
constexpr OpEntry Shaped(absl::string_view name, OpClass op_class) {
  return {.name = name, .op_class = op_class};
}

// `entry` with the judge's adversarial draws `bits` (AdversarialDraw).
constexpr OpEntry Adversarial(OpEntry entry, unsigned bits) {
  entry.adversarial = bits;
  return entry;
}
constexpr unsigned kNormDraws = kLargeMean | kTinyVariance;
constexpr unsigned kKinkDraws = kActivationKinks | kZerosAndSubnormals;

// The table. Reductions are charged per input element: softmax is max, sub, exp, sum and div (5);
// layer norm is mean, var (Welford), normalize, scale and shift (8); RMS norm is square, sum,
// scale (4); cross-entropy is a log-softmax plus a gather (6).
constexpr OpEntry kOps[] = {
    // ---- pointwise: arithmetic
    Adversarial(Pointwise("add", e::Add), kZerosAndSubnormals),
    Adversarial(Pointwise("sub", e::Sub), kZerosAndSubnormals),
    Pointwise("rsub", e::Rsub),
    Adversarial(Pointwise("mul", e::Mul), kZerosAndSubnormals),
    Pointwise("div", e::Div),
    Pointwise("remainder", e::Remainder),
    Pointwise("fmod", e::Fmod),
    Adversarial(Pointwise("neg", e::Neg), kZerosAndSubnormals),
    Adversarial(Pointwise("abs", e::Abs), kKinkDraws),
    Pointwise("sign", e::Sign),
    Pointwise("reciprocal", e::Reciprocal),
    Pointwise("maximum", e::Maximum),
    Pointwise("minimum", e::Minimum),
    // max and min are elementwise with `other`, reductions otherwise.
    {.name = "max", .overload = "other", .op_class = C::kPointwise, .flops_per_element = 1},
    Reduction("max", 1),
    {.name = "min", .overload = "other", .op_class = C::kPointwise, .flops_per_element = 1},
    Reduction("min", 1),
    Pointwise("pow", e::Pow),
    Pointwise("square", e::Square),
    Pointwise("floor", e::FloorCeilTrunc),
    Pointwise("ceil", e::FloorCeilTrunc),
    Pointwise("round", e::Round),
    Pointwise("trunc", e::FloorCeilTrunc),
    PointwiseWithoutEmitter("frac"),
    PointwiseWithoutEmitter("lerp"),
    Pointwise("addcmul", e::Addcmul),
    Pointwise("addcdiv", e::Addcdiv),
    Pointwise("fill", e::Fill),
    Pointwise("masked_fill", e::MaskedFill),
    Pointwise("where", e::Where),
    // The one-argument where is nonzero: its shape depends on the data.
    Opaque("where", "default",
           "the one-argument where is nonzero: its output's shape depends on the data"),
    Pointwise("clamp", e::Clamp),
    Pointwise("clamp_min", e::ClampMin),
    Pointwise("clamp_max", e::ClampMax),
    PointwiseWithoutEmitter("clip"),
    // Not fused by the partitioner (opaque): floor division is div(rounding_mode='floor').
    {.name = "floor_divide", .form = F::kCompute, .emitter = e::FloorDivide},
    // ---- pointwise: comparisons and logic
    Pointwise("eq", e::Compare),
    Pointwise("ne", e::Compare),
    Pointwise("lt", e::Compare),
    Pointwise("le", e::Compare),
    Pointwise("gt", e::Compare),
    Pointwise("ge", e::Compare),
    Pointwise("logical_and", e::LogicalAnd),
    Pointwise("logical_or", e::LogicalOr),
    Pointwise("logical_xor", e::LogicalXor),
    Pointwise("logical_not", e::LogicalNot),
    PointwiseWithoutEmitter("bitwise_and"),
    PointwiseWithoutEmitter("bitwise_or"),
    PointwiseWithoutEmitter("bitwise_xor"),
    PointwiseWithoutEmitter("bitwise_not"),
    Pointwise("isnan", e::Isnan),
    PointwiseWithoutEmitter("isinf"),
    PointwiseWithoutEmitter("isfinite"),
    // ---- pointwise: unary math
    Pointwise("exp", e::Libm),
    Pointwise("exp2", e::Libm),
    Pointwise("expm1", e::Libm),
    {.name = "log", .op_class = C::kPointwise, .flops_per_element = 1, .form = F::kCompute,
     .emitter = e::Libm, .domain = InputDomainRule::kPositiveSelf},
    {.name = "log2", .op_class = C::kPointwise, .flops_per_element = 1, .form = F::kCompute,
     .emitter = e::Libm, .domain = InputDomainRule::kPositiveSelf},
    {.name = "log10", .op_class = C::kPointwise, .flops_per_element = 1, .form = F::kCompute,
     .emitter = e::Libm, .domain = InputDomainRule::kPositiveSelf},
    Pointwise("log1p", e::Libm),
    {.name = "sqrt", .op_class = C::kPointwise, .flops_per_element = 1, .form = F::kCompute,
     .emitter = e::Libm, .domain = InputDomainRule::kPositiveSelf},
    {.name = "rsqrt", .op_class = C::kPointwise, .flops_per_element = 1, .form = F::kCompute,
     .emitter = e::Libm, .domain = InputDomainRule::kPositiveSelf},
    Pointwise("sin", e::Libm),
    Pointwise("cos", e::Libm),
    Pointwise("tan", e::Libm),
    Pointwise("asin", e::Libm),
    Pointwise("acos", e::Libm),
    Pointwise("atan", e::Libm),
    Pointwise("atan2", e::Atan2),
    Pointwise("sinh", e::Libm),
    Pointwise("cosh", e::Libm),
    Pointwise("tanh", e::Libm),
    // Not fused by the partitioner (opaque).
    {.name = "asinh", .form = F::kCompute, .emitter = e::Libm},
    {.name = "acosh", .form = F::kCompute, .emitter = e::Libm},
    {.name = "atanh", .form = F::kCompute, .emitter = e::Libm},
    Pointwise("erf", e::Libm),
    Pointwise("erfc", e::Libm),
    PointwiseWithoutEmitter("erfinv"),
    Pointwise("sigmoid", e::Sigmoid),
    PointwiseWithoutEmitter("logit"),
    // ---- pointwise: activations
    Adversarial(Pointwise("relu", e::Relu), kKinkDraws),
    Adversarial(Pointwise("relu6", e::Relu6), kKinkDraws),
    Adversarial(Pointwise("gelu", e::Gelu), kKinkDraws),
    Adversarial(Pointwise("silu", e::Silu), kKinkDraws),
    Adversarial(Pointwise("mish", e::Mish), kKinkDraws),
    Adversarial(Pointwise("leaky_relu", e::LeakyRelu), kKinkDraws),
    Adversarial(Pointwise("elu", e::Elu), kKinkDraws),
    PointwiseWithoutEmitter("selu"),
    PointwiseWithoutEmitter("celu"),
    Adversarial(Pointwise("hardtanh", e::Hardtanh), kKinkDraws),
    Adversarial(Pointwise("hardsigmoid", e::Hardsigmoid), kKinkDraws),
    Adversarial(Pointwise("hardswish", e::Hardswish), kKinkDraws),
    Pointwise("softplus", e::Softplus),
    PointwiseWithoutEmitter("threshold"),
    PointwiseWithoutEmitter("prelu"),
    // ---- pointwise: casts and copies
    Pointwise("_to_copy", e::ToCopy),
    Pointwise("to", e::ToCopy),       // every overload: the result's dtype is the cast's
    Pointwise("type_as", e::ToCopy),  // `other` gives the dtype only
    PointwiseCopy("clone"),
    PointwiseCopy("contiguous"),
    PointwiseWithoutEmitter("copy"),
    PointwiseCopy("lift_fresh_copy"),
    PointwiseWithoutEmitter("dropout"),  // in eval, the identity
    // ---- glue: joins, reorders, repeats, masks and lookups, as index arithmetic
    Glue("cat", F::kCat),
    Glue("stack", F::kStack),
    Glue("flip", F::kFlip),
    Glue("roll", F::kRoll),
    Glue("repeat", F::kRepeat),
    Glue("repeat_interleave", F::kRepeatInterleave),  // self_int: the repeats are an int
    Opaque("repeat_interleave", "Tensor",
           "the repeat counts are a tensor: the output's shape depends on its values"),
    Opaque("repeat_interleave", "self_Tensor",
           "the repeat counts are a tensor: the output's shape depends on its values"),
    Glue("triu", F::kTriu),
    Glue("tril", F::kTril),
    Glue("index_select", F::kIndexSelect, InputDomainRule::kDimIndex, kIntegerEdges),
    Glue("gather", F::kGather, InputDomainRule::kDimIndex, kIntegerEdges),
    Glue("embedding", F::kEmbedding, InputDomainRule::kEmbeddingIndices, kIntegerEdges),
    // ---- sources: the element is a function of the index (the *_like ops read only a shape)
    Glue("arange", F::kArange),
    Pointwise("full", e::Full),
    Pointwise("full_like", e::Full),
    Pointwise("new_full", e::Full),
    Pointwise("scalar_tensor", e::ScalarTensor),
    Pointwise("zeros", e::Zero),
    Pointwise("zeros_like", e::Zero),
    Pointwise("new_zeros", e::Zero),
    Pointwise("ones", e::One),
    Pointwise("ones_like", e::One),
    Pointwise("new_ones", e::One),
    // ---- batch norm in eval mode
    {.name = "_native_batch_norm_legit_no_training", .op_class = C::kBatchNormEval,
     .flops_per_element = 2, .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "batch_norm", .op_class = C::kBatchNormEval, .flops_per_element = 2,
     .domain = InputDomainRule::kPositiveRunningVar},
    // ---- views
    View("view", F::kReshape),
    View("reshape", F::kReshape),
    View("_unsafe_view", F::kReshape),
    View("_reshape_alias", F::kNone),
    View("transpose", F::kTranspose),
    View("permute", F::kPermute),
    View("unsqueeze", F::kReshape),
    View("squeeze", F::kReshape),
    View("expand", F::kExpand),
    View("expand_as", F::kExpand),
    View("slice", F::kSlice),
    View("select", F::kSelect),
    View("t", F::kMatrixTranspose),
    View("split", F::kSplit),
    View("split_with_sizes", F::kSplit),
    View("chunk", F::kSplit),
    View("unbind", F::kUnbind),
    View("alias", F::kCopy),
    View("detach", F::kCopy),
    View("flatten", F::kReshape),
    View("unflatten", F::kReshape),
    View("narrow", F::kSlice),  // `start`, `length`: a slice of step 1
    View("view_as", F::kReshape),
    View("movedim", F::kNone),
    View("diagonal", F::kNone),
    View("as_strided", F::kNone),
    View("unfold", F::kNone),
    ViewCopy("view_copy", F::kReshape),
    ViewCopy("squeeze_copy", F::kReshape),
    ViewCopy("unsqueeze_copy", F::kReshape),
    ViewCopy("permute_copy", F::kPermute),
    ViewCopy("transpose_copy", F::kTranspose),
    ViewCopy("t_copy", F::kMatrixTranspose),
    ViewCopy("expand_copy", F::kExpand),
    ViewCopy("slice_copy", F::kSlice),
    ViewCopy("select_copy", F::kSelect),
    // ---- reductions
    Adversarial(Reduction("sum", 1), kCancellation | kZerosAndSubnormals),
    Adversarial(Reduction("mean", 1), kCancellation | kZerosAndSubnormals),
    Reduction("amax", 1),
    Reduction("amin", 1),
    Reduction("prod", 1),
    Reduction("argmax", 1),
    Reduction("argmin", 1),
    Reduction("all", 1),
    Reduction("any", 1),
    {.name = "nll_loss", .op_class = C::kReduction, .flops_per_element = 1,
     .domain = InputDomainRule::kClassTarget, .adversarial = kIntegerEdges},
    {.name = "nll_loss_forward", .op_class = C::kReduction, .flops_per_element = 1,
     .domain = InputDomainRule::kClassTarget, .adversarial = kIntegerEdges},
    Adversarial(Reduction("logsumexp", 1), kLargeLogits),
    Reduction("norm", 1),
    Reduction("linalg_vector_norm", 1),
    Adversarial(Reduction("var", 3), kNormDraws),
    Adversarial(Reduction("var_mean", 3), kNormDraws),
    Adversarial(Reduction("std", 3), kNormDraws),
    Adversarial(Reduction("std_mean", 3), kNormDraws),
    Adversarial(Reduction("rms_norm", 4), kNormDraws),
    Adversarial(Reduction("_fused_rms_norm", 4), kNormDraws),
    Adversarial(Reduction("softmax", 5), kLargeLogits),
    Adversarial(Reduction("_softmax", 5), kLargeLogits),
    Adversarial(Reduction("log_softmax", 5), kLargeLogits),
    Adversarial(Reduction("_log_softmax", 5), kLargeLogits),
    Adversarial(Reduction("_safe_softmax", 5), kLargeLogits),
    {.name = "cross_entropy_loss", .op_class = C::kReduction, .flops_per_element = 6,
     .domain = InputDomainRule::kClassTarget, .adversarial = kLargeLogits | kIntegerEdges},
    Adversarial(Reduction("layer_norm", 8), kNormDraws),
    Adversarial(Reduction("native_layer_norm", 8), kNormDraws),
    Adversarial(Reduction("group_norm", 8), kNormDraws),
    Adversarial(Reduction("native_group_norm", 8), kNormDraws),
    // Without running statistics, group norm with a group per channel (the reduction family).
    Adversarial(Reduction("instance_norm", 8), kNormDraws),
    // ---- scans (the scan family: compiler/codegen/scan)
    Adversarial(Scan("cumsum", 1), kCancellation | kZerosAndSubnormals),
    Scan("cumprod", 1),
    Adversarial(Scan("cummax", 1), kZerosAndSubnormals),
    Adversarial(Scan("cummin", 1), kZerosAndSubnormals),
    Adversarial(Scan("logcumsumexp", 3), kLargeLogits),
    // ---- pooling (the stencil family: compiler/codegen/stencil)
    Stencil("max_pool2d", 1),
    Stencil("avg_pool2d", 1),
    Stencil("adaptive_avg_pool2d", 1),
    // ---- GEMM, convolution, attention
    Shaped("linear", C::kGemm),
    Shaped("addmm", C::kGemm),
    Shaped("mm", C::kGemm),
    Shaped("bmm", C::kGemm),
    Shaped("matmul", C::kGemm),
    Shaped("baddbmm", C::kGemm),
    Shaped("convolution", C::kConv),
    Shaped("_convolution", C::kConv),
    Shaped("conv1d", C::kConv),
    Shaped("conv2d", C::kConv),
    Shaped("conv3d", C::kConv),
    Shaped("scaled_dot_product_attention", C::kAttention),
    Shaped("_scaled_dot_product_efficient_attention", C::kAttention),
    Shaped("_scaled_dot_product_flash_attention", C::kAttention),
    Shaped("_scaled_dot_product_flash_attention_for_cpu", C::kAttention),
    Shaped("_scaled_dot_product_cudnn_attention", C::kAttention),
    // nll_loss_nd: the reduction family's cross_entropy template computes it (on log-probabilities)
    {.name = "nll_loss_nd", .op_class = C::kReduction, .flops_per_element = 1,
     .domain = InputDomainRule::kClassTarget, .adversarial = kIntegerEdges},
    // ---- opaque ops the judge draws inputs for
    {.name = "nll_loss2d_forward", .domain = InputDomainRule::kClassTarget,
     .adversarial = kIntegerEdges},
    {.name = "index", .domain = InputDomainRule::kIndexPositions, .adversarial = kIntegerEdges},
    {.name = "scatter", .domain = InputDomainRule::kDimIndex},
    {.name = "scatter_add", .domain = InputDomainRule::kDimIndex},
    {.name = "scatter_reduce", .domain = InputDomainRule::kDimIndex},
    {.name = "index_add", .domain = InputDomainRule::kDimIndex},
    {.name = "index_copy", .domain = InputDomainRule::kDimIndex},
    {.name = "index_fill", .domain = InputDomainRule::kDimIndex},
    // Batch norm in training mode, its backend variants and its backward ops: opaque, with a
    // running variance.
    {.name = "native_batch_norm", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "_native_batch_norm_legit", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "_native_batch_norm_legit_functional", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "_batch_norm_with_update", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "_batch_norm_with_update_functional", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "_batch_norm_no_update", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "_batch_norm_impl_index", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "cudnn_batch_norm", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "miopen_batch_norm", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "batch_norm_update_stats", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "batch_norm_gather_stats", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "batch_norm_gather_stats_with_counts", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "batch_norm_backward", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "native_batch_norm_backward", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "_batch_norm_impl_index_backward", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "cudnn_batch_norm_backward", .domain = InputDomainRule::kPositiveRunningVar},
    {.name = "miopen_batch_norm_backward", .domain = InputDomainRule::kPositiveRunningVar},
};

// The table by (name, overload); the overload "" holds an op's entry for every overload.
using Key = std::pair<std::string, std::string>;
const absl::flat_hash_map<Key, const OpEntry*>& Index() {
  static const auto* const index = [] {
    auto* map = new absl::flat_hash_map<Key, const OpEntry*>();
    for (const OpEntry& entry : kOps) {
      map->emplace(Key(entry.name, entry.overload), &entry);
    }
    return map;
  }();
  return *index;
}

}  // namespace

absl::string_view OpClassName(OpClass op_class) {
  switch (op_class) {
    case OpClass::kPointwise: return "pointwise";
    case OpClass::kBatchNormEval: return "batch_norm_eval";
    case OpClass::kView: return "view";
    case OpClass::kReduction: return "reduction";
    case OpClass::kScan: return "scan";
    case OpClass::kStencil: return "stencil";
    case OpClass::kGemm: return "gemm";
    case OpClass::kConv: return "conv";
    case OpClass::kAttention: return "attention";
    case OpClass::kOpaque: return "opaque";
  }
  return "unknown";
}

const OpEntry* FindOp(absl::string_view op, absl::string_view overload) {
  if (!absl::ConsumePrefix(&op, "aten::")) return nullptr;
  if (overload.empty()) overload = "default";
  const auto& index = Index();
  if (auto it = index.find(Key(op, overload)); it != index.end()) return it->second;
  auto it = index.find(Key(op, ""));
  return it == index.end() ? nullptr : it->second;
}

const OpEntry* FindOp(const forge::v1::Node& node) { return FindOp(node.op(), node.overload()); }

absl::Span<const OpEntry> AllOps() { return kOps; }

}  // namespace forge::ops
