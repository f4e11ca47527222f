#include "compiler/import/json_value.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace forge::pt2 {
namespace {

using google::protobuf::Value;

constexpr double kTwoTo53 = 9007199254740992.0;
constexpr double kTwoTo63 = 9223372036854775808.0;

absl::string_view KindName(const Value& value) {
  switch (value.kind_case()) {
    case Value::kNullValue: return "null";
    case Value::kNumberValue: return "a number";
    case Value::kStringValue: return "a string";
    case Value::kBoolValue: return "a boolean";
    case Value::kStructValue: return "an object";
    case Value::kListValue: return "a list";
    default: return "nothing";
  }
}

// A document's root location ends in ':' ("models/model.json:"); members below it join with '.'.
std::string MemberLocation(const std::string& parent, absl::string_view name) {
  const bool root = !parent.empty() && parent.back() == ':';
  return absl::StrCat(parent, root ? " " : ".", name);
}

}  // namespace

absl::StatusOr<Value> ParseJson(absl::string_view text, absl::string_view file) {
  Value value;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(text.data(), text.size()), &value);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": malformed JSON: ", std::string(status.message())));
  }
  return value;
}

bool JsonRef::is_null() const { return value_->kind_case() == Value::kNullValue; }

absl::Status JsonRef::Error(absl::string_view problem) const {
  return absl::InvalidArgumentError(absl::StrCat(location_, ": ", problem));
}

absl::Status JsonRef::TypeError(absl::string_view expected) const {
  return Error(absl::StrCat("expected ", expected, ", found ", KindName(*value_)));
}

absl::StatusOr<JsonRef> JsonRef::Field(absl::string_view name) const {
  if (value_->kind_case() != Value::kStructValue) return TypeError("an object");
  const auto& fields = value_->struct_value().fields();
  auto it = fields.find(std::string(name));
  if (it == fields.end()) return Error(absl::StrCat("missing field '", name, "'"));
  return JsonRef(it->second, MemberLocation(location_, name));
}

absl::StatusOr<std::optional<JsonRef>> JsonRef::OptionalField(absl::string_view name) const {
  if (value_->kind_case() != Value::kStructValue) return TypeError("an object");
  const auto& fields = value_->struct_value().fields();
  auto it = fields.find(std::string(name));
  if (it == fields.end() || it->second.kind_case() == Value::kNullValue) return std::nullopt;
  return JsonRef(it->second, MemberLocation(location_, name));
}

absl::StatusOr<std::string> JsonRef::String() const {
  if (value_->kind_case() != Value::kStringValue) return TypeError("a string");
  return value_->string_value();
}

absl::StatusOr<bool> JsonRef::Bool() const {
  if (value_->kind_case() != Value::kBoolValue) return TypeError("a boolean");
  return value_->bool_value();
}

absl::StatusOr<double> JsonRef::Number() const {
  if (value_->kind_case() == Value::kStringValue) {
    const std::string& text = value_->string_value();
    if (text == "Infinity") return std::numeric_limits<double>::infinity();
    if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
    constexpr size_t kShown = 40;
    return Error(absl::StrCat("expected a number (or \"Infinity\", \"-Infinity\", \"NaN\"), found "
                              "the string \"", text.substr(0, kShown),
                              text.size() > kShown ? "...\"" : "\""));
  }
  if (value_->kind_case() != Value::kNumberValue) return TypeError("a number");
  return value_->number_value();
}

absl::StatusOr<std::int64_t> JsonRef::Int() const {
  if (value_->kind_case() != Value::kNumberValue) return TypeError("an integer");
  const double number = value_->number_value();
  if (number == kTwoTo63) return std::numeric_limits<std::int64_t>::max();
  if (number == -kTwoTo63) return std::numeric_limits<std::int64_t>::min();
  if (!std::isfinite(number) || std::trunc(number) != number) {
    return Error(absl::StrCat("expected an integer, found ", number));
  }
  if (std::abs(number) > kTwoTo53) {
    return Error(absl::StrCat("integer ", number,
                              " is beyond 2^53 and cannot be read exactly from JSON"));
  }
  return static_cast<std::int64_t>(number);
}

absl::StatusOr<std::vector<JsonRef>> JsonRef::Elements() const {
  if (value_->kind_case() != Value::kListValue) return TypeError("a list");
  std::vector<JsonRef> elements;
  const auto& values = value_->list_value().values();
  elements.reserve(values.size());
  for (int i = 0; i < values.size(); ++i) {
    elements.emplace_back(values[i], absl::StrCat(location_, "[", i, "]"));
  }
  return elements;
}

absl::StatusOr<std::vector<std::pair<std::string, JsonRef>>> JsonRef::Members() const {
  if (value_->kind_case() != Value::kStructValue) return TypeError("an object");
  std::vector<std::pair<std::string, JsonRef>> members;
  for (const auto& [name, value] : value_->struct_value().fields()) {
    members.emplace_back(name, JsonRef(value, absl::StrCat(location_, "[\"", name, "\"]")));
  }
  std::sort(members.begin(), members.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return members;
}

absl::StatusOr<std::pair<std::string, JsonRef>> JsonRef::UnionMember() const {
  if (value_->kind_case() != Value::kStructValue) return TypeError("an object (a union)");
  std::optional<std::pair<std::string, JsonRef>> chosen;
  for (const auto& [name, value] : value_->struct_value().fields()) {
    if (value.kind_case() == Value::kNullValue) continue;
    if (chosen.has_value()) {
      return Error(absl::StrCat("union sets both '", chosen->first, "' and '", name, "'"));
    }
    chosen.emplace(name, JsonRef(value, MemberLocation(location_, name)));
  }
  if (!chosen.has_value()) return Error("union sets no member");
  return *std::move(chosen);
}

}  // namespace forge::pt2
