// What the generated families share: C++ types of Forge dtypes, a view of a task's group, and
// ElementEmitter, which turns the elementwise part of a group (pointwise ATen ops, casts and view
// ops folded in by the partitioner) into CUDA C++ statements for one element.
//
// Arithmetic follows ATen's elementwise semantics with one documented difference: values whose
// dtype is float16 or bfloat16 stay in float32 registers between fused ops (ATen rounds after
// every op); only an explicit cast (_to_copy) rounds. float64 computes in double.
#ifndef FORGE_COMPILER_CODEGEN_CUDA_EXPR_H_
#define FORGE_COMPILER_CODEGEN_CUDA_EXPR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/dtype/dtype.h"
#include "compiler/ops/op_table.h"
#include "forge/v1/graph.pb.h"
#include "forge/v1/task.pb.h"

namespace forge::codegen {

// The C++ type a tensor of `dtype` is stored as ("ForgeHalf", "float", ...), or Unimplemented.
absl::StatusOr<std::string> StorageType(forge::v1::DType dtype);
// The C++ type a value of `dtype` is computed in: float for float16/bfloat16/float32, double for
// float64, the storage type for integers and bool.
absl::StatusOr<std::string> RegisterType(forge::v1::DType dtype);
// Bytes per element, or 0 for a dtype the generators do not support (float8, complex64): unlike
// common/dtype's DTypeBytes, which sizes every dtype.
int64_t ElementBytes(forge::v1::DType dtype);
// Float dtypes the generators support: float8 excluded, unlike common/dtype's IsFloatingPoint.
using ops::IsFloatingDType;
// `element` (an lvalue of the storage type) converted to its register type.
std::string LoadConversion(forge::v1::DType dtype, absl::string_view element);
// `value` (of the register type of `dtype`) converted to the storage type of `dtype`.
std::string StoreConversion(forge::v1::DType dtype, absl::string_view value);
// Statements storing `values` (expressions of the register type of `dtype`, consecutive elements)
// as one aligned vector at `address` (a `storage*` expression), built in `variable`; stored only
// where `condition` holds, unless it is empty. float16 and bfloat16 pairs are converted by one
// packing instruction each.
std::vector<std::string> VectorStore(forge::v1::DType dtype, const std::vector<std::string>& values,
                                     absl::string_view variable, absl::string_view address,
                                     absl::string_view condition);

// Elements of a tensor of `shape`, and its row-major strides.
int64_t NumElements(const google::protobuf::RepeatedField<int64_t>& shape);
std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape);
// True when the strides of every dimension larger than 1 are row-major contiguous.
bool IsContiguous(const forge::v1::TensorSpec& spec);
// Largest element offset the tensor reaches (0 for empty or 0-d tensors).
int64_t MaxOffset(const forge::v1::TensorSpec& spec);

// Source every generated kernel starts with: float16/bfloat16 storage types and conversions, the
// vector type and the math helpers ElementEmitter's expressions call; the text of
// kernel_prelude.cuh, embedded at build time. Self-contained: it includes no header, so NVRTC
// needs no include path.
absl::string_view KernelPrelude();

// A task's group, indexed by value name.
class GroupView {
 public:
  // Fails when the group references a value it does not define or its inputs/outputs disagree
  // with the task's TensorSpecs in number.
  static absl::StatusOr<GroupView> Create(const forge::v1::KernelTask& task);

  const forge::v1::KernelTask& task() const { return *task_; }
  const forge::v1::Graph& group() const { return task_->group(); }
  // nullptr when no value has that name.
  const forge::v1::Value* FindValue(absl::string_view name) const;
  // The node that produces `name`, or nullptr for group inputs.
  const forge::v1::Node* Producer(absl::string_view name) const;
  // Position of `name` among the group inputs (kernel input arguments), or -1.
  int InputPosition(absl::string_view name) const;
  // The TensorSpec the kernel sees for group input `position`: the task's (it carries the
  // kernel argument's strides), falling back to the group Value's.
  const forge::v1::TensorSpec& InputSpec(int position) const;
  const forge::v1::TensorSpec& OutputSpec(int position) const;
  std::vector<int64_t> Shape(absl::string_view name) const;
  forge::v1::DType DType(absl::string_view name) const;

 private:
  explicit GroupView(const forge::v1::KernelTask& task) : task_(&task) {}
  const forge::v1::KernelTask* task_;
  std::map<std::string, const forge::v1::Value*, std::less<>> values_;
  std::map<std::string, const forge::v1::Node*, std::less<>> producers_;
  std::map<std::string, int, std::less<>> input_positions_;
};

// The argument of `node` called `name`, or nullptr when the export left it at its default.
using ops::FindArgument;
// The value a Tensor or Tensor? argument `name` of `node` names; empty when absent or None.
std::string TensorArgument(const forge::v1::Node& node, absl::string_view name);

// Ops ElementEmitter computes elementwise (their op-table entry's form is kCompute or kCopy), view
// ops it folds in as index remapping (kReshape ... kUnbind), and glue ops it reads through by index
// arithmetic (kCat ... kEmbedding, glue_forms.h); IsElementOp: any of the three.
bool IsPointwiseOp(const forge::v1::Node& node);
bool IsViewOp(const forge::v1::Node& node);
bool IsGlueOp(const forge::v1::Node& node);
bool IsElementOp(const forge::v1::Node& node);
// "aten::mul.Tensor (node mul_3)": how messages name a node.
using ops::DescribeNode;

// An index into a value: one C++ integer expression per dimension, outermost first.
using Index = std::vector<std::string>;

