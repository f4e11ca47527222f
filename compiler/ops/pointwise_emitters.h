// The CUDA emitters of the op table's pointwise entries (op_table.cc names one per entry): each
// writes its op's result as one expression of the result's register type, following ATen's
// semantics for the op (NaN-propagating max and min, Python's floor division and remainder,
// integer pow, ...; the device helpers they call are in compiler/codegen/kernel_prelude.cuh).
// Ops that differ only in a name share an emitter that reads call.op(): the libm functions (exp,
// sin, ...), floor/ceil/trunc, the comparisons.
//
// Internal to compiler/ops: code outside reads the emitters through the table (FindOp).
#ifndef FORGE_COMPILER_OPS_POINTWISE_EMITTERS_H_
#define FORGE_COMPILER_OPS_POINTWISE_EMITTERS_H_

#include <string>

#include "absl/status/statusor.h"
#include "compiler/ops/pointwise_call.h"

namespace forge::ops::emitters {

// The libm function of the op's name: exp -> expf(x) for float, exp(x) for double.
absl::StatusOr<std::string> Libm(PointwiseCall& call);
// floor, ceil, trunc (libm of the op's name) and round (rint: half to even, as ATen); the
// identity on integers.
absl::StatusOr<std::string> FloorCeilTrunc(PointwiseCall& call);
absl::StatusOr<std::string> Round(PointwiseCall& call);

absl::StatusOr<std::string> Abs(PointwiseCall& call);
absl::StatusOr<std::string> Neg(PointwiseCall& call);
absl::StatusOr<std::string> Reciprocal(PointwiseCall& call);
absl::StatusOr<std::string> Square(PointwiseCall& call);
absl::StatusOr<std::string> Sign(PointwiseCall& call);
absl::StatusOr<std::string> Pow(PointwiseCall& call);

// Activations.
absl::StatusOr<std::string> Sigmoid(PointwiseCall& call);
absl::StatusOr<std::string> Silu(PointwiseCall& call);
absl::StatusOr<std::string> Mish(PointwiseCall& call);
absl::StatusOr<std::string> Relu(PointwiseCall& call);
// approximate='none' (the erf form, through the prelude's polynomial) or 'tanh'.
absl::StatusOr<std::string> Gelu(PointwiseCall& call);
absl::StatusOr<std::string> LeakyRelu(PointwiseCall& call);
absl::StatusOr<std::string> Elu(PointwiseCall& call);
absl::StatusOr<std::string> Softplus(PointwiseCall& call);
absl::StatusOr<std::string> Hardswish(PointwiseCall& call);
absl::StatusOr<std::string> Hardsigmoid(PointwiseCall& call);
absl::StatusOr<std::string> Hardtanh(PointwiseCall& call);
absl::StatusOr<std::string> Relu6(PointwiseCall& call);
absl::StatusOr<std::string> Clamp(PointwiseCall& call);
absl::StatusOr<std::string> ClampMin(PointwiseCall& call);
absl::StatusOr<std::string> ClampMax(PointwiseCall& call);

// Binary arithmetic. add and sub of bools are logical or (as ATen's add of bools).
absl::StatusOr<std::string> Add(PointwiseCall& call);
absl::StatusOr<std::string> Sub(PointwiseCall& call);
absl::StatusOr<std::string> Rsub(PointwiseCall& call);
absl::StatusOr<std::string> Mul(PointwiseCall& call);
// div with rounding_mode None, 'trunc' or 'floor'; floor_divide is div(rounding_mode='floor').
absl::StatusOr<std::string> Div(PointwiseCall& call);
absl::StatusOr<std::string> FloorDivide(PointwiseCall& call);
absl::StatusOr<std::string> Remainder(PointwiseCall& call);
absl::StatusOr<std::string> Fmod(PointwiseCall& call);
absl::StatusOr<std::string> Atan2(PointwiseCall& call);
absl::StatusOr<std::string> Maximum(PointwiseCall& call);
absl::StatusOr<std::string> Minimum(PointwiseCall& call);
absl::StatusOr<std::string> Addcmul(PointwiseCall& call);
absl::StatusOr<std::string> Addcdiv(PointwiseCall& call);

// Comparisons (eq, ne, lt, le, gt, ge: the symbol of the op's name) in the operands' promoted
// type, and logic.
absl::StatusOr<std::string> Compare(PointwiseCall& call);
absl::StatusOr<std::string> Isnan(PointwiseCall& call);
absl::StatusOr<std::string> LogicalNot(PointwiseCall& call);
absl::StatusOr<std::string> LogicalAnd(PointwiseCall& call);
absl::StatusOr<std::string> LogicalOr(PointwiseCall& call);
absl::StatusOr<std::string> LogicalXor(PointwiseCall& call);
absl::StatusOr<std::string> Where(PointwiseCall& call);
absl::StatusOr<std::string> MaskedFill(PointwiseCall& call);

// A cast: rounds to float16 or bfloat16 and keeps the rounded value in float.
absl::StatusOr<std::string> ToCopy(PointwiseCall& call);

// Sources, the same value at every index, rounded to the result's dtype: full, full_like and
// new_full (`fill_value`), fill (`value`, a scalar or a 0-d tensor), scalar_tensor (`s`); zeros
// and ones (and their _like and new_ forms) read no argument.
absl::StatusOr<std::string> Full(PointwiseCall& call);
absl::StatusOr<std::string> Fill(PointwiseCall& call);
absl::StatusOr<std::string> ScalarTensor(PointwiseCall& call);
absl::StatusOr<std::string> Zero(PointwiseCall& call);
absl::StatusOr<std::string> One(PointwiseCall& call);

}  // namespace forge::ops::emitters

#endif  // FORGE_COMPILER_OPS_POINTWISE_EMITTERS_H_
