#include "common/grpc_status/grpc_status.h"

#include "gtest/gtest.h"

namespace forge {
namespace {

TEST(FromGrpcStatusTest, KeepsTheCodeAndNamesTheCall) {
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK, "Fetch").ok());
  const absl::Status refused =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "no worker"), "Fetch");
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.message(), "Fetch: no worker");
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"), "Call").code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace forge
