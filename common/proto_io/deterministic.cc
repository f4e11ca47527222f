#include "common/proto_io/deterministic.h"

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace forge {

std::string SerializeDeterministic(const google::protobuf::MessageLite& message) {
  std::string bytes;
  {
    // The streams trim `bytes` to what was written when they go.
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

}  // namespace forge
