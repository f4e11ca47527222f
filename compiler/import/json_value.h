// Walking JSON parsed by protobuf into google.protobuf.Value, with the location of every value
// kept for error messages ("models/model.json: graph_module.graph.nodes[3].inputs[1]").
// LibTorch's headers ship no JSON library, and protobuf's parser is already a dependency.
#ifndef FORGE_COMPILER_IMPORT_JSON_VALUE_H_
#define FORGE_COMPILER_IMPORT_JSON_VALUE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/struct.pb.h"

namespace forge::pt2 {

// Parses `text`, the contents of archive record `file`. InvalidArgument names the file.
absl::StatusOr<google::protobuf::Value> ParseJson(absl::string_view text, absl::string_view file);

// A value inside a parsed document and where it is. Does not own the value.
class JsonRef {
 public:
  // `location` of a document's root is "<file>:".
  JsonRef(const google::protobuf::Value& value, std::string location)
      : value_(&value), location_(std::move(location)) {}

  const std::string& location() const { return location_; }
  bool is_null() const;

  // Member `name` of an object; InvalidArgument when this is not an object or lacks it.
  absl::StatusOr<JsonRef> Field(absl::string_view name) const;
  // Member `name`, or nullopt when it is absent or null.
  absl::StatusOr<std::optional<JsonRef>> OptionalField(absl::string_view name) const;

  absl::StatusOr<std::string> String() const;
  absl::StatusOr<bool> Bool() const;
  // A float. JSON has no literal for the non-finite ones: torch.export's serializer writes them as
  // the strings "Infinity", "-Infinity" and "NaN" (e.g. masked_fill's -inf in a causal mask),
  // which read as those values; any other string is refused.
  absl::StatusOr<double> Number() const;
  // An integral number. JSON numbers arrive as doubles, exact up to 2^53; larger magnitudes are
  // refused except +-2^63, which is how torch's INT64_MAX / INT64_MIN sentinels (e.g. the `end` of
  // a slice to the end) round, and which map back to them.
  absl::StatusOr<std::int64_t> Int() const;
  absl::StatusOr<std::vector<JsonRef>> Elements() const;
  // An object's members, ordered by name.
  absl::StatusOr<std::vector<std::pair<std::string, JsonRef>>> Members() const;
  // A torch.export serde union: an object with exactly one member whose value is not null.
  absl::StatusOr<std::pair<std::string, JsonRef>> UnionMember() const;

  // InvalidArgument "<location>: <problem>".
  absl::Status Error(absl::string_view problem) const;

 private:
  absl::Status TypeError(absl::string_view expected) const;

  const google::protobuf::Value* value_;
  std::string location_;
};

}  // namespace forge::pt2

#endif  // FORGE_COMPILER_IMPORT_JSON_VALUE_H_
