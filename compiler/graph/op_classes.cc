#include "compiler/graph/op_classes.h"

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/strip.h"

namespace forge::graph {
namespace {

struct OpRule {
  OpClass op_class;
  // Cost-model flops per element (see FlopsPerElement); 0 where shapes give the count.
  double flops_per_element;
};

// The rules, by operator name without the "aten::" prefix. Pointwise ops cost about one flop per
// output element (transcendentals too: on a GPU they run on the special-function units and
// rarely bound a fused kernel). Reductions are charged per input element: softmax is max, sub,
// exp, sum and div (5); layer norm is mean, var (Welford), normalize, scale and shift (8); RMS norm
// is square, sum, scale (4); cross-entropy is a log-softmax plus a gather (6).
const absl::flat_hash_map<std::string, OpRule>& Rules() {
  static const auto* const rules = [] {
    auto* table = new absl::flat_hash_map<std::string, OpRule>();
    auto add = [table](OpClass op_class, double flops, std::initializer_list<const char*> names) {
      for (const char* name : names) (*table)[name] = OpRule{op_class, flops};
    };
    add(OpClass::kPointwise, 1,
        {// arithmetic
         "add", "sub", "rsub", "mul", "div", "remainder", "fmod", "neg", "abs", "sign", "reciprocal",
         "maximum", "minimum", "max", "min", "pow", "square", "floor", "ceil", "round", "trunc",
         "frac", "lerp", "addcmul", "addcdiv", "fill", "masked_fill", "where", "clamp", "clamp_min",
         "clamp_max", "clip",
         // comparisons and logic
         "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
         "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "isnan", "isinf",
         "isfinite",
         // unary math
         "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos",
         "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "erf", "erfc", "erfinv",
         "sigmoid", "logit",
         // activations
         "relu", "relu6", "gelu", "silu", "mish", "leaky_relu", "elu", "selu", "celu", "hardtanh",
         "hardsigmoid", "hardswish", "softplus", "threshold", "prelu",
         // casts and copies
         "_to_copy", "to", "type_as", "clone", "contiguous", "copy", "lift_fresh_copy",
         "dropout"});  // dropout in eval is the identity
    add(OpClass::kBatchNormEval, 2, {"_native_batch_norm_legit_no_training", "batch_norm"});
    add(OpClass::kView, 0,
        {"view", "reshape", "_unsafe_view", "_reshape_alias", "transpose", "permute", "unsqueeze",
         "squeeze", "expand", "expand_as", "slice", "select", "t", "split", "split_with_sizes",
         "chunk", "unbind", "alias", "detach", "flatten", "unflatten", "narrow", "view_as",
         "movedim", "diagonal", "as_strided", "unfold"});
    add(OpClass::kReduction, 1, {"sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "all",
                                 "any", "nll_loss", "nll_loss_forward", "logsumexp", "norm",
                                 "linalg_vector_norm"});
    add(OpClass::kReduction, 3, {"var", "var_mean", "std", "std_mean"});
    add(OpClass::kReduction, 4, {"rms_norm", "_fused_rms_norm"});
    add(OpClass::kReduction, 5, {"softmax", "_softmax", "log_softmax", "_log_softmax",
                                 "_safe_softmax"});
    add(OpClass::kReduction, 6, {"cross_entropy_loss"});
    add(OpClass::kReduction, 8, {"layer_norm", "native_layer_norm", "group_norm",
                                 "native_group_norm"});
    add(OpClass::kGemm, 0, {"linear", "addmm", "mm", "bmm", "matmul", "baddbmm"});
    add(OpClass::kConv, 0, {"convolution", "_convolution", "conv1d", "conv2d", "conv3d"});
    add(OpClass::kAttention, 0,
        {"scaled_dot_product_attention", "_scaled_dot_product_efficient_attention",
         "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
         "_scaled_dot_product_cudnn_attention"});
    return table;
  }();
  return *rules;
}

const OpRule* FindRule(absl::string_view op, absl::string_view overload) {
  if (!absl::ConsumePrefix(&op, "aten::")) return nullptr;
  // One-argument where is nonzero (data-dependent shape); max/min reduce unless given "other".
  if (op == "where" && (overload.empty() || overload == "default")) return nullptr;
  if ((op == "max" || op == "min") && overload != "other") {
    static const OpRule kReduce{OpClass::kReduction, 1};
    return &kReduce;
  }
  auto it = Rules().find(std::string(op));
  return it == Rules().end() ? nullptr : &it->second;
}

}  // namespace

absl::string_view OpClassName(OpClass op_class) {
  switch (op_class) {
    case OpClass::kPointwise: return "pointwise";
    case OpClass::kBatchNormEval: return "batch_norm_eval";
    case OpClass::kView: return "view";
    case OpClass::kReduction: return "reduction";
    case OpClass::kGemm: return "gemm";
    case OpClass::kConv: return "conv";
    case OpClass::kAttention: return "attention";
    case OpClass::kOpaque: return "opaque";
  }
  return "unknown";
}

OpClass ClassifyOp(absl::string_view op, absl::string_view overload) {
  const OpRule* rule = FindRule(op, overload);
  return rule == nullptr ? OpClass::kOpaque : rule->op_class;
}

OpClass ClassifyNode(const forge::v1::Node& node) {
  OpClass op_class = ClassifyOp(node.op(), node.overload());
  if (op_class == OpClass::kBatchNormEval && node.op() == "aten::batch_norm") {
    for (const forge::v1::Argument& argument : node.arguments()) {
      if (argument.name() == "training" && argument.bool_value()) return OpClass::kOpaque;
    }
  }
  return op_class;
}

double FlopsPerElement(const forge::v1::Node& node) {
  const OpRule* rule = FindRule(node.op(), node.overload());
  return rule == nullptr ? 0 : rule->flops_per_element;
}

std::vector<std::string> TensorArgumentNames(const forge::v1::Node& node) {
  std::vector<std::string> names;
  for (const forge::v1::Argument& argument : node.arguments()) {
    switch (argument.value_case()) {
      case forge::v1::Argument::kTensor:
        names.push_back(argument.tensor());
        break;
      case forge::v1::Argument::kOptionalTensor:
        if (argument.optional_tensor().has_value_name()) {
          names.push_back(argument.optional_tensor().value_name());
        }
        break;
      case forge::v1::Argument::kTensors:
        for (const std::string& name : argument.tensors().value_names()) names.push_back(name);
        break;
      case forge::v1::Argument::kOptionalTensors:
        for (const auto& item : argument.optional_tensors().items()) {
          if (item.has_value_name()) names.push_back(item.value_name());
        }
        break;
      default:
        break;
    }
  }
  return names;
}

}  // namespace forge::graph
