#include "compiler/codegen/cuda_expr.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/codegen/glue_forms.h"

namespace forge::codegen {
namespace {

using forge::v1::Argument;
using forge::v1::DType;
using forge::v1::Node;
using ops::ElementForm;

// Forms that remap the index (the views), as opposed to computing or copying.
bool IsIndexMap(ElementForm form) {
  switch (form) {
    case ElementForm::kReshape:
    case ElementForm::kPermute:
    case ElementForm::kTranspose:
    case ElementForm::kMatrixTranspose:
    case ElementForm::kExpand:
    case ElementForm::kSlice:
    case ElementForm::kSelect:
    case ElementForm::kSplit:
    case ElementForm::kUnbind: return true;
    case ElementForm::kNone:
    case ElementForm::kCompute:
    case ElementForm::kCopy: return false;
    default: return false;  // the glue forms (glue_forms.h)
  }
}

bool IsIdentifierOrLiteral(absl::string_view expr) {
  if (expr.empty()) return false;
  for (char c : expr) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

std::string Join(const Index& index) { return absl::StrJoin(index, ","); }

// The index maps of the views (ElementForm): where in `self` (of `rank` dims, shape `from`) the
// view's element at `index` is.
absl::StatusOr<Index> PermutedIndex(const Node& node, const Index& index, int64_t rank) {
  const Argument* dims = FindArgument(node, "dims");
  if (dims == nullptr || dims->ints().values_size() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeNode(node), ": bad dims"));
  }
  Index mapped(rank, "0");
  for (int64_t i = 0; i < rank; ++i) mapped[NormalizeDim(dims->ints().values(i), rank)] = index[i];
  return mapped;
}

Index TransposedIndex(const Node& node, ElementForm form, const Index& index) {
  const int64_t rank = static_cast<int64_t>(index.size());
  Index mapped = index;
  if (rank == 2 || form == ElementForm::kTranspose) {
    const int64_t dim0 = NormalizeDim(IntArgument(node, "dim0", 0), rank);
    const int64_t dim1 = NormalizeDim(IntArgument(node, "dim1", 1), rank);
    std::swap(mapped[dim0], mapped[dim1]);
  }
  return mapped;
}

Index SlicedIndex(const Node& node, const Index& index, const std::vector<int64_t>& from,
                  ElementEmitter& emitter) {
  const int64_t rank = static_cast<int64_t>(from.size());
  const int64_t dim = NormalizeDim(IntArgument(node, "dim", 0), rank);
  int64_t start = IntArgument(node, "start", 0);
  if (start < 0) start += from[dim];
  start = std::clamp<int64_t>(start, 0, from[dim]);
  const int64_t step = IntArgument(node, "step", 1);
  Index mapped = index;
  mapped[dim] = emitter.BindIndex(absl::StrCat("(", start, " + ", index[dim], " * ", step, ")"));
  if (start == 0 && step == 1) mapped[dim] = index[dim];
  return mapped;
}

Index SelectedIndex(const Node& node, const Index& index, const std::vector<int64_t>& from) {
  const int64_t rank = static_cast<int64_t>(from.size());
  const int64_t dim = NormalizeDim(IntArgument(node, "dim", 0), rank);
  int64_t position = IntArgument(node, "index", 0);
  if (position < 0) position += from[dim];
  Index mapped(rank, "0");
  for (int64_t d = 0, i = 0; d < rank; ++d) {
    mapped[d] = d == dim ? absl::StrCat(position) : index[i++];
  }
  return mapped;
}

// Position of `value` among `node`'s outputs, or an error.
absl::StatusOr<int> OutputPosition(const Node& node, absl::string_view value) {
  for (int k = 0; k < node.outputs_size(); ++k) {
    if (node.outputs(k) == value) return k;
  }
  return absl::InternalError(absl::StrCat(DescribeNode(node), " has no output '", value, "'"));
}

// Output `value` of a split (split, split_with_sizes, chunk): a slice of `self` along `dim`
// starting where the outputs before it end.
absl::StatusOr<Index> SplitIndex(const Node& node, absl::string_view value, const Index& index,
                                 const GroupView& view, ElementEmitter& emitter) {
  absl::StatusOr<int> position = OutputPosition(node, value);
  if (!position.ok()) return position.status();
  const int64_t rank = static_cast<int64_t>(index.size());
  const int64_t dim = NormalizeDim(IntArgument(node, "dim", 0), rank);
  if (dim < 0 || dim >= rank) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeNode(node), ": bad dim"));
  }
  int64_t start = 0;
  for (int k = 0; k < *position; ++k) {
    const std::vector<int64_t> shape = view.Shape(node.outputs(k));
    if (static_cast<int64_t>(shape.size()) != rank) {
      return absl::InvalidArgumentError(
          absl::StrCat(DescribeNode(node), ": outputs of different ranks"));
    }
    start += shape[dim];
  }
  Index mapped = index;
  if (start != 0) mapped[dim] = emitter.BindIndex(absl::StrCat("(", start, " + ", index[dim], ")"));
  return mapped;
}

