#include "compiler/graph/attention_pattern.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "compiler/graph/op_classes.h"
#include "compiler/ops/pointwise_call.h"

namespace forge::graph {
namespace {

using ::forge::v1::Graph;
using ::forge::v1::Node;
using ::forge::v1::TensorSpec;
using ::forge::ops::FindArgument;
using ::forge::ops::OpName;

bool IsMatmul(const Node& node) {
  return node.op() == "aten::matmul" || node.op() == "aten::bmm";
}
bool IsSoftmax(const Node& node) {
  return node.op() == "aten::softmax" || node.op() == "aten::_softmax" ||
         node.op() == "aten::_safe_softmax";
}

// A band of a [rows, columns] bool tensor: true exactly where column - row >= threshold (kAbove)
// or <= threshold (kBelow), as triu / tril of ones make it.
struct Band {
  enum Side { kAbove, kBelow } side;
  std::int64_t threshold;
  bool operator==(const Band& other) const {
    return side == other.side && threshold == other.threshold;
  }
};

// The masks that fill masked scores with a constant: the op (its overload; empty: any), the kind,
// and the arguments that hold the mask and the fill (the scores are `self`).
struct FillMask {
  absl::string_view op;
  absl::string_view overload;
  AttentionMaskKind kind;
  absl::string_view mask;
  absl::string_view fill;
};
constexpr FillMask kFillMasks[] = {
    {"masked_fill", "", AttentionMaskKind::kMaskedFill, "mask", "value"},
    {"where", "self", AttentionMaskKind::kWhere, "condition", "other"},
};

const FillMask* FindFillMask(const Node& node) {
  for (const FillMask& mask : kFillMasks) {
    if (OpName(node) == mask.op && (mask.overload.empty() || node.overload() == mask.overload)) {
      return &mask;
    }
  }
  return nullptr;
}

class Matcher {
 public:
  explicit Matcher(const Graph& graph) : graph_(graph) {
    for (const auto& value : graph.values()) values_[value.name()] = &value.tensor();
    for (int i = 0; i < graph.nodes_size(); ++i) {
      const Node& node = graph.nodes(i);
      for (const std::string& output : node.outputs()) producer_[output] = i;
      for (const std::string& arg : TensorArgumentNames(node)) {
        std::vector<int>& readers = readers_[arg];
        if (readers.empty() || readers.back() != i) readers.push_back(i);
      }
    }
    for (const auto& output : graph.outputs()) outputs_.insert(output.value_name());
  }

  AttentionMatches FindAll() {
    AttentionMatches matches;
    absl::flat_hash_set<int> taken;
    for (int i = 0; i < graph_.nodes_size(); ++i) {
      if (!IsSoftmax(graph_.nodes(i))) continue;
      pattern_ = AttentionPattern{};
      members_.clear();
      absl::StatusOr<bool> matched = Match(i);
      if (!matched.ok()) {
        matches.near_misses.push_back({i, std::string(matched.status().message())});
        continue;
      }
      if (!*matched) continue;
      const bool overlaps = std::any_of(members_.begin(), members_.end(),
                                        [&](int node) { return taken.contains(node); });
      if (overlaps) continue;
      taken.insert(members_.begin(), members_.end());
      pattern_.nodes.assign(members_.begin(), members_.end());
      std::sort(pattern_.nodes.begin(), pattern_.nodes.end());
      matches.patterns.push_back(std::move(pattern_));
    }
    return matches;
  }

 private:
  const Node& node(int index) const { return graph_.nodes(index); }
  bool IsView(int index) const { return ClassifyNode(node(index)) == OpClass::kView; }

