#include "compiler/codegen/glue_forms.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace forge::codegen {
namespace {

using forge::v1::Argument;
using forge::v1::DType;
using forge::v1::Node;
using ops::ElementForm;

// What a glue form's emitter is handed: the node, its output's shape and dtype, the index and the
// emitter that reads its operands.
struct GlueCall {
  const GroupView& view;
  const Node& node;
  const std::vector<int64_t>& shape;  // of the output
  DType dtype;                        // of the output
  const Index& index;
  ElementEmitter& emitter;

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(DescribeNode(node), ": ", what));
  }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  // The tensor argument `name`.
  absl::StatusOr<std::string> Tensor(absl::string_view name) const {
    const Argument* argument = FindArgument(node, name);
    if (argument == nullptr || argument->value_case() != Argument::kTensor) {
      return Error(absl::StrCat("no tensor '", name, "'"));
    }
    return argument->tensor();
  }
  // The int-list argument `name`; empty when it is absent.
  std::vector<int64_t> Ints(absl::string_view name) const {
    const Argument* argument = FindArgument(node, name);
    if (argument == nullptr || argument->value_case() != Argument::kInts) return {};
    return {argument->ints().values().begin(), argument->ints().values().end()};
  }
  // `dim` of `rank` dims counted from the front; an error outside [-rank, rank).
  absl::StatusOr<int64_t> Dim(int64_t dim, int64_t dims) const {
    if (dim < -dims || dim >= dims) {
      return Error(absl::StrCat("dim ", dim, " is out of range for ", dims, " dims"));
    }
    return NormalizeDim(dim, dims);
  }
  // An index component bound to a variable: `expr` (a C++ expression).
  std::string Bind(const std::string& expr) const { return emitter.BindIndex(expr); }
  // An element of an index tensor as an index component.
  absl::StatusOr<std::string> IndexElement(const std::string& tensor, const Index& at) const {
    absl::StatusOr<Term> term = emitter.Emit(tensor, at);
    if (!term.ok()) return term.status();
    return Bind(absl::StrCat("((", emitter.index_type(), ")", term->expr, ")"));
  }
};

using GlueEmitter = absl::StatusOr<Term> (*)(const GlueCall& call);

// The tensors of a list argument `name`.
absl::StatusOr<std::vector<std::string>> TensorList(const GlueCall& call, absl::string_view name) {
  const Argument* argument = FindArgument(call.node, name);
  if (argument == nullptr || argument->value_case() != Argument::kTensors ||
      argument->tensors().value_names().empty()) {
    return call.Error(absl::StrCat("no tensor list '", name, "'"));
  }
  return std::vector<std::string>(argument->tensors().value_names().begin(),
                                  argument->tensors().value_names().end());
}

absl::StatusOr<Term> Cat(const GlueCall& call) {
  absl::StatusOr<std::vector<std::string>> inputs = TensorList(call, "tensors");
  if (!inputs.ok()) return inputs.status();
  absl::StatusOr<int64_t> dim = call.Dim(IntArgument(call.node, "dim", 0), call.rank());
  if (!dim.ok()) return dim.status();
  std::vector<ElementEmitter::Alternative> alternatives;
  int64_t start = 0;
  for (const std::string& input : *inputs) {
    const std::vector<int64_t> shape = call.view.Shape(input);
    if (shape == std::vector<int64_t>{0} && call.rank() != 1) continue;  // legacy empty input
    if (static_cast<int64_t>(shape.size()) != call.rank()) {
      return call.Error(absl::StrCat("input '", input, "' has ", shape.size(),
                                     " dims, the output ", call.rank()));
    }
    if (shape[*dim] == 0) continue;
    const std::string i = call.index[*dim];
    alternatives.push_back(
        {absl::StrCat(i, " < ", start + shape[*dim]), [&call, input, start, i, d = *dim] {
           Index at = call.index;
           if (start != 0) at[d] = call.Bind(absl::StrCat("(", i, " - ", start, ")"));
           return call.emitter.Emit(input, at);
         }});
    start += shape[*dim];
  }
  if (start != call.shape[*dim]) {
    return call.Error(absl::StrCat("inputs cover ", start, " of the output's ", call.shape[*dim],
                                   " positions along dim ", *dim));
  }
  return call.emitter.EmitChoice(call.dtype, alternatives);
}