// Output `value` (the k-th) of an unbind: k inserted at `dim`.
absl::StatusOr<Index> UnboundIndex(const Node& node, absl::string_view value, const Index& index) {
  absl::StatusOr<int> position = OutputPosition(node, value);
  if (!position.ok()) return position.status();
  const int64_t rank = static_cast<int64_t>(index.size()) + 1;
  const int64_t dim = NormalizeDim(IntArgument(node, "dim", 0), rank);
  if (dim < 0 || dim >= rank) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeNode(node), ": bad dim"));
  }
  Index mapped = index;
  mapped.insert(mapped.begin() + dim, absl::StrCat(*position));
  return mapped;
}

// A reshape from `from` to `to`: dims larger than 1 pair up unchanged (squeeze, unsqueeze,
// size-1 reshapes), or the element's row-major position is recomputed in the source's shape.
Index ReshapedIndex(const Index& index, const std::vector<int64_t>& from,
                    const std::vector<int64_t>& to, ElementEmitter& emitter) {
  const int rank = static_cast<int>(from.size());
  Index mapped(from.size(), "0");
  std::vector<int> from_dims, to_dims;
  for (int d = 0; d < rank; ++d) {
    if (from[d] != 1) from_dims.push_back(d);
  }
  for (int d = 0; d < static_cast<int>(to.size()); ++d) {
    if (to[d] != 1) to_dims.push_back(d);
  }
  bool paired = from_dims.size() == to_dims.size();
  for (size_t i = 0; paired && i < from_dims.size(); ++i) {
    paired = from[from_dims[i]] == to[to_dims[i]];
  }
  if (paired) {
    for (size_t i = 0; i < from_dims.size(); ++i) mapped[from_dims[i]] = index[to_dims[i]];
    return mapped;
  }
  const std::vector<int64_t> to_strides = ContiguousStrides(to);
  std::vector<std::string> terms;
  for (int d : to_dims) terms.push_back(absl::StrCat(index[d], " * ", to_strides[d]));
  const std::string linear = emitter.BindIndex(
      terms.empty() ? "0" : absl::StrCat("(", absl::StrJoin(terms, " + "), ")"));
  const std::vector<int64_t> from_strides = ContiguousStrides(from);
  for (size_t i = 0; i < from_dims.size(); ++i) {
    const int d = from_dims[i];
    std::string component = absl::StrCat("(", linear, " / ", from_strides[d], ")");
    if (i > 0) component = absl::StrCat("(", component, " % ", from[d], ")");
    if (from_strides[d] == 1) {
      component = i > 0 ? absl::StrCat("(", linear, " % ", from[d], ")") : linear;
    }
    mapped[d] = emitter.BindIndex(component);
  }
  return mapped;
}

}  // namespace

