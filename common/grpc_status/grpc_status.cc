#include "common/grpc_status/grpc_status.h"

#include "absl/strings/str_cat.h"

namespace forge {

absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view call) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(call, ": ", status.error_message()));
}

}  // namespace forge
