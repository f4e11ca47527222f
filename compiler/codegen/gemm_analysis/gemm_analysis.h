// The analysis of a GEMM task that every GEMM family shares (gemm_library's cuBLASLt calls,
// cutlass_gemm's CUTLASS kernels): which node is the matrix product, which task inputs are its
// operands A and B, how each is laid out (transposed or not, leading dimension, batch stride), the
// problem's sizes, and the helpers that walk the epilogue the partitioner fused after the product
// (the sole consumer of a value, a bias vector, what is left to compute after a fused part).
//
// The product is D (batch x m x n, row-major) = A (m x k) B (k x n) for each batch. Operands are
// task inputs reinterpreted without a copy: views, reshapes, transposes and permutes between the
// input and the product are folded into the operand's strides; anything else is Unimplemented.
// Error messages have no family prefix: each family adds its own.
#ifndef FORGE_COMPILER_CODEGEN_GEMM_ANALYSIS_GEMM_ANALYSIS_H_
#define FORGE_COMPILER_CODEGEN_GEMM_ANALYSIS_GEMM_ANALYSIS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/codegen/cuda_expr.h"
#include "forge/v1/task.pb.h"

namespace forge::codegen {

// One matrix operand of a row-major product: element (i, j) of batch b sits at
// b * batch_stride + i * leading_dim + j (transposed = false), or
// b * batch_stride + j * leading_dim + i (transposed = true, the matrix is stored as its
// transpose). batch_stride 0 broadcasts one matrix over the batch.
struct GemmMatrix {
  int input = -1;  // position among the task's inputs (kernel arguments)
  bool transposed = false;
  int64_t leading_dim = 0;
  int64_t batch_stride = 0;

  bool operator==(const GemmMatrix&) const = default;
};

// The product's sizes and operands. A, B and the product share `dtype`.
struct GemmProduct {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t batch = 1;
  forge::v1::DType dtype = forge::v1::DTYPE_UNSPECIFIED;
  GemmMatrix a;
  GemmMatrix b;

  int64_t output_elements() const { return batch * m * n; }
  bool operator==(const GemmProduct&) const = default;
};

// What the analysis accepts beyond the plain cases (N-d x 2-d; 3-d x 3-d of equal batches).
struct ProductOptions {
  // 3-d x 3-d where one side's batch is 1: that operand gets batch_stride 0.
  bool broadcast_batch = false;
};

// The group's one matrix product node (linear, addmm, mm, bmm, matmul) and its operands.
struct ProductAnalysis {
  const forge::v1::Node* matmul = nullptr;
  GemmProduct product;
};

// A gated product (SwiGLU's gate and up projections of a Llama/Mistral MLP):
//   result = act(A B_gate) * (A B_up)
// two product nodes (linear, mm or matmul; N-d x 2-d, no bias) that read the same A, an
// activation node on the gate's product (its only reader) and a mul of the activation and the
// up product (the up product's only reader), in either order.
struct GatedProductAnalysis {
  const forge::v1::Node* gate = nullptr;        // the gate's product node
  const forge::v1::Node* up = nullptr;          // the up's product node
  const forge::v1::Node* activation = nullptr;  // act(gate)
  const forge::v1::Node* mul = nullptr;         // act(gate) * up
  GemmProduct product;                          // A x B_gate (sizes, dtype, A, B_gate)
  GemmMatrix up_b;                              // B_up: same sizes as B_gate
};

// The gated product of `view`'s group: Unimplemented (with the reason) when the group is not
// one, or when its products differ in A, sizes or dtype, are batched or carry a bias.
absl::StatusOr<GatedProductAnalysis> AnalyzeGatedProduct(const GroupView& view);

// Finds the product of `view`'s group and describes its operands. Unimplemented when the group
// has no product or two, when an operand is not a strided reinterpretation of a task input (or
// has no unit-stride dimension, or starts at a storage offset), for ranks other than N-d x 2-d
// and 3-d x 3-d, a broadcast batch (unless allowed), mixed dtypes or a dtype other than float32,
// bfloat16 and float16; InvalidArgument when the sizes disagree.
absl::StatusOr<ProductAnalysis> AnalyzeProduct(const GroupView& view,
                                               const ProductOptions& options = {});

// The number of matrix product nodes (linear, addmm, mm, bmm, matmul) in `view`'s group.
int ProductCount(const GroupView& view);

// "linear", "addmm", ...: the op without its "aten::" namespace.
absl::string_view OpName(const forge::v1::Node& node);
// The values `node` reads, in argument order.
std::vector<std::string> ReadValues(const forge::v1::Node& node);
// True when a Scalar argument is absent (its default, 1) or equals 1.
bool IsUnitScalar(const forge::v1::Node& node, absl::string_view name);
// The node that alone reads `value`, or nullptr when `value` is a group output or is read by
// other than exactly one node.
const forge::v1::Node* SoleConsumer(const forge::v1::Graph& group, absl::string_view value);
// The position of `value` among the task inputs when it is a contiguous [n] or [1, n] tensor of
// `dtype` at storage offset 0 (a bias broadcast over the product's rows); nullopt otherwise.
std::optional<int> BiasInput(const GroupView& view, absl::string_view value, int64_t n,
                             forge::v1::DType dtype);
// The nodes that compute the group outputs from `result` and the task inputs, in group order:
// what is left after a family computed `result`.
std::vector<const forge::v1::Node*> RemainingNodes(const GroupView& view,
                                                   absl::string_view result);
// view, reshape, _unsafe_view.
bool IsReshape(const forge::v1::Node& node);

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_GEMM_ANALYSIS_GEMM_ANALYSIS_H_