absl::StatusOr<std::string> StorageType(DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT64: return std::string("double");
    case forge::v1::DTYPE_FLOAT32: return std::string("float");
    case forge::v1::DTYPE_FLOAT16: return std::string("ForgeHalf");
    case forge::v1::DTYPE_BFLOAT16: return std::string("ForgeBFloat16");
    case forge::v1::DTYPE_INT8: return std::string("signed char");
    case forge::v1::DTYPE_INT16: return std::string("short");
    case forge::v1::DTYPE_INT32: return std::string("int");
    case forge::v1::DTYPE_INT64: return std::string("long long");
    case forge::v1::DTYPE_UINT8: return std::string("unsigned char");
    case forge::v1::DTYPE_BOOL: return std::string("bool");
    default:
      return absl::UnimplementedError(
          absl::StrCat("dtype ", DTypeName(dtype), " is not supported by the generators"));
  }
}

absl::StatusOr<std::string> RegisterType(DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT16:
    case forge::v1::DTYPE_BFLOAT16:
    case forge::v1::DTYPE_FLOAT32: return std::string("float");
    default: return StorageType(dtype);
  }
}

int64_t ElementBytes(DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT64:
    case forge::v1::DTYPE_INT64: return 8;
    case forge::v1::DTYPE_FLOAT32:
    case forge::v1::DTYPE_INT32: return 4;
    case forge::v1::DTYPE_FLOAT16:
    case forge::v1::DTYPE_BFLOAT16:
    case forge::v1::DTYPE_INT16: return 2;
    case forge::v1::DTYPE_INT8:
    case forge::v1::DTYPE_UINT8:
    case forge::v1::DTYPE_BOOL: return 1;
    default: return 0;
  }
}

std::string LoadConversion(DType dtype, absl::string_view element) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT16: return absl::StrCat("forge_half_to_float(", element, ")");
    case forge::v1::DTYPE_BFLOAT16: return absl::StrCat("forge_bfloat16_to_float(", element, ")");
    default: return std::string(element);
  }
}

std::string StoreConversion(DType dtype, absl::string_view value) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT16: return absl::StrCat("forge_float_to_half(", value, ")");
    case forge::v1::DTYPE_BFLOAT16: return absl::StrCat("forge_float_to_bfloat16(", value, ")");
    default: return std::string(value);
  }
}

std::vector<std::string> VectorStore(DType dtype, const std::vector<std::string>& values,
                                     absl::string_view variable, absl::string_view address,
                                     absl::string_view condition) {
  const std::string guard = condition.empty() ? "" : absl::StrCat("if (", condition, ") ");
  const int width = static_cast<int>(values.size());
  const bool half = dtype == forge::v1::DTYPE_FLOAT16;
  const bool packed = (half || dtype == forge::v1::DTYPE_BFLOAT16) && width % 2 == 0;
  const std::string vector =
      packed ? absl::StrCat("ForgeVec<unsigned, ", width / 2, ">")
             : absl::StrCat("ForgeVec<", *StorageType(dtype), ", ", width, ">");
  std::vector<std::string> statements = {absl::StrCat(vector, " ", variable, ";")};
  if (packed) {
    for (int pair = 0; pair < width / 2; ++pair) {
      statements.push_back(absl::StrCat(variable, ".v[", pair, "] = ",
                                        half ? "forge_pack_half2(" : "forge_pack_bfloat162(",
                                        values[2 * pair], ", ", values[2 * pair + 1], ");"));
    }
  } else {
    for (int v = 0; v < width; ++v) {
      statements.push_back(
          absl::StrCat(variable, ".v[", v, "] = ", StoreConversion(dtype, values[v]), ";"));
    }
  }
  statements.push_back(
      absl::StrCat(guard, "*reinterpret_cast<", vector, "*>(", address, ") = ", variable, ";"));
  return statements;
}

int64_t NumElements(const google::protobuf::RepeatedField<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t size : shape) count *= size;
  return count;
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * std::max<int64_t>(shape[d + 1], 1);
  }
  return strides;
}

