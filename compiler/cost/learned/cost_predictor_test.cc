// The predictor: the analytic prediction without a model or with one trained on too little, the
// learned one (with its version) otherwise; models swap while in use.
#include "compiler/cost/learned/cost_predictor.h"

#include "compiler/cost/learned/testing/synthetic_dataset.h"
#include "gtest/gtest.h"

namespace forge::cost {
namespace {

class CostPredictorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    candidates_ = *testing::SyntheticPointwise(gpu_, 8);
    rows_ = testing::RowsOf(candidates_);
  }
  CandidateDescription Candidate(size_t i) const {
    const testing::SyntheticCandidate& c = candidates_[i];
    return {.gpu = &gpu_,
            .task = &c.task,
            .plan = &c.plan,
            .resources = c.resources,
            .analytic_seconds = c.row.analytic_seconds};
  }

  GpuArch gpu_ = *FindGpu("H200");
  std::vector<testing::SyntheticCandidate> candidates_;
  std::vector<TrainingRow> rows_;
};

TEST_F(CostPredictorTest, WithoutAModelTheAnalyticPredictionIsTheAnswer) {
  const CostPredictor predictor;
  EXPECT_EQ(predictor.model_version(), 0);
  EXPECT_FALSE(predictor.UsesLearnedModel());
  const CostPrediction prediction = *predictor.Predict(Candidate(3));
  EXPECT_EQ(prediction.source, PredictionSource::kAnalytic);
  EXPECT_EQ(prediction.seconds, candidates_[3].row.analytic_seconds);
  EXPECT_EQ(prediction.model_version, 0);
}

TEST_F(CostPredictorTest, AModelTrainedOnTooFewTasksIsNotUsed) {
  // Every row of three tasks: enough rows, too few tasks.
  std::vector<TrainingRow> three_tasks;
  for (const TrainingRow& row : rows_) {
    if (row.group == "synthetic-0" || row.group == "synthetic-1" || row.group == "synthetic-2") {
      three_tasks.push_back(row);
    }
  }
  ASSERT_GE(static_cast<int64_t>(three_tasks.size()), kMinTrainingRows);
  CostPredictor predictor;
  predictor.SetModel(VersionedModel{.version = 1, .model = *LearnedModel::Train(three_tasks, {})});
  EXPECT_EQ(predictor.model_version(), 1);
  EXPECT_FALSE(predictor.UsesLearnedModel());
  EXPECT_EQ(predictor.Predict(Candidate(0))->source, PredictionSource::kAnalytic);
}

TEST_F(CostPredictorTest, AModelOverTheThresholdPredictsWithItsVersion) {
  CostPredictor predictor;
  predictor.SetModel(VersionedModel{.version = 7, .model = *LearnedModel::Train(rows_, {})});
  ASSERT_TRUE(predictor.UsesLearnedModel());
  // A scalar point with several elements per thread: the hidden 30% the analytic model misses.
  size_t scalar = 0;
  while (!(candidates_[scalar].plan.hints.vector_width == 1 &&
           candidates_[scalar].plan.hints.unrolled_elements == 4 &&
           candidates_[scalar].plan.launch.block[0] == 256)) {
    ++scalar;
  }
  const CostPrediction prediction = *predictor.Predict(Candidate(scalar));
  EXPECT_EQ(prediction.source, PredictionSource::kLearned);
  EXPECT_EQ(prediction.model_version, 7);
  EXPECT_EQ(prediction.analytic_seconds, candidates_[scalar].row.analytic_seconds);
  const double measured = candidates_[scalar].row.measured_seconds;
  EXPECT_LT(std::abs(prediction.seconds - measured), std::abs(prediction.analytic_seconds - measured));

  predictor.SetModel(std::nullopt);
  EXPECT_EQ(predictor.Predict(Candidate(scalar))->source, PredictionSource::kAnalytic);
}

