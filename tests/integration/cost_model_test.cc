// The learned performance model reaches workers: the real forge-coordinator (cost-model.space
// "NVIDIA H200") over a real redis-server on loopback serves what the store holds; a worker's
// CostModelFetcher installs each new version as it is stored, and the real forge-worker
// (emulating an H200, polling every 200 ms) picks up a new version without a restart; the real
// forge CLI's `predict --learned` fetches it too.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/redis/redis_client.h"
#include "compiler/cost/learned/cost_predictor.h"
#include "compiler/cost/learned/testing/synthetic_dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cost_model_store.h"
#include "tests/support/redis_server.h"
#include "tests/support/subprocess.h"
#include "worker/daemon/cost_model_fetcher.h"

namespace forge {
namespace {

constexpr char kSpace[] = "NVIDIA H200";

class CostModelDistributionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<testing::RedisServer>> redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_server_ = *std::move(redis);
    redis_ = std::make_unique<RedisClient>(
        RedisClientOptions{.host = redis_server_->host(), .port = redis_server_->port()});
    store_ = std::make_unique<server::CostModelStore>(redis_.get());
    port_ = testing::PickFreePort();
    absl::StatusOr<testing::Subprocess> coordinator = testing::Subprocess::Start(
        {FORGE_COORDINATOR_BINARY, absl::StrCat("--listen=127.0.0.1:", port_),
         absl::StrCat("--redis.port=", redis_server_->port()),
         absl::StrCat("--blobs.dir=", directory_.path(), "/blobs"), "--metrics.listen=",
         absl::StrCat("--cost-model.space=", kSpace), "--cost-model.interval=1h"},
        Log("coordinator"));
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = *std::move(coordinator);
    ASSERT_TRUE(testing::WaitForPort(port_, std::chrono::seconds(20)))
        << "coordinator did not listen\n" << Read("coordinator");
    rows_ = cost::testing::RowsOf(*cost::testing::SyntheticPointwise(*FindGpu("H200"), 6));
  }
  void TearDown() override {
    if (worker_.has_value()) worker_->Kill(SIGKILL);
    if (coordinator_.has_value()) coordinator_->Kill(SIGKILL);
  }

  std::string Log(const std::string& name) const {
    return absl::StrCat(directory_.path(), "/", name, ".log");
  }
  std::string Read(const std::string& name) const {
    std::ifstream file(Log(name));
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }
  bool WaitForLog(const std::string& name, const std::string& text) const {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      if (absl::StrContains(Read(name), text)) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }
  int64_t Store(int rounds) {
    absl::StatusOr<int64_t> version =
        store_->Put(kSpace, *cost::LearnedModel::Train(rows_, {.rounds = rounds}), 100);
    EXPECT_TRUE(version.ok()) << version.status();
    return version.value_or(0);
  }

  testing::TempDir directory_;
  std::unique_ptr<testing::RedisServer> redis_server_;
  std::unique_ptr<RedisClient> redis_;
  std::unique_ptr<server::CostModelStore> store_;
  int port_ = 0;
  std::optional<testing::Subprocess> coordinator_;
  std::optional<testing::Subprocess> worker_;
  std::vector<cost::TrainingRow> rows_;
};

TEST_F(CostModelDistributionTest, AFetcherInstallsEachStoredVersion) {
  cost::CostPredictor predictor;
  daemon::CostModelFetcher fetcher({.coordinator = absl::StrCat("127.0.0.1:", port_)},
                                   {{"H200", &predictor}});
  ASSERT_TRUE(fetcher.PollOnce().ok());
  EXPECT_EQ(predictor.model_version(), 0);

  ASSERT_EQ(Store(10), 1);
  const absl::Status polled = fetcher.PollOnce();
  ASSERT_TRUE(polled.ok()) << polled << "\n" << Read("coordinator");
  EXPECT_EQ(predictor.model_version(), 1);
  EXPECT_TRUE(predictor.UsesLearnedModel());

  ASSERT_EQ(Store(20), 2);
  ASSERT_TRUE(fetcher.PollOnce().ok());
  EXPECT_EQ(predictor.model_version(), 2);
  EXPECT_EQ(predictor.model()->model.Serialize().value(),
            (*store_->GetStored(kSpace))->bytes);
}

TEST_F(CostModelDistributionTest, ARunningWorkerPicksUpANewVersion) {
  absl::StatusOr<testing::Subprocess> worker = testing::Subprocess::Start(
      {FORGE_WORKER_BINARY, absl::StrCat("--coordinator=127.0.0.1:", port_), "--emulate=H200",
       "--worker-id=cost-model-worker", "--compile-threads=1", "--cost-model.poll=200ms"},
      Log("worker"));
  ASSERT_TRUE(worker.ok()) << worker.status();
  worker_ = *std::move(worker);
  ASSERT_EQ(Store(10), 1);
  EXPECT_TRUE(WaitForLog("worker", "learned version 1 of NVIDIA H200")) << Read("worker");
  ASSERT_EQ(Store(20), 2);
  EXPECT_TRUE(WaitForLog("worker", "learned version 2 of NVIDIA H200")) << Read("worker");
}

// `forge predict --learned` asks the coordinator for the GPU's model: the rows of the families
// the model serves say its version, the report its held-out error or that it has none.
TEST_F(CostModelDistributionTest, ForgePredictFetchesTheModel) {
  const char* models = std::getenv("FORGE_TEST_MODELS");
  ASSERT_NE(models, nullptr) << "FORGE_TEST_MODELS is not set; run through ctest";
  const std::string model = absl::StrCat(models, "/llama_block/graph.pb");
  const auto predict = [&](const std::string& log) {
    absl::StatusOr<testing::Subprocess> cli = testing::Subprocess::Start(
        {FORGE_CLI_BINARY, "predict", model, "--learned",
         absl::StrCat("--server=127.0.0.1:", port_)},
        Log(log));
    EXPECT_TRUE(cli.ok()) << cli.status();
    const int status = cli.ok() ? cli->Wait(std::chrono::seconds(60)) : -1;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Read(log);
    return Read(log);
  };
  const std::string before = predict("predict-0");
  EXPECT_THAT(before, ::testing::HasSubstr(
                          "Performance model: analytic (worker/emulated); coordinator 127.0.0.1:"));
  EXPECT_THAT(before, ::testing::Not(::testing::HasSubstr("learned v")));

  ASSERT_EQ(Store(20), 1);
  const std::string after = predict("predict-1");
  EXPECT_THAT(after, ::testing::ContainsRegex("POINTWISE  PREDICTED [^\n]* learned v1\n")) << after;
  EXPECT_THAT(after, ::testing::HasSubstr("Performance model: learned v1 (coordinator 127.0.0.1:"));
  EXPECT_THAT(after, ::testing::HasSubstr("no measured error"));
}

}  // namespace
}  // namespace forge