bool IsContiguous(const forge::v1::TensorSpec& spec) {
  std::vector<int64_t> shape(spec.shape().begin(), spec.shape().end());
  std::vector<int64_t> expected = ContiguousStrides(shape);
  if (spec.strides_size() != spec.shape_size()) return false;
  for (int d = 0; d < spec.shape_size(); ++d) {
    if (spec.shape(d) > 1 && spec.strides(d) != expected[d]) return false;
  }
  return true;
}

int64_t MaxOffset(const forge::v1::TensorSpec& spec) {
  int64_t offset = 0;
  for (int d = 0; d < spec.shape_size() && d < spec.strides_size(); ++d) {
    if (spec.shape(d) == 0) return 0;
    offset += (spec.shape(d) - 1) * std::abs(spec.strides(d));
  }
  return offset;
}

// kernel_prelude.cuh's text, embedded at build time (kernel_prelude_source.cc.in).
extern const char kKernelPrelude[];

absl::string_view KernelPrelude() { return kKernelPrelude; }

// ---- GroupView ----

absl::StatusOr<GroupView> GroupView::Create(const forge::v1::KernelTask& task) {
  GroupView view(task);
  const forge::v1::Graph& group = task.group();
  for (const forge::v1::Value& value : group.values()) view.values_[value.name()] = &value;
  for (int i = 0; i < group.inputs_size(); ++i) {
    const std::string& name = group.inputs(i).value_name();
    if (!view.values_.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("task ", task.digest(), ": group input '", name, "' has no Value"));
    }
    view.input_positions_[name] = i;
  }
  for (const Node& node : group.nodes()) {
    for (const std::string& output : node.outputs()) {
      if (!view.values_.contains(output)) {
        return absl::InvalidArgumentError(absl::StrCat("task ", task.digest(), ": output '", output,
                                                       "' of ", DescribeNode(node),
                                                       " has no Value"));
      }
      view.producers_[output] = &node;
    }
  }
  for (const forge::v1::GraphOutput& output : group.outputs()) {
    if (!view.values_.contains(output.value_name())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task ", task.digest(), ": group output '", output.value_name(), "' has no Value"));
    }
  }
  if (task.inputs_size() != group.inputs_size() || task.outputs_size() != group.outputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", task.digest(), ": ", task.inputs_size(), " input and ", task.outputs_size(),
        " output TensorSpecs for a group of ", group.inputs_size(), " inputs and ",
        group.outputs_size(), " outputs"));
  }
  return view;
}

const forge::v1::Value* GroupView::FindValue(absl::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : it->second;
}

const Node* GroupView::Producer(absl::string_view name) const {
  auto it = producers_.find(name);
  return it == producers_.end() ? nullptr : it->second;
}

int GroupView::InputPosition(absl::string_view name) const {
  auto it = input_positions_.find(name);
  return it == input_positions_.end() ? -1 : it->second;
}

const forge::v1::TensorSpec& GroupView::InputSpec(int position) const {
  return task_->inputs(position);
}

const forge::v1::TensorSpec& GroupView::OutputSpec(int position) const {
  return task_->outputs(position);
}

std::vector<int64_t> GroupView::Shape(absl::string_view name) const {
  const forge::v1::Value* value = FindValue(name);
  if (value == nullptr) return {};
  return {value->tensor().shape().begin(), value->tensor().shape().end()};
}

DType GroupView::DType(absl::string_view name) const {
  const forge::v1::Value* value = FindValue(name);
  return value == nullptr ? forge::v1::DTYPE_UNSPECIFIED : value->tensor().dtype();
}

bool IsPointwiseOp(const Node& node) {
  const ops::OpEntry* entry = ops::FindOp(node);
  return entry != nullptr &&
         (entry->form == ElementForm::kCompute || entry->form == ElementForm::kCopy);
}

bool IsViewOp(const Node& node) {
  const ops::OpEntry* entry = ops::FindOp(node);
  return entry != nullptr && IsIndexMap(entry->form);
}

bool IsGlueOp(const Node& node) {
  const ops::OpEntry* entry = ops::FindOp(node);
  return entry != nullptr && IsGlueForm(entry->form);
}