  int Producer(const std::string& value) const {
    auto it = producer_.find(value);
    return it == producer_.end() ? -1 : it->second;
  }
  const TensorSpec* Spec(const std::string& value) const {
    auto it = values_.find(value);
    return it == values_.end() ? nullptr : it->second;
  }
  static std::string TensorArg(const Node& node, absl::string_view name) {
    const forge::v1::Argument* argument = FindArgument(node, name);
    return argument != nullptr && argument->has_tensor() ? argument->tensor() : std::string();
  }
  static std::optional<std::int64_t> IntArg(const Node& node, absl::string_view name,
                                            std::optional<std::int64_t> fallback) {
    const forge::v1::Argument* argument = FindArgument(node, name);
    if (argument == nullptr) return fallback;
    if (argument->value_case() != forge::v1::Argument::kIntValue) return std::nullopt;
    return argument->int_value();
  }

  // The one node that reads `value` (views included), when it is not a graph output.
  int SoleReader(const std::string& value) const {
    if (outputs_.contains(value)) return -1;
    auto it = readers_.find(value);
    if (it == readers_.end() || it->second.size() != 1) return -1;
    return it->second.front();
  }

  // Whether every reader of `value`, through views, is a member, and it never escapes.
  bool ReadOnlyByMembers(const std::string& value) const {
    std::vector<std::string> pending = {value};
    while (!pending.empty()) {
      const std::string next = std::move(pending.back());
      pending.pop_back();
      if (outputs_.contains(next)) return false;
      auto it = readers_.find(next);
      if (it == readers_.end()) continue;
      for (int reader : it->second) {
        if (IsView(reader)) {
          for (const std::string& output : node(reader).outputs()) pending.push_back(output);
        } else if (!members_.contains(reader)) {
          return false;
        }
      }
    }
    return true;
  }

  // A constant scalar operand: a number argument, or a 0-d tensor made by full /
  // scalar_tensor (whose node joins the pattern when only it reads the tensor).
  std::optional<double> Constant(const Node& at, absl::string_view name, int* builder) const {
    const forge::v1::Argument* argument = FindArgument(at, name);
    *builder = -1;
    if (argument == nullptr) return std::nullopt;
    if (argument->value_case() == forge::v1::Argument::kFloatValue) return argument->float_value();
    if (argument->value_case() == forge::v1::Argument::kIntValue) {
      return static_cast<double>(argument->int_value());
    }
    if (!argument->has_tensor()) return std::nullopt;
    const int producer = Producer(argument->tensor());
    const TensorSpec* spec = Spec(argument->tensor());
    if (producer < 0 || spec == nullptr || spec->shape_size() != 0) return std::nullopt;
    const Node& made = node(producer);
    if (made.op() != "aten::full" && made.op() != "aten::scalar_tensor") return std::nullopt;
    int unused = -1;
    std::optional<double> value =
        Constant(made, made.op() == "aten::full" ? "fill_value" : "s", &unused);
    if (value) *builder = producer;
    return value;
  }

  // The view chain from `value` back to a non-view producer: the first value that a non-view
  // node makes (or a graph input), and whether the chain is exactly one transpose of the last
  // two dims of a tensor of rank `rank`.
  bool IsLastTwoTranspose(const Node& view, int rank) const {
    auto normalize = [rank](std::int64_t dim) { return dim < 0 ? dim + rank : dim; };
    if (view.op() == "aten::transpose") {
      std::optional<std::int64_t> dim0 = IntArg(view, "dim0", std::nullopt);
      std::optional<std::int64_t> dim1 = IntArg(view, "dim1", std::nullopt);
      if (!dim0 || !dim1) return false;
      const std::int64_t a = normalize(*dim0), b = normalize(*dim1);
      return std::min(a, b) == rank - 2 && std::max(a, b) == rank - 1;
    }
    if (view.op() == "aten::permute") {
      const forge::v1::Argument* dims = FindArgument(view, "dims");
      if (dims == nullptr || !dims->has_ints() || dims->ints().values_size() != rank) return false;
      for (int d = 0; d < rank; ++d) {
        const std::int64_t expected = d == rank - 2 ? rank - 1 : d == rank - 1 ? rank - 2 : d;
        if (normalize(dims->ints().values(d)) != expected) return false;
      }
      return true;
    }
    return view.op() == "aten::t" && rank == 2;
  }

