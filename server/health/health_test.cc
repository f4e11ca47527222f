#include "server/health/health.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "forge/v1/service.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/support/redis_server.h"

namespace forge::server {
namespace {

// Polls the health of `channel` until it is `serving`, for up to 10 s.
bool Becomes(grpc::Channel& channel, bool serving) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    absl::StatusOr<bool> health = CheckHealth(channel, absl::Seconds(2));
    if (health.ok() && *health == serving) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

TEST(HealthTest, NotServingWhileRedisIsDown) {
  absl::StatusOr<std::unique_ptr<testing::RedisServer>> redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  RedisClient client({.host = (*redis)->host(),
                      .port = (*redis)->port(),
                      .command_timeout = absl::Milliseconds(500)});
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // A server needs a service of its own before it adds the health service.
  forge::v1::WorkerService::Service unimplemented;
  builder.RegisterService(&unimplemented);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  {
    RedisHealthWatcher watcher(server.get(), &client, absl::Milliseconds(100));
    EXPECT_TRUE(Becomes(*channel, true));
    (*redis)->Stop();
    EXPECT_TRUE(Becomes(*channel, false));
    ASSERT_TRUE((*redis)->Restart().ok());
    EXPECT_TRUE(Becomes(*channel, true));
  }
  server->Shutdown();
}

TEST(HealthTest, UnreachableServerIsAnError) {
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials());
  absl::StatusOr<bool> health = CheckHealth(*channel, absl::Milliseconds(500));
  EXPECT_FALSE(health.ok());
}

}  // namespace
}  // namespace forge::server
