#include "compiler/codegen/pointwise/lane_vectors.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace forge::codegen::pointwise {
namespace {

constexpr char kLane[] = "#L";
constexpr int kMaxExpansions = 64;

// An index expression as lane * (the lane's coordinate) + constant + terms that do not depend on
// the lane but whose values are unknown here.
struct Affine {
  int64_t lane = 0;
  int64_t constant = 0;
  bool unknown = false;
};

// Recursive descent over +, -, *, /, % and parentheses; fails on anything else.
class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  std::optional<Affine> Whole() {
    std::optional<Affine> value = Sum();
    Skip();
    if (!value.has_value() || at_ != text_.size()) return std::nullopt;
    return value;
  }

 private:
  void Skip() {
    while (at_ < text_.size() && text_[at_] == ' ') ++at_;
  }
  bool Take(char c) {
    Skip();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  std::optional<Affine> Sum() {
    std::optional<Affine> value = Product();
    while (value.has_value()) {
      const bool plus = Take('+');
      if (!plus && !Take('-')) break;
      std::optional<Affine> right = Product();
      if (!right.has_value()) return std::nullopt;
      const int64_t sign = plus ? 1 : -1;
      value = Affine{value->lane + sign * right->lane, value->constant + sign * right->constant,
                     value->unknown || right->unknown};
    }
    return value;
  }
  std::optional<Affine> Product() {
    std::optional<Affine> value = Factor();
    while (value.has_value()) {
      char op = 0;
      for (char candidate : {'*', '/', '%'}) {
        if (Take(candidate)) {
          op = candidate;
          break;
        }
      }
      if (op == 0) break;
      std::optional<Affine> right = Factor();
      if (!right.has_value()) return std::nullopt;
      const bool left_constant = value->lane == 0 && !value->unknown;
      const bool right_constant = right->lane == 0 && !right->unknown;
      if (op == '*' && right_constant) {
        value = Affine{value->lane * right->constant, value->constant * right->constant,
                       value->unknown};
      } else if (op == '*' && left_constant) {
        value = Affine{right->lane * value->constant, right->constant * value->constant,
                       right->unknown};
      } else if (value->lane == 0 && right->lane == 0) {
        value = Affine{0, 0, true};  // independent of the lane, its value unknown
      } else {
        return std::nullopt;
      }
    }
    return value;
  }
  std::optional<Affine> Factor() {
    Skip();
    if (at_ >= text_.size()) return std::nullopt;
    if (Take('(')) {
      std::optional<Affine> value = Sum();
      if (!Take(')')) return std::nullopt;
      return value;
    }
    if (Take('-')) {
      std::optional<Affine> value = Factor();
      if (!value.has_value()) return std::nullopt;
      return Affine{-value->lane, -value->constant, value->unknown};
    }
    if (text_.compare(at_, 2, kLane) == 0) {  // #L<n>: a lane's coordinate
      at_ += 2;
      while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) ++at_;
      return Affine{1, 0, false};
    }
    const size_t begin = at_;
    if (std::isdigit(static_cast<unsigned char>(text_[at_]))) {
      while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) ++at_;
      const int64_t number = std::stoll(text_.substr(begin, at_ - begin));
      while (at_ < text_.size() && (text_[at_] == 'L' || text_[at_] == 'l')) ++at_;
      return Affine{0, number, false};
    }
    // A symbol of a lane-invariant coordinate (#k<n>) or another name: independent of the lane.
    if (text_[at_] == '#') ++at_;
    while (at_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[at_])) || text_[at_] == '_')) {
      ++at_;
    }
    if (at_ == begin || (at_ == begin + 1 && text_[begin] == '#')) return std::nullopt;
    return Affine{0, 0, true};
  }

  const std::string& text_;
  size_t at_ = 0;
};