TEST_F(CostPredictorTest, AFamilyTheModelSawTooLittleOfGetsTheAnalyticPrediction) {
  CostPredictor predictor;
  predictor.SetModel(VersionedModel{.version = 2, .model = *LearnedModel::Train(rows_, {})});
  EXPECT_EQ(predictor.Predict(Candidate(5))->source, PredictionSource::kLearned);
  // The same launch as a reduction task's: the model saw no reduction.
  forge::v1::KernelTask reduction = candidates_[5].task;
  reduction.set_family(forge::v1::KERNEL_FAMILY_REDUCTION);
  CandidateDescription candidate = Candidate(5);
  candidate.task = &reduction;
  const CostPrediction prediction = *predictor.Predict(candidate);
  EXPECT_EQ(prediction.source, PredictionSource::kAnalytic);
  EXPECT_EQ(prediction.seconds, candidates_[5].row.analytic_seconds);
}

// A family the model's held-out evaluation measured worse than the analytic model gets the
// analytic prediction, whatever its row count; a family measured better, or not measured, the
// learned one.
TEST_F(CostPredictorTest, AFamilyWorseThanAnalyticHeldOutGetsTheAnalyticPrediction) {
  forge::v1::CostModelEvaluation held_out;
  forge::v1::CostModelError* pointwise = held_out.add_errors();
  pointwise->set_family(forge::v1::KERNEL_FAMILY_POINTWISE);
  pointwise->set_source("learned");
  pointwise->set_median_percent_error(12);
  pointwise->set_analytic_median_percent_error(30);
  CostPredictor predictor;
  predictor.SetModel(VersionedModel{
      .version = 2, .model = *LearnedModel::Train(rows_, {.rounds = 20}), .held_out = held_out});
  EXPECT_EQ(predictor.Predict(Candidate(1))->source, PredictionSource::kLearned);
  held_out.mutable_errors(0)->set_median_percent_error(45);
  predictor.SetModel(VersionedModel{
      .version = 3, .model = *LearnedModel::Train(rows_, {.rounds = 20}), .held_out = held_out});
  const CostPrediction prediction = *predictor.Predict(Candidate(1));
  EXPECT_EQ(prediction.source, PredictionSource::kAnalytic);
  EXPECT_EQ(prediction.seconds, candidates_[1].row.analytic_seconds);
  EXPECT_TRUE(HeldOutPrefersAnalytic(held_out, forge::v1::KERNEL_FAMILY_POINTWISE));
  EXPECT_FALSE(HeldOutPrefersAnalytic(held_out, forge::v1::KERNEL_FAMILY_REDUCTION));
}

// A model as the coordinator sends it (CostModelService): installed when its version is new, kept
// when the version is the same, refused without usable bytes, dropped at version 0.
TEST_F(CostPredictorTest, InstallTakesNewVersionsOnly) {
  CostPredictor predictor;
  const LearnedModel model = *LearnedModel::Train(rows_, {.rounds = 10});
  forge::v1::GetCostModelResponse response;
  response.set_space("NVIDIA H200");
  response.set_version(5);
  EXPECT_EQ(predictor.Install(response).status().code(), absl::StatusCode::kInvalidArgument);
  response.set_model("not a model");
  EXPECT_EQ(predictor.Install(response).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(predictor.model_version(), 0);
  response.set_model(*model.Serialize());
  response.mutable_held_out()->set_test_rows(9);
  EXPECT_TRUE(*predictor.Install(response));
  EXPECT_EQ(predictor.model_version(), 5);
  EXPECT_EQ(predictor.model()->held_out.test_rows(), 9);
  EXPECT_EQ(PredictedBy(*predictor.Predict(Candidate(1))), "learned v5");
  response.clear_model();
  EXPECT_FALSE(*predictor.Install(response));  // same version, no bytes: nothing to do
  EXPECT_EQ(predictor.model_version(), 5);
  response.set_version(0);
  EXPECT_TRUE(*predictor.Install(response));
  EXPECT_EQ(predictor.model_version(), 0);
  EXPECT_EQ(PredictedBy(*predictor.Predict(Candidate(1))), "analytic");
}

}  // namespace
}  // namespace forge::cost
