// What an entry's CUDA emitter (op_table.h) works with: one call of a pointwise ATen op, whose
// operands it reads by argument name and whose result it writes as one CUDA C++ expression of the
// result's register type.
//
// The call does not know where operands come from: a scalar argument of the node becomes a
// literal here, a tensor argument is handed to the generator's callback (ElementEmitter in
// compiler/codegen), which emits the statements that compute that tensor's element and returns
// the variable. Each Optional/Required call on a tensor argument emits such statements, so an
// emitter asks for its operands in one fixed order, and asks for each once.
//
// Arithmetic follows ATen's elementwise semantics; float16 and bfloat16 values compute in float
// (see compiler/codegen/cuda_expr.h).
#ifndef FORGE_COMPILER_OPS_POINTWISE_CALL_H_
#define FORGE_COMPILER_OPS_POINTWISE_CALL_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "forge/v1/graph.pb.h"

namespace forge::ops {

// The argument of `node` called `name`, or nullptr when the export left it at its default.
const forge::v1::Argument* FindArgument(const forge::v1::Node& node, absl::string_view name);
// "aten::mul.Tensor (node mul_3)": how messages name a node.
std::string DescribeNode(const forge::v1::Node& node);
// `node`'s operator without its "aten::" prefix (other namespaces are kept).
absl::string_view OpName(const forge::v1::Node& node);
// Float dtypes the generators support: float8 excluded, unlike common/dtype's IsFloatingPoint.
bool IsFloatingDType(forge::v1::DType dtype);

// An operand of a pointwise op: a computed element or a scalar literal from the node.
struct Operand {
  std::string expr;
  forge::v1::DType dtype = forge::v1::DTYPE_UNSPECIFIED;  // for literals: FLOAT64, INT64 or BOOL
  bool literal = false;
  double literal_value = 0;
};

class PointwiseCall {
 public:
  // The element of tensor `value_name` where the op reads it (the generator broadcasts the op's
  // index into the tensor's shape), as an operand of the tensor's dtype.
  using TensorOperand = std::function<absl::StatusOr<Operand>(const std::string& value_name)>;

  // `out_type` is the C++ register type of `out_dtype`, the dtype of the op's result.
  PointwiseCall(const forge::v1::Node& node, forge::v1::DType out_dtype, std::string out_type,
                TensorOperand tensor_operand)
      : node_(node),
        out_dtype_(out_dtype),
        out_type_(std::move(out_type)),
        tensor_operand_(std::move(tensor_operand)) {}

  const forge::v1::Node& node() const { return node_; }
  // The operator without "aten::": "add".
  absl::string_view op() const { return OpName(node_); }
  forge::v1::DType out_dtype() const { return out_dtype_; }
  const std::string& out_type() const { return out_type_; }
  bool out_double() const { return out_type_ == "double"; }
  bool out_floating() const { return IsFloatingDType(out_dtype_); }

  // The node's argument `name` as an operand, or nullopt when it is None or left at its default.
  // Unimplemented for an argument form the generator does not read (a list, a string).
  absl::StatusOr<std::optional<Operand>> Optional(absl::string_view name);
  // Optional, but InvalidArgument when the argument is absent.
  absl::StatusOr<Operand> Required(absl::string_view name);

  // `x` converted to C++ type `type` ("bool" tests for non-zero).
  static std::string As(const Operand& x, absl::string_view type);
  // `x` converted to the result's register type.
  std::string In(const Operand& x) const { return As(x, out_type_); }
  // `literal` as a constant of the result's register type: "((float)1)".
  std::string Constant(absl::string_view literal) const {
    return absl::StrCat("((", out_type_, ")", literal, ")");
  }
  // The float or double variant of libm function `name`: "expf" or "exp".
  std::string Fn(absl::string_view name) const {
    return out_double() ? std::string(name) : absl::StrCat(name, "f");
  }
  // The type comparisons compute in: the promoted type of the operands (ATen's result_type).
  static std::string ComparisonType(const std::vector<Operand>& operands);

 private:
  const forge::v1::Node& node_;
  forge::v1::DType out_dtype_;
  std::string out_type_;
  TensorOperand tensor_operand_;
};

// Writes the op's result as one CUDA C++ expression of call.out_type(), asking `call` for the
// operands; an error when the node's arguments are missing or of a form the emitter does not
// handle.
using PointwiseEmitter = absl::StatusOr<std::string> (*)(PointwiseCall& call);

}  // namespace forge::ops

#endif  // FORGE_COMPILER_OPS_POINTWISE_CALL_H_