absl::StatusOr<Term> Stack(const GlueCall& call) {
  absl::StatusOr<std::vector<std::string>> inputs = TensorList(call, "tensors");
  if (!inputs.ok()) return inputs.status();
  absl::StatusOr<int64_t> dim = call.Dim(IntArgument(call.node, "dim", 0), call.rank());
  if (!dim.ok()) return dim.status();
  if (static_cast<int64_t>(inputs->size()) != call.shape[*dim]) {
    return call.Error(absl::StrCat(inputs->size(), " inputs for ", call.shape[*dim],
                                   " positions along dim ", *dim));
  }
  Index at = call.index;
  at.erase(at.begin() + *dim);
  std::vector<ElementEmitter::Alternative> alternatives;
  for (size_t k = 0; k < inputs->size(); ++k) {
    if (call.view.Shape((*inputs)[k]).size() != at.size()) {
      return call.Error(absl::StrCat("input '", (*inputs)[k], "' is not of ", at.size(), " dims"));
    }
    alternatives.push_back({absl::StrCat(call.index[*dim], " == ", k),
                            [&call, &at, input = (*inputs)[k]] { return call.emitter.Emit(input, at); }});
  }
  return call.emitter.EmitChoice(call.dtype, alternatives);
}

absl::StatusOr<Term> Flip(const GlueCall& call) {
  absl::StatusOr<std::string> self = call.Tensor("self");
  if (!self.ok()) return self.status();
  Index at = call.index;
  for (int64_t dim : call.Ints("dims")) {
    absl::StatusOr<int64_t> d = call.Dim(dim, call.rank());
    if (!d.ok()) return d.status();
    if (call.shape[*d] > 1) {
      at[*d] = call.Bind(absl::StrCat("(", call.shape[*d] - 1, " - ", call.index[*d], ")"));
    }
  }
  return call.emitter.Emit(*self, at);
}

// `i` rotated back by `shift` among `size` positions: (i - shift) mod size.
std::string Rolled(const GlueCall& call, const std::string& i, int64_t shift, int64_t size) {
  const int64_t back = size - ((shift % size) + size) % size;
  return back == size ? i : call.Bind(absl::StrCat("((", i, " + ", back, ") % ", size, ")"));
}

// The row-major position of `index` in a tensor of `shape`, bound.
std::string LinearPosition(const GlueCall& call, const Index& index,
                           const std::vector<int64_t>& shape) {
  const std::vector<int64_t> strides = ContiguousStrides(shape);
  std::vector<std::string> terms;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1) terms.push_back(absl::StrCat(index[d], " * ", strides[d]));
  }
  return call.Bind(terms.empty() ? "0" : absl::StrCat("(", absl::StrJoin(terms, " + "), ")"));
}

absl::StatusOr<Term> Roll(const GlueCall& call) {
  absl::StatusOr<std::string> self = call.Tensor("self");
  if (!self.ok()) return self.status();
  const std::vector<int64_t> shifts = call.Ints("shifts");
  const std::vector<int64_t> dims = call.Ints("dims");
  int64_t elements = 1;
  for (int64_t size : call.shape) elements *= size;
  if (elements == 0) return call.emitter.Emit(*self, call.index);
  if (dims.empty()) {
    if (shifts.size() != 1) return call.Error("a roll without dims takes one shift");
    const std::string rolled =
        Rolled(call, LinearPosition(call, call.index, call.shape), shifts[0], elements);
    return call.emitter.Emit(*self, RowMajorCoordinates(rolled, call.shape));
  }
  if (dims.size() != shifts.size()) return call.Error("shifts and dims differ in length");
  Index at = call.index;
  for (size_t k = 0; k < dims.size(); ++k) {
    absl::StatusOr<int64_t> d = call.Dim(dims[k], call.rank());
    if (!d.ok()) return d.status();
    at[*d] = Rolled(call, at[*d], shifts[k], call.shape[*d]);
  }
  return call.emitter.Emit(*self, at);
}

absl::StatusOr<Term> Repeat(const GlueCall& call) {
  absl::StatusOr<std::string> self = call.Tensor("self");
  if (!self.ok()) return self.status();
  const std::vector<int64_t> from = call.view.Shape(*self);
  const std::vector<int64_t> repeats = call.Ints("repeats");
  if (repeats.size() != call.shape.size() || from.size() > repeats.size()) {
    return call.Error("repeats must name every dim of the output and cover the input's");
  }
  const size_t lead = repeats.size() - from.size();
  Index at(from.size(), "0");
  for (size_t d = 0; d < from.size(); ++d) {
    const std::string& i = call.index[lead + d];
    if (from[d] == 1) continue;
    at[d] = repeats[lead + d] == 1 ? i : call.Bind(absl::StrCat("(", i, " % ", from[d], ")"));
  }
  return call.emitter.Emit(*self, at);
}

