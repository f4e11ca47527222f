// A protobuf message's deterministic serialization: map entries in key order, so that equal
// messages give equal bytes whatever order their maps were filled in. What content is named and
// keyed by (model and task digests, stored models, the judge's draw-cache keys).
#ifndef FORGE_COMMON_PROTO_IO_DETERMINISTIC_H_
#define FORGE_COMMON_PROTO_IO_DETERMINISTIC_H_

#include <string>

#include "google/protobuf/message_lite.h"

namespace forge {

std::string SerializeDeterministic(const google::protobuf::MessageLite& message);

}  // namespace forge

#endif  // FORGE_COMMON_PROTO_IO_DETERMINISTIC_H_
