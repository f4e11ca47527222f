// The trainer over a real redis-server and results cache: rows from measured results of real
// reduction candidates (softmax tasks, the family's own plans), the analytic model below the
// threshold, a new version only when enough new results arrived, predictions never learned from.
#include "server/cost_model_trainer.h"

#include "common/digest/sha256.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/cost/plan_prediction.h"
#include "compiler/search/candidate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/redis_keys.h"
#include "tests/support/redis_fixture.h"

namespace forge::server {
namespace {

using ::testing::HasSubstr;

constexpr absl::string_view kSpace = "NVIDIA H200";

TEST(GpuOfSpaceTest, FindsTheTablesGpuInTheProductName) {
  EXPECT_EQ(GpuOfSpace("NVIDIA H200")->name, "H200");
  EXPECT_EQ(GpuOfSpace("NVIDIA GeForce RTX 4090")->name, "RTX 4090");
  EXPECT_EQ(GpuOfSpace("predicted:H200").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GpuOfSpace("Voodoo 2").status().code(), absl::StatusCode::kNotFound);
}

class CostModelTrainerTest : public testing::RedisFixture {
 protected:
  void SetUp() override {
    RedisFixture::SetUp();
    if (HasFatalFailure()) return;
    cache_ = std::make_unique<ResultCache>(redis_.get());
    store_ = std::make_unique<CostModelStore>(redis_.get());
  }

  // Stores up to `points` measured results of softmax over [rows, columns]: the task spec, each
  // candidate as a lease writes it, and a measurement 30% over the analytic model for scalar
  // loads. With `kind` PREDICTED the results are the emulated backend's.
  int StoreTask(int64_t rows, int64_t columns, size_t points,
                forge::v1::MeasurementKind kind = forge::v1::MEASUREMENT_KIND_MEASURED) {
    forge::v1::KernelTask task =
        codegen::testing::SoftmaxTask(forge::v1::DTYPE_FLOAT32, rows, columns);
    task.set_digest(Sha256Hex(absl::StrCat("softmax ", rows, "x", columns)));
    EXPECT_TRUE(redis_
                    ->Command({"HSET", keys::Task(task.digest()),
                               std::string(keys::kTaskSpecField), task.SerializeAsString()})
                    .ok());
    const codegen::KernelFamily& family =
        *codegen::FindFamily(forge::v1::KERNEL_FAMILY_REDUCTION);
    const GpuArch gpu = *FindGpu("H200");
    int stored = 0;
    for (const codegen::SchedulePoint& point :
         codegen::testing::EvenSample(codegen::testing::ValidPoints(family, task), points)) {
      const absl::StatusOr<forge::v1::Candidate> candidate =
          search::MakeCandidate(task, family, point, "sm_90");
      const absl::StatusOr<codegen::LaunchPlan> plan = family.Plan(task, point);
      if (!candidate.ok() || !plan.ok()) continue;
      const cost::KernelResources resources{.registers_per_thread = 40};
      const absl::StatusOr<cost::PlanPrediction> analytic =
          cost::PredictPlan(gpu, task, *plan, resources);
      if (!analytic.ok()) continue;
      forge::v1::Result result;
      forge::v1::Measurement* measurement = result.mutable_measurement();
      measurement->set_candidate_digest(candidate->digest());
      measurement->set_kind(kind);
      measurement->set_median_us(analytic->seconds * 1e6 *
                                 (plan->hints.vector_width == 1 ? 1.3 : 1.0));
      measurement->mutable_metrics()->set_resources_available(true);
      measurement->mutable_metrics()->set_registers_per_thread(40);
      measurement->mutable_metrics()->set_shared_memory_bytes(
          static_cast<int32_t>(plan->launch.dynamic_shared_bytes));
      EXPECT_TRUE(redis_
                      ->Command({"SET", keys::Candidate(candidate->digest()),
                                 candidate->SerializeAsString()})
                      .ok());
      EXPECT_TRUE(*cache_->PutIfAbsent(kSpace, *candidate, result, "job-1"));
      ++stored;
    }
    return stored;
  }