absl::StatusOr<Term> RepeatInterleave(const GlueCall& call) {
  absl::StatusOr<std::string> self = call.Tensor("self");
  if (!self.ok()) return self.status();
  const Argument* repeats = FindArgument(call.node, "repeats");
  if (repeats == nullptr || repeats->value_case() != Argument::kIntValue) {
    return absl::UnimplementedError(absl::StrCat(
        DescribeNode(call.node), ": the generator reads repeat_interleave's int repeats only"));
  }
  const int64_t times = repeats->int_value();
  if (times <= 0) return call.Error("repeats must be positive");
  const std::vector<int64_t> from = call.view.Shape(*self);
  const Argument* dim = FindArgument(call.node, "dim");
  if (dim == nullptr || dim->value_case() != Argument::kIntValue) {  // the flattened tensor
    if (call.rank() != 1) return call.Error("a repeat_interleave without dim is 1-d");
    const std::string position = call.Bind(absl::StrCat("(", call.index[0], " / ", times, ")"));
    return call.emitter.Emit(*self, RowMajorCoordinates(position, from));
  }
  absl::StatusOr<int64_t> d = call.Dim(dim->int_value(), call.rank());
  if (!d.ok()) return d.status();
  Index at = call.index;
  if (times != 1) at[*d] = call.Bind(absl::StrCat("(", at[*d], " / ", times, ")"));
  return call.emitter.Emit(*self, at);
}

// triu (`upper`) or tril: `self` where the element's column - row is on the kept side of
// `diagonal`, else 0.
absl::StatusOr<Term> Triangle(const GlueCall& call, bool upper) {
  absl::StatusOr<std::string> self = call.Tensor("self");
  if (!self.ok()) return self.status();
  if (call.rank() < 2) return call.Error("needs a matrix or a batch of them");
  absl::StatusOr<std::string> type = RegisterType(call.dtype);
  if (!type.ok()) return type.status();
  absl::StatusOr<Term> x = call.emitter.Emit(*self, call.index);
  if (!x.ok()) return x.status();
  const std::string& row = call.index[call.rank() - 2];
  const std::string& column = call.index[call.rank() - 1];
  const std::string variable = call.emitter.NewVariable();
  call.emitter.AddStatement(absl::StrCat(
      "const ", *type, " ", variable, " = (", column, " - ", row, upper ? " >= " : " <= ",
      IntArgument(call.node, "diagonal", 0), ") ? (", *type, ")", x->expr, " : (", *type,
      ")0;"));
  return Term{variable, call.dtype};
}
absl::StatusOr<Term> Triu(const GlueCall& call) { return Triangle(call, /*upper=*/true); }
absl::StatusOr<Term> Tril(const GlueCall& call) { return Triangle(call, /*upper=*/false); }

// A scalar argument of arange as a C++ literal of `type`; `fallback` when absent.
absl::StatusOr<std::string> ScalarLiteral(const GlueCall& call, absl::string_view name,
                                          absl::string_view type, int64_t fallback) {
  const Argument* argument = FindArgument(call.node, name);
  if (argument == nullptr) return absl::StrCat("((", type, ")", fallback, ")");
  switch (argument->value_case()) {
    case Argument::kIntValue: return absl::StrCat("((", type, ")", argument->int_value(), "LL)");
    case Argument::kFloatValue:
      return absl::StrCat("((", type, ")", absl::StrFormat("%.17g", argument->float_value()), ")");
    default: return call.Error(absl::StrCat("'", name, "' is not a number"));
  }
}

absl::StatusOr<Term> Arange(const GlueCall& call) {
  if (call.rank() != 1) return call.Error("arange is 1-d");
  absl::StatusOr<std::string> type = RegisterType(call.dtype);
  if (!type.ok()) return type.status();
  const std::string compute = ops::IsFloatingDType(call.dtype) ? "double" : "long long";
  absl::StatusOr<std::string> start = ScalarLiteral(call, "start", compute, 0);
  if (!start.ok()) return start.status();
  absl::StatusOr<std::string> step = ScalarLiteral(call, "step", compute, 1);
  if (!step.ok()) return step.status();
  const std::string variable = call.emitter.NewVariable();
  call.emitter.AddStatement(absl::StrCat("const ", *type, " ", variable, " = (", *type, ")(",
                                         *start, " + (", compute, ")", call.index[0], " * ",
                                         *step, ");"));
  return Term{variable, call.dtype};
}

// index_select's and gather's operands: `self`, `index` and `dim`, counted from the front.
struct IndexedRead {
  std::string self;
  std::string index;
  int64_t dim = 0;
};

