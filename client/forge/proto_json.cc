#include "client/forge/proto_json.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"

namespace forge::client {

std::string ProtoJson(const google::protobuf::Message& message, bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  // Printing a generated message cannot fail: every field has a JSON mapping.
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!pretty) return json;
  return absl::StrCat(absl::StripTrailingAsciiWhitespace(json), "\n");
}

}  // namespace forge::client
