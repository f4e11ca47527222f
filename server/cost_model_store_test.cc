// The performance model's versions in a real redis-server: none at first, each Put the next
// version, the bytes round-trip to the same predictions, unusable bytes are DataLoss.
#include "server/cost_model_store.h"

#include "compiler/cost/learned/testing/synthetic_dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/redis_keys.h"
#include "tests/support/redis_fixture.h"

namespace forge::server {
namespace {

constexpr absl::string_view kSpace = "NVIDIA H200";

class CostModelStoreTest : public testing::RedisFixture {
 protected:
  void SetUp() override {
    RedisFixture::SetUp();
    if (HasFatalFailure()) return;
    rows_ = cost::testing::RowsOf(*cost::testing::SyntheticPointwise(*FindGpu("H200"), 6));
  }
  std::vector<cost::TrainingRow> rows_;
};

TEST_F(CostModelStoreTest, NoModelUntilOneIsPut) {
  CostModelStore store(redis_.get());
  EXPECT_EQ(*store.Version(kSpace), 0);
  EXPECT_FALSE(store.Get(kSpace)->has_value());
  EXPECT_FALSE(store.Info(kSpace)->has_value());
}

TEST_F(CostModelStoreTest, EachPutIsTheNextVersionAndRoundTrips) {
  CostModelStore store(redis_.get());
  const cost::LearnedModel first = *cost::LearnedModel::Train(rows_, {.rounds = 20});
  EXPECT_EQ(*store.Put(kSpace, first, 120), 1);
  const cost::LearnedModel second =
      *cost::LearnedModel::Train(rows_, {.target = cost::Target::kLogSeconds, .rounds = 40});
  EXPECT_EQ(*store.Put(kSpace, second, 180), 2);
  EXPECT_EQ(*store.Version(kSpace), 2);
  // Another space has its own versions.
  EXPECT_EQ(*store.Version("NVIDIA A100-SXM4-80GB"), 0);

  const std::optional<CostModelInfo> info = *store.Info(kSpace);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->version, 2);
  EXPECT_EQ(info->rows, static_cast<int64_t>(rows_.size()));
  EXPECT_EQ(info->tasks, 6);
  EXPECT_EQ(info->results_seen, 180);
  EXPECT_EQ(info->target, "log_seconds");
  EXPECT_GT(info->trained_ms, 0);

  const absl::StatusOr<std::optional<cost::VersionedModel>> loaded = store.Get(kSpace);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->version, 2);
  EXPECT_EQ((*loaded)->model.target(), cost::Target::kLogSeconds);
  std::vector<std::vector<float>> features;
  std::vector<double> analytic;
  for (const cost::TrainingRow& row : rows_) {
    features.push_back(row.features);
    analytic.push_back(row.analytic_seconds);
  }
  EXPECT_EQ(*(*loaded)->model.PredictSeconds(features, analytic),
            *second.PredictSeconds(features, analytic));
}

TEST_F(CostModelStoreTest, TheHeldOutErrorTravelsWithItsVersion) {
  CostModelStore store(redis_.get());
  const cost::LearnedModel model = *cost::LearnedModel::Train(rows_, {.rounds = 10});
  forge::v1::CostModelEvaluation held_out;
  held_out.set_method("held out by task");
  held_out.set_test_rows(42);
  forge::v1::CostModelError* error = held_out.add_errors();
  error->set_family(forge::v1::KERNEL_FAMILY_POINTWISE);
  error->set_median_percent_error(12.5);
  ASSERT_EQ(*store.Put(kSpace, model, 100, held_out), 1);
  ASSERT_EQ(*store.Put(kSpace, model, 150), 2);  // version 2 has none

  const std::optional<StoredCostModel> stored = *store.GetStored(kSpace);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->info.version, 2);
  EXPECT_EQ(stored->bytes, *model.Serialize());
  EXPECT_EQ(stored->info.held_out.errors_size(), 0);

  ASSERT_EQ(*store.Put(kSpace, model, 200, held_out), 3);
  const std::optional<cost::VersionedModel> loaded = *store.Get(kSpace);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->held_out.SerializeAsString(), held_out.SerializeAsString());
  EXPECT_EQ((*store.Info(kSpace))->held_out.test_rows(), 42);
}

TEST_F(CostModelStoreTest, BytesThatAreNoModelAreDataLoss) {
  CostModelStore store(redis_.get());
  ASSERT_TRUE(redis_->Command({"HSET", keys::CostModel(kSpace), "version", "3", "model", "junk"})
                  .ok());
  EXPECT_EQ(*store.Version(kSpace), 3);
  const absl::StatusOr<std::optional<cost::VersionedModel>> loaded = store.Get(kSpace);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(loaded.status().message(), ::testing::HasSubstr("version 3"));
}

}  // namespace
}  // namespace forge::server
