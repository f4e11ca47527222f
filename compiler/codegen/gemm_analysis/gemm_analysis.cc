#include "compiler/codegen/gemm_analysis/gemm_analysis.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace forge::codegen {

using forge::v1::Argument;
using forge::v1::DType;
using forge::v1::Node;
using forge::v1::TensorSpec;

absl::string_view OpName(const Node& node) { return absl::StripPrefix(node.op(), "aten::"); }

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

bool IsUnitScalar(const Node& node, absl::string_view name) {
  const Argument* argument = FindArgument(node, name);
  if (argument == nullptr) return true;
  if (argument->has_int_value()) return argument->int_value() == 1;
  if (argument->has_float_value()) return argument->float_value() == 1.0;
  return false;
}

namespace {

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
    return absl::InvalidArgumentError(absl::StrCat("value '", value, "' is undefined"));
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
        return absl::InvalidArgumentError(absl::StrCat(DescribeNode(*producer),
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
      absl::StrCat("matmul operand '", value, "' comes from ", DescribeNode(*producer),
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

// A (rows x cols) matrix with the given strides as a BLAS sees it: one unit-stride dimension.
absl::StatusOr<GemmMatrix> ToMatrix(int input, int64_t rows, int64_t row_stride, int64_t cols,
                                       int64_t col_stride, int64_t batch_stride,
                                       absl::string_view what) {
  GemmMatrix matrix{input, false, 0, batch_stride};
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= cols)) {
    matrix.leading_dim = rows == 1 ? std::max<int64_t>(cols, 1) : row_stride;
    return matrix;
  }
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= rows)) {
    matrix.transposed = true;
    matrix.leading_dim = cols == 1 ? std::max<int64_t>(rows, 1) : col_stride;
    return matrix;
  }
  return absl::UnimplementedError(absl::StrCat(what, " (", rows, " x ", cols,
                                               ", strides ", row_stride, ", ", col_stride,
                                               ") has no unit-stride dimension"));
}

bool IsGemmDType(DType dtype) {
  return dtype == forge::v1::DTYPE_FLOAT32 || dtype == forge::v1::DTYPE_BFLOAT16 ||
         dtype == forge::v1::DTYPE_FLOAT16;
}

// The operands of the matmul node as BLAS matrices, and the product's sizes.
absl::Status DescribeProduct(const GroupView& view, const Node& matmul,
                             const ProductOptions& options, GemmProduct& call) {
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
    return absl::UnimplementedError(absl::StrCat(DescribeNode(matmul),
                                                 " reads an operand at a storage offset"));
  }
  const bool batched = left_rank == 3 && right_rank == 3;
  if (!(right_rank == 2 && left_rank >= 2) && !batched) {
    return absl::UnimplementedError(absl::StrCat(DescribeNode(matmul),
                                                 " multiplies ranks ", left_rank, " and ",
                                                 right_rank, "; supported: N-d x 2-d, 3-d x 3-d"));
  }
  const bool broadcast = batched && left->shape[0] != right->shape[0];
  if (broadcast && !(options.broadcast_batch && (left->shape[0] == 1 || right->shape[0] == 1))) {
    return absl::UnimplementedError(absl::StrCat(DescribeNode(matmul),
                                                 " broadcasts its batch dimension"));
  }
  // A broadcast operand's one matrix serves every batch.
  const int64_t left_batch_stride =
      !batched || (broadcast && left->shape[0] == 1) ? 0 : left->strides[0];
  const int64_t right_batch_stride =
      !batched || (broadcast && right->shape[0] == 1) ? 0 : right->strides[0];
  // Leading dimensions of the left operand fold into its rows (linear on [b, s, k] inputs).
  const size_t row_begin = batched ? 1 : 0;
  const auto rows = MergeDims(*left, row_begin, left_rank - 1);
  if (!rows) {
    return absl::UnimplementedError(absl::StrCat(DescribeNode(matmul),
                                                 ": the leading dimensions of '", left_name,
                                                 "' do not fold into rows without a copy"));
  }
  call.m = rows->first;
  call.k = left->shape[left_rank - 1];
  call.n = right->shape[right_rank - 1];
  call.batch = batched ? std::max(left->shape[0], right->shape[0]) : 1;
  if (right->shape[right_rank - 2] != call.k) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeNode(matmul),
                                                   ": inner dimensions ", call.k, " and ",
                                                   right->shape[right_rank - 2], " differ"));
  }
  absl::StatusOr<GemmMatrix> a =
      ToMatrix(left->input, call.m, rows->second, call.k, left->strides[left_rank - 1],
               left_batch_stride, absl::StrCat("operand '", left_name, "'"));
  if (!a.ok()) return a.status();
  absl::StatusOr<GemmMatrix> b = ToMatrix(
      right->input, call.k, right->strides[right_rank - 2], call.n, right->strides[right_rank - 1],
      right_batch_stride, absl::StrCat("operand '", right_name, "'"));
  if (!b.ok()) return b.status();
  call.a = *a;
  call.b = *b;
  call.dtype = view.DType(matmul.outputs(0));
  for (const std::string& name : {left_name, right_name}) {
    if (view.DType(name) != call.dtype) {
      return absl::UnimplementedError(absl::StrCat(DescribeNode(matmul),
                                                   " mixes dtypes"));
    }
  }
  if (!IsGemmDType(call.dtype)) {
    return absl::UnimplementedError(absl::StrCat(DescribeNode(matmul), " is ",
                                                 DTypeName(call.dtype),
                                                 "; supported: float32, bfloat16, float16"));
  }
  if (NumElements(view.FindValue(matmul.outputs(0))->tensor().shape()) != call.output_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeNode(matmul),
                                                   ": output size disagrees with its operands"));
  }
  return absl::OkStatus();
}

