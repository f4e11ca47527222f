// Protobuf messages as the CLI's JSON: protobuf's JSON mapping with proto field names
// (snake_case, like every other JSON Forge writes) and every field printed, zeros included.
#ifndef FORGE_CLIENT_FORGE_PROTO_JSON_H_
#define FORGE_CLIENT_FORGE_PROTO_JSON_H_

#include <string>

#include "google/protobuf/message.h"

namespace forge::client {

// `message` as JSON; `pretty` indents it and ends it with a newline, otherwise it is one line.
std::string ProtoJson(const google::protobuf::Message& message, bool pretty);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_PROTO_JSON_H_