  // GQA: the tensor `value` repeats each head of a smaller tensor r times along dim 1 of 4.
  // Returns (that tensor, r, the non-view nodes doing it), or nullopt.
  struct Repeat {
    std::string source;
    std::int64_t times = 1;
    std::vector<int> nodes;
  };
  std::optional<Repeat> HeadRepeat(const std::string& value) const {
    const TensorSpec* spec = Spec(value);
    const int producer = Producer(value);
    if (spec == nullptr || spec->shape_size() != 4 || producer < 0) return std::nullopt;
    const Node& made = node(producer);
    if (made.op() == "aten::repeat_interleave") {
      const forge::v1::Argument* repeats = FindArgument(made, "repeats");
      std::optional<std::int64_t> dim = IntArg(made, "dim", std::nullopt);
      if (repeats == nullptr || repeats->value_case() != forge::v1::Argument::kIntValue ||
          !dim || (*dim != 1 && *dim != -3)) {
        return std::nullopt;
      }
      return Repeat{TensorArg(made, "self"), repeats->int_value(), {producer}};
    }
    // reshape(expand(unsqueeze(X, 2), (b, h, r, s, d))): view(clone(expand(unsqueeze(X, 2)))).
    if (made.op() != "aten::_unsafe_view" && made.op() != "aten::view" &&
        made.op() != "aten::reshape") {
      return std::nullopt;
    }
    const int clone = Producer(TensorArg(made, "self"));
    if (clone < 0 || node(clone).op() != "aten::clone") return std::nullopt;
    const int expand = Producer(TensorArg(node(clone), "self"));
    if (expand < 0 || node(expand).op() != "aten::expand") return std::nullopt;
    const int unsqueeze = Producer(TensorArg(node(expand), "self"));
    if (unsqueeze < 0 || node(unsqueeze).op() != "aten::unsqueeze" ||
        IntArg(node(unsqueeze), "dim", std::nullopt) != 2) {
      return std::nullopt;
    }
    const std::string source = TensorArg(node(unsqueeze), "self");
    const TensorSpec* expanded = Spec(node(expand).outputs(0));
    const TensorSpec* base = Spec(source);
    if (expanded == nullptr || base == nullptr || expanded->shape_size() != 5 ||
        base->shape_size() != 4) {
      return std::nullopt;
    }
    const std::int64_t times = expanded->shape(2);
    if (base->shape(0) != spec->shape(0) || base->shape(1) * times != spec->shape(1) ||
        base->shape(2) != spec->shape(2) || base->shape(3) != spec->shape(3)) {
      return std::nullopt;
    }
    std::vector<int> nodes = {clone};
    if (!IsView(producer)) nodes.push_back(producer);
    return Repeat{source, times, std::move(nodes)};
  }

  // Whether `value` is a bool tensor of ones over `rows` x `columns` (a leading 1 allowed).
  bool IsAllTrue(const std::string& value) const {
    const int producer = Producer(value);
    if (producer < 0) return false;
    const Node& made = node(producer);
    if (made.op() == "aten::ones") return true;
    if (made.op() == "aten::full") {
      int unused = -1;
      std::optional<double> fill = Constant(made, "fill_value", &unused);
      const forge::v1::Argument* bool_fill = FindArgument(made, "fill_value");
      return (fill && *fill != 0) ||
             (bool_fill != nullptr && bool_fill->value_case() == forge::v1::Argument::kBoolValue &&
              bool_fill->bool_value());
    }
    return false;
  }

  // The band `value` is, over its last two dims, when the graph builds it from ones.
  std::optional<Band> BandOf(const std::string& value, std::vector<int>* builders) const {
    const int producer = Producer(value);
    if (producer < 0) return std::nullopt;
    const Node& made = node(producer);
    const std::string self = TensorArg(made, "self");
    if (made.op() == "aten::triu" || made.op() == "aten::tril") {
      if (!IsAllTrue(self)) return std::nullopt;
      std::optional<std::int64_t> diagonal = IntArg(made, "diagonal", 0);
      if (!diagonal) return std::nullopt;
      builders->push_back(producer);
      builders->push_back(Producer(self));
      return Band{made.op() == "aten::triu" ? Band::kAbove : Band::kBelow, *diagonal};
    }
    if (made.op() == "aten::bitwise_not" || made.op() == "aten::logical_not") {
      std::optional<Band> inner = BandOf(self, builders);
      if (!inner) return std::nullopt;
      builders->push_back(producer);
      // not(c - r >= t) is c - r <= t - 1; not(c - r <= t) is c - r >= t + 1.
      return inner->side == Band::kAbove ? Band{Band::kBelow, inner->threshold - 1}
                                         : Band{Band::kAbove, inner->threshold + 1};
    }
    return std::nullopt;
  }

