// gRPC statuses as absl::Status, for the clients of Forge's services (the worker's catalog
// client, the health probe, test support): the code kept, the call named in the message.
#ifndef FORGE_COMMON_GRPC_STATUS_GRPC_STATUS_H_
#define FORGE_COMMON_GRPC_STATUS_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace forge {

// OK for an OK `status`; otherwise the same code with "CALL: MESSAGE".
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view call);

}  // namespace forge

#endif  // FORGE_COMMON_GRPC_STATUS_GRPC_STATUS_H_