absl::StatusOr<IndexedRead> IndexedReadOf(const GlueCall& call) {
  absl::StatusOr<std::string> self = call.Tensor("self");
  if (!self.ok()) return self.status();
  absl::StatusOr<std::string> index = call.Tensor("index");
  if (!index.ok()) return index.status();
  absl::StatusOr<int64_t> dim = call.Dim(IntArgument(call.node, "dim", 0), call.rank());
  if (!dim.ok()) return dim.status();
  return IndexedRead{*self, *index, *dim};
}

// `self` at `index`'s element at `at` (the index tensor's own index) along the read's dim.
absl::StatusOr<Term> ReadThroughIndex(const GlueCall& call, const IndexedRead& read,
                                      const Index& at) {
  absl::StatusOr<std::string> position = call.IndexElement(read.index, at);
  if (!position.ok()) return position.status();
  Index mapped = call.index;
  mapped[read.dim] = *position;
  return call.emitter.Emit(read.self, mapped);
}

absl::StatusOr<Term> IndexSelect(const GlueCall& call) {
  absl::StatusOr<IndexedRead> read = IndexedReadOf(call);
  if (!read.ok()) return read.status();
  const size_t index_rank = call.view.Shape(read->index).size();
  if (index_rank > 1) return call.Error("index has more than one dim");
  return ReadThroughIndex(call, *read,
                          index_rank == 0 ? Index{} : Index{call.index[read->dim]});
}

absl::StatusOr<Term> Gather(const GlueCall& call) {
  absl::StatusOr<IndexedRead> read = IndexedReadOf(call);
  if (!read.ok()) return read.status();
  if (call.view.Shape(read->self).size() != call.shape.size()) {
    return call.Error("self and index differ in rank");
  }
  return ReadThroughIndex(call, *read, call.index);
}

absl::StatusOr<Term> Embedding(const GlueCall& call) {
  absl::StatusOr<std::string> weight = call.Tensor("weight");
  if (!weight.ok()) return weight.status();
  absl::StatusOr<std::string> indices = call.Tensor("indices");
  if (!indices.ok()) return indices.status();
  if (call.view.Shape(*weight).size() != 2 ||
      call.view.Shape(*indices).size() + 1 != call.shape.size()) {
    return call.Error("needs a 2-d weight and an output of the indices' dims plus one");
  }
  absl::StatusOr<std::string> row =
      call.IndexElement(*indices, Index(call.index.begin(), call.index.end() - 1));
  if (!row.ok()) return row.status();
  return call.emitter.Emit(*weight, Index{*row, call.index.back()});
}

// The glue forms and their emitters.
constexpr std::pair<ElementForm, GlueEmitter> kGlueForms[] = {
    {ElementForm::kCat, Cat},
    {ElementForm::kStack, Stack},
    {ElementForm::kFlip, Flip},
    {ElementForm::kRoll, Roll},
    {ElementForm::kRepeat, Repeat},
    {ElementForm::kRepeatInterleave, RepeatInterleave},
    {ElementForm::kTriu, Triu},
    {ElementForm::kTril, Tril},
    {ElementForm::kArange, Arange},
    {ElementForm::kIndexSelect, IndexSelect},
    {ElementForm::kGather, Gather},
    {ElementForm::kEmbedding, Embedding},
};

GlueEmitter FindGlue(ElementForm form) {
  for (const auto& [glue_form, emitter] : kGlueForms) {
    if (glue_form == form) return emitter;
  }
  return nullptr;
}

}  // namespace

int64_t NormalizeDim(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }

int64_t IntArgument(const Node& node, absl::string_view name, int64_t fallback) {
  const Argument* argument = FindArgument(node, name);
  return argument != nullptr && argument->value_case() == Argument::kIntValue
             ? argument->int_value()
             : fallback;
}

bool IsGlueForm(ElementForm form) { return FindGlue(form) != nullptr; }

absl::StatusOr<Term> EmitGlue(const GroupView& view, const Node& node, ElementForm form,
                              const Index& index, ElementEmitter& emitter) {
  const GlueEmitter glue = FindGlue(form);
  if (glue == nullptr || node.outputs_size() == 0) {
    return absl::InternalError(absl::StrCat(DescribeNode(node), " is not a glue op"));
  }
  const std::vector<int64_t> shape = view.Shape(node.outputs(0));
  if (shape.size() != index.size()) {
    return absl::InternalError(absl::StrCat(DescribeNode(node), " read at an index of ",
                                            index.size(), " dims; its output has ", shape.size()));
  }
  return glue(GlueCall{view, node, shape, view.DType(node.outputs(0)), index, emitter});
}

}  // namespace forge::codegen
