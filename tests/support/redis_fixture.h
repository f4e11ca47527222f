// Test support: a gtest fixture with a fresh redis-server (redis_server.h) and a RedisClient
// connected to it, for tests of the code that speaks Redis. A derived fixture that overrides
// SetUp calls RedisFixture::SetUp() first and returns if it failed (HasFatalFailure()).
#ifndef FORGE_TESTS_SUPPORT_REDIS_FIXTURE_H_
#define FORGE_TESTS_SUPPORT_REDIS_FIXTURE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/redis/redis_client.h"
#include "gtest/gtest.h"
#include "tests/support/redis_server.h"

namespace forge::testing {

class RedisFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    redis_ = std::make_unique<RedisClient>(
        RedisClientOptions{.host = server_->host(), .port = server_->port()});
  }

  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<RedisClient> redis_;
};

}  // namespace forge::testing

#endif  // FORGE_TESTS_SUPPORT_REDIS_FIXTURE_H_