// `component` with every name BindIndex bound replaced by its expression, in parentheses.
std::optional<std::string> Expanded(const std::string& component, const ElementEmitter& emitter) {
  std::string text = component;
  for (int round = 0; round < kMaxExpansions; ++round) {
    bool replaced = false;
    std::string out;
    for (size_t at = 0; at < text.size();) {
      const unsigned char c = static_cast<unsigned char>(text[at]);
      if (!std::isalpha(c) && c != '_') {
        out.push_back(text[at++]);
        continue;
      }
      size_t end = at;
      while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                                   text[end] == '_')) {
        ++end;
      }
      const std::string name = text.substr(at, end - at);
      if (std::optional<std::string> bound = emitter.BoundComponent(name); bound.has_value()) {
        absl::StrAppend(&out, "(", *bound, ")");
        replaced = true;
      } else {
        out += name;
      }
      at = end;
    }
    text = std::move(out);
    if (!replaced) return text;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ChunkLanes> ChunkLanes::Of(const std::vector<std::vector<int64_t>>& output_shapes,
                                         int64_t width) {
  if (width < 2) return std::nullopt;
  ChunkLanes lanes;
  lanes.width_ = width;
  // Lane 0's coordinate -> its symbol: #L<n> for the lane's coordinate (one per distinct
  // spelling: outputs of different last dims have different ones), #k<n> for the others.
  std::map<std::string, std::string> symbol_of;
  lanes.symbols_.resize(width);
  for (int64_t v = 0; v < width; ++v) {
    const std::string element = v == 0 ? "chunk_start" : absl::StrCat("(chunk_start + ", v, ")");
    for (const std::vector<int64_t>& shape : output_shapes) {
      int last = static_cast<int>(shape.size()) - 1;
      while (last >= 0 && shape[last] == 1) --last;
      if (last < 0 || shape[last] % width != 0) return std::nullopt;
      const Index lane_coordinates = RowMajorCoordinates(element, shape);
      const Index first = RowMajorCoordinates("chunk_start", shape);
      for (int d = 0; d <= last; ++d) {
        if (shape[d] == 1) continue;
        auto [it, inserted] = symbol_of.try_emplace(first[d], "");
        if (inserted) it->second = absl::StrCat(d == last ? kLane : "#k", symbol_of.size());
        lanes.symbols_[v].emplace_back(lane_coordinates[d], it->second);
      }
    }
    std::sort(lanes.symbols_[v].begin(), lanes.symbols_[v].end(),
              [](const auto& a, const auto& b) {
                return a.first.size() != b.first.size() ? a.first.size() > b.first.size()
                                                        : a.first < b.first;
              });
  }
  return lanes;
}

std::optional<std::string> ChunkLanes::VectorKey(const Index& index, int64_t lane,
                                                 const forge::v1::TensorSpec& spec,
                                                 const ElementEmitter& emitter) const {
  if (lane < 0 || lane >= width_ || static_cast<int>(index.size()) != spec.shape_size() ||
      spec.strides_size() != spec.shape_size() || spec.storage_offset() % width_ != 0) {
    return std::nullopt;
  }
  std::vector<std::string> symbolic;
  int lane_dim = -1;
  for (int d = 0; d < static_cast<int>(index.size()); ++d) {
    std::optional<std::string> text = Expanded(index[d], emitter);
    if (!text.has_value()) return std::nullopt;
    for (const auto& [coordinate, symbol] : symbols_[lane]) {
      *text = absl::StrReplaceAll(*text, {{coordinate, symbol}});
    }
    // The chunk's element appears other than as an output coordinate: not provable here.
    if (text->find("chunk_start") != std::string::npos) return std::nullopt;
    const std::optional<Affine> affine = Parser(*text).Whole();
    if (!affine.has_value()) return std::nullopt;
    if (affine->lane != 0) {
      if (affine->lane != 1 || affine->unknown || lane_dim >= 0 ||
          affine->constant % width_ != 0 || spec.strides(d) != 1) {
        return std::nullopt;
      }
      lane_dim = d;
    } else if (spec.shape(d) != 1 && spec.strides(d) % width_ != 0) {
      return std::nullopt;
    }
    symbolic.push_back(*std::move(text));
  }
  if (lane_dim < 0) return std::nullopt;  // every lane reads one element: a broadcast
  return absl::StrJoin(symbolic, ",");
}

}  // namespace forge::codegen::pointwise