bool IsElementOp(const Node& node) {
  return IsPointwiseOp(node) || IsViewOp(node) || IsGlueOp(node);
}

Index RowMajorCoordinates(const std::string& linear, const std::vector<int64_t>& shape) {
  const std::vector<int64_t> strides = ContiguousStrides(shape);
  Index coordinates(shape.size(), "0");
  bool outermost = true;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::string component =
        strides[d] == 1 ? linear : absl::StrCat("(", linear, " / ", strides[d], ")");
    if (!outermost) component = absl::StrCat("(", component, " % ", shape[d], ")");
    coordinates[d] = component;
    outermost = false;
  }
  return coordinates;
}

std::string TensorArgument(const forge::v1::Node& node, absl::string_view name) {
  const forge::v1::Argument* argument = FindArgument(node, name);
  if (argument == nullptr) return "";
  if (argument->has_tensor()) return argument->tensor();
  if (argument->has_optional_tensor()) return argument->optional_tensor().value_name();
  return "";
}

std::string ElementOffset(const Index& index, const forge::v1::TensorSpec& spec,
                          ElementEmitter& emitter) {
  std::vector<std::string> terms;
  for (int d = 0; d < spec.shape_size(); ++d) {
    if (spec.shape(d) == 1 || spec.strides(d) == 0 || index[d] == "0") continue;
    const std::string component = emitter.BindIndex(index[d]);
    terms.push_back(spec.strides(d) == 1 ? component
                                         : absl::StrCat(component, " * ", spec.strides(d)));
  }
  return terms.empty() ? "0" : absl::StrJoin(terms, " + ");
}

Term LoadInputElement(ElementEmitter& emitter, int position, const forge::v1::TensorSpec& spec,
                      const Index& index, const VectorLane* vector) {
  const std::string storage = *StorageType(spec.dtype());
  std::string loaded;
  if (vector != nullptr) {
    auto [it, inserted] = vector->loaded->try_emplace(position, "");
    if (inserted) {
      it->second = emitter.NewVariable();
      const std::string type = absl::StrCat("ForgeVec<", storage, ", ", vector->width, ">");
      emitter.AddStatement(absl::StrCat("const ", type, " ", it->second,
                                        " = *reinterpret_cast<const ", type, "*>(in", position,
                                        " + ", ElementOffset(vector->first, spec, emitter), ");"));
    }
    loaded = LoadConversion(spec.dtype(), absl::StrCat(it->second, ".v[", vector->lane, "]"));
  } else {
    loaded = LoadConversion(
        spec.dtype(), absl::StrCat("in", position, "[", ElementOffset(index, spec, emitter), "]"));
  }
  const std::string variable = emitter.NewVariable();
  emitter.AddStatement(
      absl::StrCat("const ", *RegisterType(spec.dtype()), " ", variable, " = ", loaded, ";"));
  return Term{variable, spec.dtype()};
}

void StoreOutputLanes(ElementEmitter& emitter, int position, const forge::v1::TensorSpec& spec,
                      const std::vector<Term>& lanes, const std::vector<Index>& indices,
                      bool vector) {
  const std::string reg = *RegisterType(spec.dtype());
  std::vector<std::string> values;
  for (const Term& lane : lanes) {
    values.push_back(spec.dtype() == forge::v1::DTYPE_BOOL
                         ? absl::StrCat("(", lane.expr, " != 0)")
                         : absl::StrCat("((", reg, ")", lane.expr, ")"));
  }
  if (vector) {
    const std::string address =
        absl::StrCat("out", position, " + ", ElementOffset(indices.front(), spec, emitter));
    for (std::string& statement :
         VectorStore(spec.dtype(), values, emitter.NewVariable(), address, "")) {
      emitter.AddStatement(std::move(statement));
    }
    return;
  }
  for (size_t lane = 0; lane < values.size(); ++lane) {
    emitter.AddStatement(absl::StrCat("out", position, "[",
                                      ElementOffset(indices[lane], spec, emitter), "] = ",
                                      StoreConversion(spec.dtype(), values[lane]), ";"));
  }
}

