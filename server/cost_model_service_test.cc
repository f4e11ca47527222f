// CostModelService over a real redis-server and real gRPC on loopback: version 0 until a model is
// stored, the bytes once per version, a predictor that polls picks up each new version, bad
// requests are INVALID_ARGUMENT.
#include "server/cost_model_service.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "compiler/cost/learned/cost_predictor.h"
#include "compiler/cost/learned/testing/synthetic_dataset.h"
#include "gtest/gtest.h"
#include "server/redis_keys.h"
#include "tests/support/redis_fixture.h"

namespace forge::server {
namespace {

constexpr char kSpace[] = "NVIDIA H200";

class CostModelServiceTest : public testing::RedisFixture {
 protected:
  void SetUp() override {
    RedisFixture::SetUp();
    if (HasFatalFailure()) return;
    store_ = std::make_unique<CostModelStore>(redis_.get());
    service_ = std::make_unique<CostModelService>(store_.get(), std::vector<std::string>{kSpace});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = forge::v1::CostModelService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
    rows_ = cost::testing::RowsOf(*cost::testing::SyntheticPointwise(*FindGpu("H200"), 6));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  grpc::Status Get(const std::string& gpu, int64_t have_version,
                   forge::v1::GetCostModelResponse* response) {
    grpc::ClientContext context;
    forge::v1::GetCostModelRequest request;
    request.set_gpu(gpu);
    request.set_have_version(have_version);
    return stub_->GetCostModel(&context, request, response);
  }

  std::unique_ptr<CostModelStore> store_;
  std::unique_ptr<CostModelService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<forge::v1::CostModelService::Stub> stub_;
  std::vector<cost::TrainingRow> rows_;
};

TEST_F(CostModelServiceTest, APollerPicksUpEachNewVersion) {
  cost::CostPredictor predictor;
  forge::v1::GetCostModelResponse response;
  ASSERT_TRUE(Get("H200", 0, &response).ok());
  EXPECT_EQ(response.space(), kSpace);
  EXPECT_EQ(response.version(), 0);
  EXPECT_FALSE(*predictor.Install(response));

  const cost::LearnedModel first = *cost::LearnedModel::Train(rows_, {.rounds = 10});
  forge::v1::CostModelEvaluation held_out;
  held_out.set_test_rows(17);
  ASSERT_EQ(*store_->Put(kSpace, first, 120, held_out), 1);
  response.Clear();
  ASSERT_TRUE(Get("NVIDIA H200", predictor.model_version(), &response).ok());
  EXPECT_EQ(response.version(), 1);
  EXPECT_EQ(response.model(), *first.Serialize());
  EXPECT_EQ(response.held_out().test_rows(), 17);
  EXPECT_EQ(response.training_rows(), static_cast<int64_t>(rows_.size()));
  EXPECT_EQ(response.training_tasks(), 6);
  ASSERT_TRUE(*predictor.Install(response));
  EXPECT_EQ(predictor.model_version(), 1);
  EXPECT_EQ(predictor.model()->held_out.test_rows(), 17);

  // The version it holds: no bytes, nothing to install.
  response.Clear();
  ASSERT_TRUE(Get("h200", 1, &response).ok());
  EXPECT_EQ(response.version(), 1);
  EXPECT_TRUE(response.model().empty());
  EXPECT_FALSE(*predictor.Install(response));

  const cost::LearnedModel second = *cost::LearnedModel::Train(rows_, {.rounds = 20});
  ASSERT_EQ(*store_->Put(kSpace, second, 200), 2);
  response.Clear();
  ASSERT_TRUE(Get("H200", predictor.model_version(), &response).ok());
  EXPECT_EQ(response.version(), 2);
  EXPECT_FALSE(response.has_held_out());
  ASSERT_TRUE(*predictor.Install(response));
  EXPECT_EQ(predictor.model_version(), 2);
  EXPECT_EQ(predictor.model()->model.Serialize().value(), *second.Serialize());
}

TEST_F(CostModelServiceTest, AGpuNobodyTrainsGetsTheAnalyticModel) {
  ASSERT_TRUE(store_->Put(kSpace, *cost::LearnedModel::Train(rows_, {.rounds = 5}), 100).ok());
  forge::v1::GetCostModelResponse response;
  ASSERT_TRUE(Get("A100", 0, &response).ok());
  EXPECT_EQ(response.version(), 0);
  EXPECT_TRUE(response.space().empty());
  EXPECT_TRUE(response.model().empty());
}

TEST_F(CostModelServiceTest, BadRequestsAreInvalidArgument) {
  forge::v1::GetCostModelResponse response;
  for (const std::string& gpu : {std::string(), std::string("Voodoo 2"),
                                 std::string("predicted:H200"), std::string(300, 'x')}) {
    const grpc::Status status = Get(gpu, 0, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << gpu;
    EXPECT_FALSE(status.error_message().empty());
  }
  EXPECT_EQ(Get("H200", -1, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(CostModelServiceTest, AVersionWithoutUsableBytesIsRefusedByThePredictor) {
  ASSERT_TRUE(
      redis_->Command({"HSET", keys::CostModel(kSpace), "version", "4", "model", "not a model"})
          .ok());
  cost::CostPredictor predictor;
  forge::v1::GetCostModelResponse response;
  ASSERT_TRUE(Get("H200", 0, &response).ok());
  EXPECT_EQ(response.version(), 4);
  const absl::StatusOr<bool> installed = predictor.Install(response);
  EXPECT_EQ(installed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(predictor.model_version(), 0);
}

}  // namespace
}  // namespace forge::server