bool IsProduct(const Node& node) {
  const absl::string_view op = OpName(node);
  return op == "linear" || op == "addmm" || op == "mm" || op == "bmm" || op == "matmul";
}

}  // namespace

absl::StatusOr<ProductAnalysis> AnalyzeProduct(const GroupView& view,
                                               const ProductOptions& options) {
  ProductAnalysis analysis;
  for (const Node& node : view.group().nodes()) {
    if (!IsProduct(node)) continue;
    if (analysis.matmul != nullptr) {
      return absl::UnimplementedError(
          absl::StrCat(DescribeNode(node), " is a second matrix product in the group"));
    }
    analysis.matmul = &node;
  }
  if (analysis.matmul == nullptr) {
    return absl::UnimplementedError("the group has no linear, addmm, mm, bmm or matmul node");
  }
  if (absl::Status status = DescribeProduct(view, *analysis.matmul, options, analysis.product);
      !status.ok()) {
    return status;
  }
  return analysis;
}

int ProductCount(const GroupView& view) {
  const auto& nodes = view.group().nodes();
  return static_cast<int>(std::count_if(nodes.begin(), nodes.end(), IsProduct));
}

absl::StatusOr<GatedProductAnalysis> AnalyzeGatedProduct(const GroupView& view) {
  GatedProductAnalysis gated;
  std::vector<const Node*> products;
  for (const Node& node : view.group().nodes()) {
    if (IsProduct(node)) products.push_back(&node);
  }
  if (products.size() != 2) {
    return absl::UnimplementedError(absl::StrCat(
        "a gated product has two matrix products; the group has ", products.size()));
  }
  // The product read by the mul directly is the up projection; the other one's sole reader is
  // the activation, whose sole reader is the mul.
  const forge::v1::Graph& group = view.group();
  for (int gate = 0; gate < 2 && gated.mul == nullptr; ++gate) {
    const Node* activation = SoleConsumer(group, products[gate]->outputs(0));
    const Node* mul = SoleConsumer(group, products[1 - gate]->outputs(0));
    if (activation == nullptr || mul == nullptr || OpName(*mul) != "mul" ||
        activation->outputs_size() != 1 || SoleConsumer(group, activation->outputs(0)) != mul) {
      continue;
    }
    const std::vector<std::string> reads = ReadValues(*mul);
    if (reads.size() != 2) continue;
    gated = {products[gate], products[1 - gate], activation, mul};
  }
  if (gated.mul == nullptr) {
    return absl::UnimplementedError(
        "the two matrix products are not act(A B_gate) * (A B_up), each read once");
  }
  for (const Node* product : {gated.gate, gated.up}) {
    const absl::string_view op = OpName(*product);
    if (op != "linear" && op != "mm" && op != "matmul") {
      return absl::UnimplementedError(absl::StrCat(
          DescribeNode(*product), ": a gated product's projections are linear, mm or matmul"));
    }
    if (op == "linear" && !TensorArgument(*product, "bias").empty()) {
      return absl::UnimplementedError(
          absl::StrCat(DescribeNode(*product), " has a bias; the gated product has none"));
    }
  }
  GemmProduct up;
  if (absl::Status status = DescribeProduct(view, *gated.gate, {}, gated.product); !status.ok()) {
    return status;
  }
  if (absl::Status status = DescribeProduct(view, *gated.up, {}, up); !status.ok()) return status;
  if (gated.product.batch != 1 || up.batch != 1) {
    return absl::UnimplementedError("a gated product is not batched (3-d x 3-d)");
  }
  if (up.a != gated.product.a || up.m != gated.product.m || up.n != gated.product.n ||
      up.k != gated.product.k || up.dtype != gated.product.dtype) {
    return absl::UnimplementedError(absl::StrCat(
        DescribeNode(*gated.gate), " and ", DescribeNode(*gated.up),
        " do not read the same A with the same sizes and dtype"));
  }
  gated.up_b = up.b;
  return gated;
}

std::optional<int> BiasInput(const GroupView& view, absl::string_view value, int64_t n,
                             DType dtype) {
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

std::vector<const Node*> RemainingNodes(const GroupView& view, absl::string_view result) {
  std::set<std::string, std::less<>> needed;
  std::vector<std::string> pending;
  for (const forge::v1::GraphOutput& output : view.group().outputs()) {
    pending.push_back(output.value_name());
  }
  std::set<const Node*> nodes;
  while (!pending.empty()) {
    const std::string value = std::move(pending.back());
    pending.pop_back();
    if (value == result || !needed.insert(value).second) continue;
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

bool IsReshape(const Node& node) {
  const absl::string_view op = OpName(node);
  return op == "view" || op == "reshape" || op == "_unsafe_view";
}

}  // namespace forge::codegen