// A computed element: a C++ expression (usually a variable name) of the register type of dtype.
struct Term {
  std::string expr;
  forge::v1::DType dtype = forge::v1::DTYPE_UNSPECIFIED;
};

// The coordinates of row-major element `linear` of a tensor of `shape`, in a canonical spelling:
// two tensors read at equal strings are read at the same element.
Index RowMajorCoordinates(const std::string& linear, const std::vector<int64_t>& shape);

class ElementEmitter;
// The element offset of `index` in a tensor laid out by `spec`; index components become variables
// of `emitter`.
std::string ElementOffset(const Index& index, const forge::v1::TensorSpec& spec,
                          ElementEmitter& emitter);

// Where a family's resolver loads an element as one lane of a vector: `width` elements from the
// element at `first` (lane 0's), the element being lane `lane`; `loaded` keeps each input's
// vector variable (by input position), declared once and read by every lane.
struct VectorLane {
  int64_t width = 1;
  int64_t lane = 0;
  Index first;
  std::map<int, std::string>* loaded = nullptr;
};
// Statements of `emitter` that load group input `position` (kernel argument in<position>, laid
// out by `spec`) at `index` into a new variable of its register type, and that variable: lane
// `vector->lane` of its vector when `vector` is given, else a scalar load.
Term LoadInputElement(ElementEmitter& emitter, int position, const forge::v1::TensorSpec& spec,
                      const Index& index, const VectorLane* vector);

// Statements of `emitter` that store `lanes` (elements computed for kernel output `position`,
// laid out by `spec`) at `indices` (one a lane): as one aligned vector at indices[0] when
// `vector`, else one store a lane. Bool outputs store `!= 0`.
void StoreOutputLanes(ElementEmitter& emitter, int position, const forge::v1::TensorSpec& spec,
                      const std::vector<Term>& lanes, const std::vector<Index>& indices,
                      bool vector);

// Emits statements that compute values of a group at given indices. Values the emitter does not
// compute itself (group inputs; reduction results) come from the resolver, which the family
// supplies; every other value must come from a pointwise or view node: the op table
// (compiler/ops/op_table.h) says how, by the entry's element form and CUDA emitter. Within one
// emitter, asking twice for the same value at the same index reuses the first variable.
// Emission recurses along the chain of producers; a chain deeper than kMaxEmitDepth is an
// InvalidArgument error, not a stack overflow (the partitioner keeps fused groups far shorter).
class ElementEmitter {
 public:
  static constexpr int kMaxEmitDepth = 1024;

  // Returns the element of `value` at `index` if the family provides it (a load, a variable),
  // std::nullopt to let the emitter compute it from its producer, or an error.
  using Resolver = std::function<absl::StatusOr<std::optional<Term>>(
      absl::string_view value, const Index& index, ElementEmitter& emitter)>;

  // `index_type` is the C++ integer type of index arithmetic; `prefix` keeps variable names
  // unique when several emitters write into one function.
  ElementEmitter(const GroupView& view, std::string index_type, std::string prefix,
                 Resolver resolver);

  absl::StatusOr<Term> Emit(absl::string_view value, const Index& index);
  // Adds a statement of the caller's (e.g. a vector load) and returns a fresh variable name.
  std::string NewVariable();
  void AddStatement(std::string statement) { statements_.push_back(std::move(statement)); }
  const std::vector<std::string>& statements() const { return statements_; }
  // An index component, bound to a variable unless it is already a name or a literal.
  std::string BindIndex(const std::string& component);
  const std::string& index_type() const { return index_type_; }
  // The index expression BindIndex bound to `variable`; nullopt for any other name.
  std::optional<std::string> BoundComponent(absl::string_view variable) const;

  // `index` of a value of `from_shape` seen from a consumer of `to_shape` (numpy broadcasting:
  // leading dimensions dropped, size-1 dimensions pinned to 0).
  static Index Broadcast(const Index& index, const std::vector<int64_t>& from_shape);

  // One alternative of EmitChoice: where `condition` (a C++ bool expression) holds, the element
  // `emit` computes (by calls of this emitter). The last alternative's condition is not tested.
  struct Alternative {
    std::string condition;
    std::function<absl::StatusOr<Term>()> emit;
  };
  // An if / else-if chain that computes the first alternative whose condition holds into a
  // variable of `dtype`'s register type (converted from each alternative's own dtype): only that
  // alternative's operands are read. What an alternative computes stays inside it: a later Emit
  // of the same value at the same index computes it again outside.
  absl::StatusOr<Term> EmitChoice(forge::v1::DType dtype,
                                  const std::vector<Alternative>& alternatives);
  // True while EmitChoice emits an alternative: a resolver must not then declare variables that
  // the emission of later elements reuses (a vector loaded once for a whole chunk), as they would
  // be out of scope there.
  bool in_choice() const { return choice_depth_ > 0; }

 private:
  absl::StatusOr<Term> EmitUncached(absl::string_view value, const Index& index);
  absl::StatusOr<Term> EmitView(const forge::v1::Node& node, ops::ElementForm form,
                                absl::string_view value,
                                const Index& index);
  absl::StatusOr<Term> EmitPointwise(const forge::v1::Node& node, ops::PointwiseEmitter emitter,
                                     absl::string_view value, const Index& index);

  const GroupView& view_;
  std::string index_type_;
  std::string prefix_;
  Resolver resolver_;
  std::vector<std::string> statements_;
  std::map<std::string, Term> computed_;        // "value@i0,i1" -> term
  std::map<std::string, std::string> indices_;  // index expression -> variable
  int next_variable_ = 0;
  int depth_ = 0;  // Emit calls under way
  int choice_depth_ = 0;  // EmitChoice alternatives under way
};

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_CUDA_EXPR_H_