// ---- ElementEmitter ----

ElementEmitter::ElementEmitter(const GroupView& view, std::string index_type, std::string prefix,
                               Resolver resolver)
    : view_(view),
      index_type_(std::move(index_type)),
      prefix_(std::move(prefix)),
      resolver_(std::move(resolver)) {}

std::string ElementEmitter::NewVariable() { return absl::StrCat(prefix_, next_variable_++); }

std::string ElementEmitter::BindIndex(const std::string& component) {
  if (IsIdentifierOrLiteral(component)) return component;
  auto it = indices_.find(component);
  if (it != indices_.end()) return it->second;
  std::string variable = NewVariable();
  AddStatement(absl::StrCat("const ", index_type_, " ", variable, " = ", component, ";"));
  indices_[component] = variable;
  return variable;
}

std::optional<std::string> ElementEmitter::BoundComponent(absl::string_view variable) const {
  for (const auto& [component, bound] : indices_) {
    if (bound == variable) return component;
  }
  return std::nullopt;
}

Index ElementEmitter::Broadcast(const Index& index, const std::vector<int64_t>& from_shape) {
  Index result(from_shape.size());
  const size_t skipped = index.size() - from_shape.size();
  for (size_t d = 0; d < from_shape.size(); ++d) {
    result[d] = from_shape[d] == 1 ? "0" : index[skipped + d];
  }
  return result;
}

absl::StatusOr<Term> ElementEmitter::Emit(absl::string_view value, const Index& index) {
  const std::string key = absl::StrCat(value, "@", Join(index));
  if (auto it = computed_.find(key); it != computed_.end()) return it->second;
  if (depth_ >= kMaxEmitDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "value '", value, "' of task ", view_.task().digest(), " is more than ", kMaxEmitDepth,
        " operations deep; the generators do not fuse chains that long"));
  }
  ++depth_;
  absl::StatusOr<Term> term = EmitUncached(value, index);
  --depth_;
  if (term.ok()) computed_[key] = *term;
  return term;
}

absl::StatusOr<Term> ElementEmitter::EmitUncached(absl::string_view value, const Index& index) {
  absl::StatusOr<std::optional<Term>> provided = resolver_(value, index, *this);
  if (!provided.ok()) return provided.status();
  Term term;
  if (provided->has_value()) {
    term = **provided;
  } else {
    const Node* producer = view_.Producer(value);
    if (producer == nullptr) {
      return absl::InternalError(absl::StrCat("value '", value, "' of task ",
                                              view_.task().digest(),
                                              " has no producer and was not provided"));
    }
    const ops::OpEntry* entry = ops::FindOp(*producer);
    const ElementForm form = entry == nullptr ? ElementForm::kNone : entry->form;
    absl::StatusOr<Term> emitted;
    if (form == ElementForm::kCopy || IsIndexMap(form)) {
      emitted = EmitView(*producer, form, value, index);
    } else if (form == ElementForm::kCompute) {
      emitted = EmitPointwise(*producer, entry->emitter, value, index);
    } else if (IsGlueForm(form)) {
      emitted = EmitGlue(view_, *producer, form, index, *this);
    } else {
      return absl::UnimplementedError(absl::StrCat(DescribeNode(*producer),
                                                   " is not an elementwise op the generator fuses"));
    }
    if (!emitted.ok()) return emitted.status();
    term = *std::move(emitted);
  }
  return term;
}

