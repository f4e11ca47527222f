#include "compiler/ops/pointwise_emitters.h"

#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace forge::ops::emitters {
namespace {

using forge::v1::Argument;
using Result = absl::StatusOr<std::string>;

// The optional argument `name` converted to the result's type, or `fallback` (a literal of the
// result's type) when it is absent.
absl::StatusOr<std::string> OptionalOr(PointwiseCall& call, absl::string_view name,
                                       absl::string_view fallback) {
  FORGE_ASSIGN_OR_RETURN(std::optional<Operand> value, call.Optional(name));
  return value.has_value() ? call.In(*value) : call.Constant(fallback);
}

// `self` bounded below by `low` and above by `high` where they are given (NaN stays NaN).
std::string Clamped(const PointwiseCall& call, const Operand& self,
                    const std::optional<Operand>& low, const std::optional<Operand>& high) {
  std::string expr = call.In(self);
  const std::string& type = call.out_type();
  if (low.has_value()) {
    expr = absl::StrCat("forge_max<", type, ">(", expr, ", ", call.In(*low), ")");
  }
  if (high.has_value()) {
    expr = absl::StrCat("forge_min<", type, ">(", expr, ", ", call.In(*high), ")");
  }
  return expr;
}

// hardtanh and relu6: a clamp to [min_val, max_val], whose defaults differ.
Result ClampedToDefaults(PointwiseCall& call, double low_default, double high_default,
                         absl::string_view low_literal, absl::string_view high_literal) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(std::optional<Operand> low, call.Optional("min_val"));
  FORGE_ASSIGN_OR_RETURN(std::optional<Operand> high, call.Optional("max_val"));
  if (!low.has_value()) {
    low = Operand{std::string(low_literal), forge::v1::DTYPE_FLOAT64, true, low_default};
  }
  if (!high.has_value()) {
    high = Operand{std::string(high_literal), forge::v1::DTYPE_FLOAT64, true, high_default};
  }
  return Clamped(call, x, low, high);
}

// The hardsigmoid gate, relu6(x + 3) / 6.
std::string HardGate(const PointwiseCall& call, const std::string& v) {
  const std::string& t = call.out_type();
  return absl::StrCat("(forge_min<", t, ">(forge_max<", t, ">(", v, " + (", t, ")3, (", t, ")0), (",
                      t, ")6) / (", t, ")6)");
}