  // Takes the mask's and the constants' builders into the pattern when nothing else reads them,
  // from the last back (so a builder read only by a taken builder is taken too).
  void TakeBuilders(std::vector<int> builders) {
    std::sort(builders.begin(), builders.end(), std::greater<int>());
    for (int builder : builders) {
      if (builder < 0) continue;
      bool only_members = true;
      for (const std::string& output : node(builder).outputs()) {
        only_members = only_members && ReadOnlyByMembers(output);
      }
      if (only_members) members_.insert(builder);
    }
  }

  // Matches the pattern at softmax `index`: true when it matched (pattern_, members_), false when
  // the softmax is not of a matmul, an error (the near miss's reason) otherwise.
  absl::StatusOr<bool> Match(int index) {
    const Node& softmax = node(index);
    const std::string input = TensorArg(softmax, "self");
    // Back from the softmax: at most a scale and a mask, then the matmul.
    std::vector<int> chain;     // the chain's nodes from the softmax back
    std::vector<int> builders;  // of the scale's and the fill's 0-d tensors, and of the mask
    std::string current = input;
    int matmul = -1;
    for (int step = 0; step < 3 && matmul < 0; ++step) {
      const int producer = Producer(current);
      if (producer < 0) return false;
      const Node& made = node(producer);
      if (IsMatmul(made)) {
        matmul = producer;
        break;
      }
      const absl::string_view op = OpName(made);
      int builder = -1;
      if ((op == "mul" || op == "div") && !pattern_.has_scale) {
        std::optional<double> constant = Constant(made, "other", &builder);
        std::string scores = TensorArg(made, "self");
        if (!constant && op == "mul") {
          constant = Constant(made, "self", &builder);
          scores = TensorArg(made, "other");
        }
        if (!constant || scores.empty()) return false;
        if (op == "div" && *constant == 0) return false;
        pattern_.has_scale = true;
        pattern_.scale = op == "div" ? 1.0 / *constant : *constant;
        // Walking back: a mask already seen comes after the scale.
        pattern_.scale_before_mask = pattern_.mask_kind != AttentionMaskKind::kNone;
        builders.push_back(builder);
        current = scores;
      } else if (const FillMask* fill_mask = FindFillMask(made);
                 fill_mask != nullptr && pattern_.mask_kind == AttentionMaskKind::kNone) {
        std::optional<double> fill = Constant(made, fill_mask->fill, &builder);
        if (!fill) return false;
        pattern_.mask_kind = fill_mask->kind;
        pattern_.mask = TensorArg(made, fill_mask->mask);
        pattern_.mask_fill = *fill;
        builders.push_back(builder);
        current = TensorArg(made, "self");
      } else if (op == "add" && made.overload() == "Tensor" &&
                 pattern_.mask_kind == AttentionMaskKind::kNone &&
                 FindArgument(made, "alpha") == nullptr) {
        // Scores + mask: the scores are the operand that comes from the matmul's side, which
        // the next steps check; try `self` first.
        std::string scores = TensorArg(made, "self");
        std::string mask = TensorArg(made, "other");
        const int self_producer = Producer(scores);
        const bool self_is_chain =
            self_producer >= 0 && (IsMatmul(node(self_producer)) ||
                                   OpName(node(self_producer)) == "mul" ||
                                   OpName(node(self_producer)) == "div");
        if (!self_is_chain) std::swap(scores, mask);
        if (scores.empty() || mask.empty()) return false;
        pattern_.mask_kind = AttentionMaskKind::kAdditive;
        pattern_.mask = mask;
        current = scores;
      } else {
        return false;
      }
      chain.push_back(producer);
    }
    if (matmul < 0) return false;
    // From here on the softmax is of a matmul: failures are near misses.
    const Node& scores_node = node(matmul);
    const TensorSpec* scores = Spec(scores_node.outputs(0));
    const TensorSpec* input_spec = Spec(input);
    if (scores == nullptr || input_spec == nullptr || scores->shape_size() < 2) {
      return absl::InvalidArgumentError("not attention: the scores' shape is unknown");
    }
    const int rank = input_spec->shape_size();
    std::optional<std::int64_t> dim = IntArg(softmax, "dim", std::nullopt);
    if (!dim || (*dim != -1 && *dim != rank - 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "not attention: the softmax is over dim ", dim ? absl::StrCat(*dim) : "?",
          ", not the keys' (the last)"));
    }
    if (softmax.op() == "aten::softmax") {
      const forge::v1::Argument* dtype = FindArgument(softmax, "dtype");
      if (dtype != nullptr && dtype->value_case() == forge::v1::Argument::kDtype &&
          dtype->dtype() != scores->dtype()) {
        return absl::InvalidArgumentError("not attention: the softmax casts the scores");
      }
    }
    if (softmax.op() == "aten::_softmax") {
      const forge::v1::Argument* half = FindArgument(softmax, "half_to_float");
      if (half != nullptr && half->bool_value()) {
        return absl::InvalidArgumentError("not attention: the softmax casts the scores");
      }
    }
    if (pattern_.has_scale && !pattern_.scale_before_mask && pattern_.scale <= 0 &&
        (pattern_.mask_kind == AttentionMaskKind::kMaskedFill ||
         pattern_.mask_kind == AttentionMaskKind::kWhere)) {
      return absl::InvalidArgumentError(
          "not attention: a scale of sign <= 0 after the mask changes the masked scores");
    }
    // Each value of the chain (matmul .. softmax input) is read by the next step alone.
    chain.push_back(matmul);
    for (int link : chain) {
      if (SoleReader(node(link).outputs(0)) < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "not attention: the scores at ", node(link).name(),
            " are read elsewhere too (or are an output), so they must be materialized"));
      }
    }
    // Forward from the softmax: identities, then matmul(P, V).
    std::vector<int> after;
    std::string probabilities = softmax.outputs(0);
    int output = -1;
    while (true) {
      const int reader = SoleReader(probabilities);
      if (reader < 0) {
        return absl::InvalidArgumentError(
            "not attention: the probabilities are read elsewhere too (or are an output)");
      }
      const Node& next = node(reader);
      if (IsMatmul(next)) {
        if (TensorArg(next, "self") != probabilities) {
          return absl::InvalidArgumentError(
              "not attention: the probabilities are the matmul's right operand, not its left");
        }
        output = reader;
        break;
      }
      const bool identity =
          (next.op() == "aten::clone" && FindArgument(next, "memory_format") == nullptr) ||
          (next.op() == "aten::dropout" &&
           (FindArgument(next, "train") != nullptr && !FindArgument(next, "train")->bool_value()));
      if (!identity) {
        return absl::InvalidArgumentError(absl::StrCat(
            "not attention: the probabilities go to ", next.op(), ", not a matmul with V"));
      }
      after.push_back(reader);
      probabilities = next.outputs(0);
    }
    // K: matmul's right operand is a transpose of K's last two dims.
    const std::string key_t = TensorArg(scores_node, scores_node.op() == "aten::bmm" ? "mat2" : "other");
    const std::string query = TensorArg(scores_node, "self");
    const int transpose = Producer(key_t);
    if (transpose < 0 || !IsView(transpose) || !IsLastTwoTranspose(node(transpose), rank)) {
      return absl::InvalidArgumentError(
          "not attention: the scores' right operand is not K transposed over its last two dims");
    }
    std::string key = TensorArg(node(transpose), "self");
    const Node& output_node = node(output);
    std::string value = TensorArg(output_node, output_node.op() == "aten::bmm" ? "mat2" : "other");
    const TensorSpec* q = Spec(query);
    const TensorSpec* k = Spec(key);
    const TensorSpec* v = Spec(value);
    if (q == nullptr || k == nullptr || v == nullptr || q->shape_size() != rank ||
        k->shape_size() != rank || v->shape_size() != rank || rank < 3) {
      return absl::InvalidArgumentError(
          "not attention: Q, K and V must have the scores' rank, 3 or more");
    }
    for (int d = 0; d + 2 < rank; ++d) {
      if (q->shape(d) != k->shape(d) || q->shape(d) != v->shape(d)) {
        return absl::InvalidArgumentError(
            "not attention: Q, K and V differ in a batch or head dim (a broadcast matmul)");
      }
    }
    if (k->shape(rank - 2) != v->shape(rank - 2)) {
      return absl::InvalidArgumentError("not attention: K and V differ in length");
    }
    // The members so far: the chain, the identities, the output matmul.
    members_.insert(index);
    members_.insert(chain.begin(), chain.end());
    members_.insert(after.begin(), after.end());
    members_.insert(output);
    pattern_.scores_matmul = matmul;
    pattern_.softmax = index;
    pattern_.output_matmul = output;
    pattern_.query = query;
    pattern_.output = output_node.outputs(0);
    // GQA folded when K and V repeat their heads alike and nothing else reads the repeats.
    std::optional<Repeat> key_repeat = HeadRepeat(key);
    std::optional<Repeat> value_repeat = HeadRepeat(value);
    if (key_repeat && value_repeat && key_repeat->times == value_repeat->times) {
      const absl::flat_hash_set<int> before = members_;
      members_.insert(key_repeat->nodes.begin(), key_repeat->nodes.end());
      members_.insert(value_repeat->nodes.begin(), value_repeat->nodes.end());
      bool private_repeats = true;
      for (const Repeat* repeat : {&*key_repeat, &*value_repeat}) {
        for (int repeat_node : repeat->nodes) {
          private_repeats = private_repeats && ReadOnlyByMembers(node(repeat_node).outputs(0));
        }
      }
      if (private_repeats) {
        key = key_repeat->source;
        value = value_repeat->source;
        pattern_.kv_repeat = key_repeat->times;
      } else {
        members_ = before;
      }
    }
    pattern_.key = key;
    pattern_.value = value;
    // The mask: causal when built from ones in the graph over [Sq, Sk].
    if (pattern_.mask_kind == AttentionMaskKind::kMaskedFill ||
        pattern_.mask_kind == AttentionMaskKind::kWhere) {
      const TensorSpec* mask = Spec(pattern_.mask);
      std::optional<Band> band = BandOf(pattern_.mask, &builders);
      const bool full_square = mask != nullptr && mask->dtype() == forge::v1::DTYPE_BOOL &&
          mask->shape_size() >= 2 &&
          mask->shape(mask->shape_size() - 2) == scores->shape(rank - 2) &&
          mask->shape(mask->shape_size() - 1) == scores->shape(rank - 1);
      const Band masks_future = pattern_.mask_kind == AttentionMaskKind::kMaskedFill
                                    ? Band{Band::kAbove, 1}
                                    : Band{Band::kBelow, 0};
      pattern_.causal = full_square && band && *band == masks_future;
    }
    TakeBuilders(std::move(builders));
    return true;
  }

  const Graph& graph_;
  absl::flat_hash_map<std::string, const TensorSpec*> values_;
  absl::flat_hash_map<std::string, int> producer_;
  absl::flat_hash_map<std::string, std::vector<int>> readers_;
  absl::flat_hash_set<std::string> outputs_;
  AttentionPattern pattern_;
  absl::flat_hash_set<int> members_;
};

}  // namespace

AttentionMatches FindExplicitAttention(const Graph& graph) { return Matcher(graph).FindAll(); }

}  // namespace forge::graph