absl::StatusOr<Term> ElementEmitter::EmitChoice(DType dtype,
                                                const std::vector<Alternative>& alternatives) {
  absl::StatusOr<std::string> type = RegisterType(dtype);
  if (!type.ok()) return type.status();
  if (alternatives.empty()) return absl::InternalError("EmitChoice of no alternatives");
  const std::string variable = NewVariable();
  AddStatement(absl::StrCat(*type, " ", variable, ";"));
  for (size_t a = 0; a < alternatives.size(); ++a) {
    const bool last = a + 1 == alternatives.size();
    // What the alternative emits is moved into its block; its variables stay there.
    const size_t first_statement = statements_.size();
    std::map<std::string, Term> computed = computed_;
    std::map<std::string, std::string> indices = indices_;
    ++choice_depth_;
    absl::StatusOr<Term> term = alternatives[a].emit();
    --choice_depth_;
    if (!term.ok()) return term.status();
    std::vector<std::string> body(statements_.begin() + first_statement, statements_.end());
    statements_.resize(first_statement);
    computed_ = std::move(computed);
    indices_ = std::move(indices);
    const std::string opening =
        alternatives.size() == 1 ? "{"
        : last                   ? "} else {"
                                 : absl::StrCat(a == 0 ? "" : "} else ", "if (",
                                                alternatives[a].condition, ") {");
    AddStatement(opening);
    for (const std::string& statement : body) AddStatement(absl::StrCat("  ", statement));
    const std::string converted = dtype == forge::v1::DTYPE_BOOL
                                      ? absl::StrCat("(", term->expr, " != 0)")
                                      : absl::StrCat("(", *type, ")", term->expr);
    AddStatement(absl::StrCat("  ", variable, " = ", converted, ";"));
  }
  AddStatement("}");
  return Term{variable, dtype};
}

absl::StatusOr<Term> ElementEmitter::EmitView(const Node& node, ElementForm form,
                                              absl::string_view value,
                                              const Index& index) {
  const Argument* self = FindArgument(node, "self");
  if (self == nullptr || self->value_case() != Argument::kTensor) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeNode(node), " has no tensor 'self'"));
  }
  const std::string& source = self->tensor();
  const std::vector<int64_t> from = view_.Shape(source);
  absl::StatusOr<Index> mapped;
  switch (form) {
    case ElementForm::kCopy: mapped = index; break;
    case ElementForm::kPermute: mapped = PermutedIndex(node, index, from.size()); break;
    case ElementForm::kTranspose:
    case ElementForm::kMatrixTranspose: mapped = TransposedIndex(node, form, index); break;
    case ElementForm::kExpand: mapped = Broadcast(index, from); break;
    case ElementForm::kSlice: mapped = SlicedIndex(node, index, from, *this); break;
    case ElementForm::kSelect: mapped = SelectedIndex(node, index, from); break;
    case ElementForm::kSplit: mapped = SplitIndex(node, value, index, view_, *this); break;
    case ElementForm::kUnbind: mapped = UnboundIndex(node, value, index); break;
    case ElementForm::kReshape:
      mapped = ReshapedIndex(index, from, view_.Shape(node.outputs(0)), *this);
      break;
    default:  // kNone, kCompute and the glue forms
      return absl::InternalError(absl::StrCat(DescribeNode(node), " is not a view"));
  }
  if (!mapped.ok()) return mapped.status();
  return Emit(source, *mapped);
}

absl::StatusOr<Term> ElementEmitter::EmitPointwise(const Node& node, ops::PointwiseEmitter emitter,
                                                   absl::string_view value, const Index& index) {
  const DType out_dtype = view_.DType(value);
  absl::StatusOr<std::string> out_type = RegisterType(out_dtype);
  if (!out_type.ok()) {
    return absl::UnimplementedError(
        absl::StrCat(DescribeNode(node), ": ", out_type.status().message()));
  }
  // A tensor operand is its element at the op's index, broadcast into the operand's shape.
  ops::PointwiseCall call(
      node, out_dtype, *out_type,
      [&](const std::string& tensor) -> absl::StatusOr<ops::Operand> {
        absl::StatusOr<Term> term = Emit(tensor, Broadcast(index, view_.Shape(tensor)));
        if (!term.ok()) return term.status();
        return ops::Operand{term->expr, term->dtype};
      });
  absl::StatusOr<std::string> expr = emitter(call);
  if (!expr.ok()) return expr.status();
  const std::string variable = NewVariable();
  AddStatement(absl::StrCat("const ", *out_type, " ", variable, " = ", *expr, ";"));
  return Term{variable, out_dtype};
}

}  // namespace forge::codegen