  std::unique_ptr<ResultCache> cache_;
  std::unique_ptr<CostModelStore> store_;
};

TEST_F(CostModelTrainerTest, RowsComeFromMeasuredResultsOnly) {
  const int measured = StoreTask(512, 1024, 30);
  ASSERT_GT(measured, 10);
  StoreTask(256, 2048, 30, forge::v1::MEASUREMENT_KIND_PREDICTED);
  const absl::StatusOr<TrainingSet> set = CollectTrainingSet(*redis_, *cache_, kSpace);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->results_seen, measured);
  EXPECT_EQ(static_cast<int>(set->rows.size()) + set->skipped, measured);
  EXPECT_EQ(set->skipped, 0);
  for (const cost::TrainingRow& row : set->rows) {
    EXPECT_EQ(row.features.size(), cost::FeatureNames().size());
    EXPECT_GT(row.measured_seconds, 0);
    EXPECT_GE(row.measured_seconds, row.analytic_seconds * 0.999);
  }
  EXPECT_EQ(CollectTrainingSet(*redis_, *cache_, "predicted:H200").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CostModelTrainerTest, TrainsOverTheThresholdAndVersionsEachRetraining) {
  CostModelTrainer trainer(redis_.get(), cache_.get(), store_.get(),
                           {.retrain_every = 20, .train = {.rounds = 30}});
  StoreTask(512, 1024, 40);
  StoreTask(128, 4096, 40);
  absl::StatusOr<TrainOutcome> outcome = trainer.MaybeTrain(kSpace);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->trained);
  EXPECT_EQ(outcome->version, 0);
  EXPECT_THAT(outcome->reason, HasSubstr("too little data"));
  EXPECT_EQ(*store_->Version(kSpace), 0);

  StoreTask(1024, 512, 40);
  StoreTask(64, 8192, 40);
  StoreTask(2048, 256, 40);
  outcome = trainer.MaybeTrain(kSpace);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_TRUE(outcome->trained) << outcome->reason;
  EXPECT_EQ(outcome->version, 1);
  EXPECT_EQ(outcome->tasks, 5);
  EXPECT_GE(outcome->rows, cost::kMinTrainingRows);
  const std::optional<cost::VersionedModel> stored = *store_->Get(kSpace);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->model.training_rows(), outcome->rows);
  // Stored with it: the error of a model trained without one of the five tasks, on that task.
  const forge::v1::CostModelEvaluation& held_out = stored->held_out;
  EXPECT_GT(held_out.test_rows(), 0);
  EXPECT_EQ(held_out.train_rows() + held_out.test_rows(), outcome->rows);
  ASSERT_EQ(held_out.errors_size(), 2);
  EXPECT_EQ(held_out.errors(0).family(), forge::v1::KERNEL_FAMILY_REDUCTION);
  EXPECT_EQ(held_out.errors(0).tasks(), 1);
  EXPECT_EQ(held_out.errors(1).rows(), held_out.test_rows());
  EXPECT_GE(held_out.errors(1).median_percent_error(), 0);

  // Nothing new: the same version.
  outcome = trainer.MaybeTrain(kSpace);
  EXPECT_FALSE(outcome->trained);
  EXPECT_EQ(outcome->version, 1);
  EXPECT_THAT(outcome->reason, HasSubstr("0 new results since version 1"));

  ASSERT_GE(StoreTask(32, 16384, 40), 20);
  outcome = trainer.MaybeTrain(kSpace);
  ASSERT_TRUE(outcome->trained) << outcome->reason;
  EXPECT_EQ(outcome->version, 2);
  EXPECT_EQ(outcome->tasks, 6);
  EXPECT_EQ(*store_->Version(kSpace), 2);
}

}  // namespace
}  // namespace forge::server