// self + alpha * other, or other + alpha * self (rsub), with `symbol` " + " or " - ".
Result Additive(PointwiseCall& call, bool reversed, absl::string_view symbol) {
  FORGE_ASSIGN_OR_RETURN(Operand a, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(Operand b, call.Required("other"));
  FORGE_ASSIGN_OR_RETURN(std::optional<Operand> alpha, call.Optional("alpha"));
  const std::string scaled_self = call.In(reversed ? b : a);
  std::string scaled_other = call.In(reversed ? a : b);
  if (alpha.has_value()) {
    scaled_other = absl::StrCat("(", call.In(*alpha), " * ", scaled_other, ")");
  }
  if (call.out_dtype() == forge::v1::DTYPE_BOOL) {
    return absl::StrCat("(", scaled_self, " || ", scaled_other, ")");
  }
  return absl::StrCat("(", scaled_self, symbol, scaled_other, ")");
}

// self / other rounded as rounding_mode says (`default_mode` when the node does not say).
Result Divided(PointwiseCall& call, absl::string_view default_mode) {
  FORGE_ASSIGN_OR_RETURN(Operand a, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(Operand b, call.Required("other"));
  const Argument* mode_argument = FindArgument(call.node(), "rounding_mode");
  std::string mode(default_mode);
  if (mode_argument != nullptr && mode_argument->value_case() == Argument::kStringValue) {
    mode = mode_argument->string_value();
  }
  const std::string quotient = absl::StrCat("(", call.In(a), " / ", call.In(b), ")");
  if (mode.empty()) return quotient;
  if (mode == "trunc") {
    return call.out_floating()
               ? absl::StrCat(call.Fn("trunc"), "(", call.In(a), " / ", call.In(b), ")")
               : quotient;
  }
  if (mode == "floor") {
    return absl::StrCat("forge_floor_divide(", call.In(a), ", ", call.In(b), ")");
  }
  return absl::UnimplementedError(
      absl::StrCat(DescribeNode(call.node()), ": rounding_mode='", mode, "' is not known"));
}

// `function`<T>(self, other): forge_max, forge_min.
Result TypedBinary(PointwiseCall& call, absl::string_view function) {
  FORGE_ASSIGN_OR_RETURN(Operand a, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(Operand b, call.Required("other"));
  return absl::StrCat(function, "<", call.out_type(), ">(", call.In(a), ", ", call.In(b), ")");
}

// `self` and `other` as bools combined by `symbol`, converted to the result's type.
Result Logical(PointwiseCall& call, absl::string_view symbol) {
  FORGE_ASSIGN_OR_RETURN(Operand a, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(Operand b, call.Required("other"));
  const std::string combined =
      absl::StrCat("(", PointwiseCall::As(a, "bool"), symbol, PointwiseCall::As(b, "bool"), ")");
  return call.In(Operand{combined, forge::v1::DTYPE_BOOL});
}

// self + value * (tensor1 `symbol` tensor2).
Result AddScaledProduct(PointwiseCall& call, absl::string_view symbol) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(Operand t1, call.Required("tensor1"));
  FORGE_ASSIGN_OR_RETURN(Operand t2, call.Required("tensor2"));
  FORGE_ASSIGN_OR_RETURN(std::string scale, OptionalOr(call, "value", "1"));
  return absl::StrCat("(", call.In(x), " + ", scale, " * (", call.In(t1), symbol, call.In(t2),
                      "))");
}

// `if_true` where `condition` holds, else `if_false`.
std::string Selected(const PointwiseCall& call, const Operand& condition, const Operand& if_true,
                     const Operand& if_false) {
  return absl::StrCat("(", PointwiseCall::As(condition, "bool"), " ? ", call.In(if_true), " : ",
                      call.In(if_false), ")");
}

}  // namespace

Result Libm(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  return absl::StrCat(call.Fn(call.op()), "(", call.In(x), ")");
}

Result FloorCeilTrunc(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  return call.out_floating() ? absl::StrCat(call.Fn(call.op()), "(", call.In(x), ")") : call.In(x);
}

Result Round(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  return call.out_floating() ? absl::StrCat(call.Fn("rint"), "(", call.In(x), ")") : call.In(x);
}

Result Abs(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  const std::string v = call.In(x);
  return call.out_floating() ? absl::StrCat(call.Fn("fabs"), "(", v, ")")
                             : absl::StrCat("(", v, " < 0 ? -", v, " : ", v, ")");
}

Result Neg(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  return absl::StrCat("(-", call.In(x), ")");
}

Result Reciprocal(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  return absl::StrCat("(", call.Constant("1"), " / ", call.In(x), ")");
}

Result Square(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  return absl::StrCat("(", call.In(x), " * ", call.In(x), ")");
}

Result Sign(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  const std::string v = call.In(x);
  return absl::StrCat("((", call.out_type(), ")((", v, " > 0) - (", v, " < 0)))");
}

Result Pow(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand base, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(Operand exponent, call.Required("exponent"));
  const std::string b = call.In(base);
  if (exponent.literal && exponent.literal_value == 2) return absl::StrCat("(", b, " * ", b, ")");
  if (exponent.literal && exponent.literal_value == 1) return b;
  if (exponent.literal && exponent.literal_value == 0.5 && call.out_floating()) {
    return absl::StrCat(call.Fn("sqrt"), "(", b, ")");
  }
  if (call.out_floating()) {
    return absl::StrCat(call.Fn("pow"), "(", b, ", ", call.In(exponent), ")");
  }
  return absl::StrCat("forge_ipow<", call.out_type(), ">(", b, ", ", call.In(exponent), ")");
}

Result Sigmoid(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  return absl::StrCat("(", call.Constant("1"), " / (", call.Constant("1"), " + ", call.Fn("exp"),
                      "(-", call.In(x), ")))");
}

Result Silu(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  return absl::StrCat("(", call.In(x), " / (", call.Constant("1"), " + ", call.Fn("exp"), "(-",
                      call.In(x), ")))");
}

Result Mish(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  return absl::StrCat("(", call.In(x), " * ", call.Fn("tanh"), "(", call.Fn("log1p"), "(",
                      call.Fn("exp"), "(", call.In(x), "))))");
}

Result Relu(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  return absl::StrCat("forge_max<", call.out_type(), ">(", call.In(x), ", (", call.out_type(),
                      ")0)");
}

Result Gelu(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  const Argument* approximate = FindArgument(call.node(), "approximate");
  const std::string mode = approximate == nullptr ? "none" : approximate->string_value();
  const std::string v = call.In(x);
  const std::string c = absl::StrCat("(", call.out_type(), ")");
  if (mode == "tanh") {
    return absl::StrCat("(", c, "0.5 * ", v, " * (", c, "1 + ", call.Fn("tanh"), "(", c,
                        "0.79788456080286535588 * (", v, " + ", c, "0.044715 * ", v, " * ", v,
                        " * ", v, "))))");
  }
  if (mode == "none") {
    // A float16 or bfloat16 GELU is computed in float and rounded to its type (as ATen does):
    // the polynomial need only be accurate well below that rounding.
    const bool sixteen_bit = call.out_dtype() == forge::v1::DTYPE_FLOAT16 ||
                             call.out_dtype() == forge::v1::DTYPE_BFLOAT16;
    return absl::StrCat(sixteen_bit ? "forge_gelu_erf_16bit(" : "forge_gelu_erf(", v, ")");
  }
  return absl::UnimplementedError(absl::StrCat(DescribeNode(call.node()), ": approximate='", mode,
                                               "' is not 'none' or 'tanh'"));
}

Result LeakyRelu(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(std::string slope, OptionalOr(call, "negative_slope", "0.01"));
  const std::string v = call.In(x);
  return absl::StrCat("(", v, " > 0 ? ", v, " : ", v, " * ", slope, ")");
}

Result Elu(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(std::string alpha, OptionalOr(call, "alpha", "1"));
  FORGE_ASSIGN_OR_RETURN(std::string scale, OptionalOr(call, "scale", "1"));
  FORGE_ASSIGN_OR_RETURN(std::string input_scale, OptionalOr(call, "input_scale", "1"));
  const std::string v = call.In(x);
  return absl::StrCat("(", v, " > 0 ? ", v, " * ", scale, " : (", call.Fn("expm1"), "(", v, " * ",
                      input_scale, ") * ", alpha, " * ", scale, "))");
}

Result Softplus(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(std::string beta, OptionalOr(call, "beta", "1"));
  FORGE_ASSIGN_OR_RETURN(std::string threshold, OptionalOr(call, "threshold", "20"));
  const std::string v = call.In(x);
  return absl::StrCat("(", v, " * ", beta, " > ", threshold, " ? ", v, " : ", call.Fn("log1p"), "(",
                      call.Fn("exp"), "(", v, " * ", beta, ")) / ", beta, ")");
}

Result Hardswish(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  const std::string v = call.In(x);
  return absl::StrCat("(", v, " * ", HardGate(call, v), ")");
}

Result Hardsigmoid(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  return HardGate(call, call.In(x));
}

Result Hardtanh(PointwiseCall& call) { return ClampedToDefaults(call, -1, 1, "(-1.0)", "(1.0)"); }

Result Relu6(PointwiseCall& call) { return ClampedToDefaults(call, 0, 6, "(0.0)", "(6.0)"); }

Result Clamp(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(std::optional<Operand> low, call.Optional("min"));
  FORGE_ASSIGN_OR_RETURN(std::optional<Operand> high, call.Optional("max"));
  return Clamped(call, x, low, high);
}

Result ClampMin(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(std::optional<Operand> low, call.Optional("min"));
  return Clamped(call, x, low, std::nullopt);
}

Result ClampMax(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(std::optional<Operand> high, call.Optional("max"));
  return Clamped(call, x, std::nullopt, high);
}

Result Add(PointwiseCall& call) { return Additive(call, /*reversed=*/false, " + "); }
Result Sub(PointwiseCall& call) { return Additive(call, /*reversed=*/false, " - "); }
Result Rsub(PointwiseCall& call) { return Additive(call, /*reversed=*/true, " - "); }

Result Mul(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand a, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(Operand b, call.Required("other"));
  const char* symbol = call.out_dtype() == forge::v1::DTYPE_BOOL ? " && " : " * ";
  return absl::StrCat("(", call.In(a), symbol, call.In(b), ")");
}

Result Div(PointwiseCall& call) { return Divided(call, ""); }
Result FloorDivide(PointwiseCall& call) { return Divided(call, "floor"); }

Result Remainder(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand a, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(Operand b, call.Required("other"));
  return absl::StrCat("forge_remainder(", call.In(a), ", ", call.In(b), ")");
}

Result Fmod(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand a, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(Operand b, call.Required("other"));
  return call.out_floating() ? absl::StrCat(call.Fn("fmod"), "(", call.In(a), ", ", call.In(b), ")")
                             : absl::StrCat("(", call.In(a), " % ", call.In(b), ")");
}

Result Atan2(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand a, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(Operand b, call.Required("other"));
  return absl::StrCat(call.Fn("atan2"), "(", call.In(a), ", ", call.In(b), ")");
}

Result Maximum(PointwiseCall& call) { return TypedBinary(call, "forge_max"); }
Result Minimum(PointwiseCall& call) { return TypedBinary(call, "forge_min"); }

Result Addcmul(PointwiseCall& call) { return AddScaledProduct(call, " * "); }
Result Addcdiv(PointwiseCall& call) { return AddScaledProduct(call, " / "); }

Result Compare(PointwiseCall& call) {
  static const auto* const kSymbols = new absl::flat_hash_map<std::string, std::string>{
      {"eq", "=="}, {"ne", "!="}, {"lt", "<"}, {"le", "<="}, {"gt", ">"}, {"ge", ">="}};
  auto symbol = kSymbols->find(call.op());
  if (symbol == kSymbols->end()) {
    return absl::InternalError(
        absl::StrCat(DescribeNode(call.node()), " is not a comparison (eq, ne, lt, le, gt, ge)"));
  }
  FORGE_ASSIGN_OR_RETURN(Operand a, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(Operand b, call.Required("other"));
  const std::string type = PointwiseCall::ComparisonType({a, b});
  return absl::StrCat("(", PointwiseCall::As(a, type), " ", symbol->second, " ",
                      PointwiseCall::As(b, type), ")");
}

Result Isnan(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  return absl::StrCat("(", x.expr, " != ", x.expr, ")");
}

Result LogicalNot(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  return call.In(
      Operand{absl::StrCat("(!", PointwiseCall::As(x, "bool"), ")"), forge::v1::DTYPE_BOOL});
}

Result LogicalAnd(PointwiseCall& call) { return Logical(call, " && "); }
Result LogicalOr(PointwiseCall& call) { return Logical(call, " || "); }
Result LogicalXor(PointwiseCall& call) { return Logical(call, " != "); }

Result Where(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand condition, call.Required("condition"));
  FORGE_ASSIGN_OR_RETURN(Operand a, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(Operand b, call.Required("other"));
  return Selected(call, condition, a, b);
}

Result MaskedFill(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  FORGE_ASSIGN_OR_RETURN(Operand mask, call.Required("mask"));
  FORGE_ASSIGN_OR_RETURN(Operand fill, call.Required("value"));
  return Selected(call, mask, fill, x);
}

namespace {

// `x` in the result's register type, rounded to the result's dtype where that is narrower than
// the register (float16, bfloat16), so the value is the one ATen stores. double -> bfloat16 goes
// through float (double rounding; off by one bf16 ulp in rare ties).
std::string RoundedToResult(const PointwiseCall& call, const Operand& x) {
  if (call.out_dtype() == forge::v1::DTYPE_FLOAT16) {
    return x.dtype == forge::v1::DTYPE_FLOAT64
               ? absl::StrCat("forge_half_to_float(forge_double_to_half(", x.expr, "))")
               : absl::StrCat("forge_half_to_float(forge_float_to_half((float)", x.expr, "))");
  }
  if (call.out_dtype() == forge::v1::DTYPE_BFLOAT16) {
    return absl::StrCat("forge_bfloat16_to_float(forge_float_to_bfloat16((float)", x.expr, "))");
  }
  return call.In(x);
}

// The sources' value: scalar argument `name`, rounded to the result's dtype.
Result ScalarArgument(PointwiseCall& call, absl::string_view name) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required(name));
  return RoundedToResult(call, x);
}

}  // namespace

Result ToCopy(PointwiseCall& call) {
  FORGE_ASSIGN_OR_RETURN(Operand x, call.Required("self"));
  return RoundedToResult(call, x);
}

Result Full(PointwiseCall& call) { return ScalarArgument(call, "fill_value"); }
Result Fill(PointwiseCall& call) { return ScalarArgument(call, "value"); }
Result ScalarTensor(PointwiseCall& call) { return ScalarArgument(call, "s"); }
Result Zero(PointwiseCall& call) { return call.Constant("0"); }
Result One(PointwiseCall& call) { return call.Constant("1"); }

}  // namespace forge::ops::emitters
