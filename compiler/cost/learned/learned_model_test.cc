// The learned model with the real XGBoost: training on the synthetic dataset cuts the error on
// tasks it never saw, both targets; serialization round-trips; bad input is an error.
#include "compiler/cost/learned/learned_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compiler/cost/learned/features.h"
#include "compiler/cost/learned/testing/synthetic_dataset.h"
#include "forge/v1/task.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xgboost/c_api.h"

namespace forge::cost {
namespace {

using ::testing::HasSubstr;

// Mean absolute percentage error of `predicted` against the rows' measured times.
double Mape(const std::vector<TrainingRow>& rows, const std::vector<double>& predicted) {
  double sum = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    sum += std::abs(predicted[i] - rows[i].measured_seconds) / rows[i].measured_seconds;
  }
  return 100 * sum / rows.size();
}

class LearnedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::StatusOr<std::vector<testing::SyntheticCandidate>> candidates =
        testing::SyntheticPointwise(*FindGpu("H200"), 12);
    ASSERT_TRUE(candidates.ok()) << candidates.status();
    // Tasks 0-8 train, 9-11 are held out: no task is on both sides.
    for (const TrainingRow& row : testing::RowsOf(*candidates)) {
      const bool held_out = row.group == "synthetic-9" || row.group == "synthetic-10" ||
                            row.group == "synthetic-11";
      (held_out ? test_ : train_).push_back(row);
    }
  }

  std::vector<std::vector<float>> TestFeatures() const {
    std::vector<std::vector<float>> features;
    for (const TrainingRow& row : test_) features.push_back(row.features);
    return features;
  }
  std::vector<double> TestAnalytic() const {
    std::vector<double> analytic;
    for (const TrainingRow& row : test_) analytic.push_back(row.analytic_seconds);
    return analytic;
  }

  std::vector<TrainingRow> train_;
  std::vector<TrainingRow> test_;
};

TEST_F(LearnedModelTest, TrainingCutsTheErrorOnHeldOutTasks) {
  const double analytic_mape = Mape(test_, TestAnalytic());
  ASSERT_GT(analytic_mape, 8);  // the hidden rule is there to learn
  // The ratio to the analytic model: the trees learn the rule, the analytic model keeps the
  // scale of tasks of other sizes.
  const absl::StatusOr<LearnedModel> model =
      LearnedModel::Train(train_, {.target = Target::kLogRatioToAnalytic});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->target(), Target::kLogRatioToAnalytic);
  EXPECT_EQ(model->training_rows(), static_cast<int64_t>(train_.size()));
  EXPECT_EQ(model->training_groups(), 9);
  const absl::StatusOr<std::vector<double>> predicted =
      model->PredictSeconds(TestFeatures(), TestAnalytic());
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  const double learned_mape = Mape(test_, *predicted);
  EXPECT_LT(learned_mape, analytic_mape / 2)
      << "analytic " << analytic_mape << "%, learned " << learned_mape << "%";
}

TEST_F(LearnedModelTest, LogTimeTargetLearnsTheTrainingTasks) {
  // Trees over the log time predict in steps of the training data's times: on the training tasks
  // themselves they beat the analytic model (on tasks of unseen sizes they may not, which is why
  // the ratio is the default target: benchmarks/cost_model).
  const LearnedModel model = *LearnedModel::Train(train_, {.target = Target::kLogSeconds});
  std::vector<std::vector<float>> features;
  std::vector<double> analytic;
  for (const TrainingRow& row : train_) {
    features.push_back(row.features);
    analytic.push_back(row.analytic_seconds);
  }
  EXPECT_LT(Mape(train_, *model.PredictSeconds(features, analytic)), Mape(train_, analytic) / 2);
}

TEST_F(LearnedModelTest, SerializationRoundTripsPredictionsAndAttributes) {
  const LearnedModel model = *LearnedModel::Train(train_, {.rounds = 50});
  const absl::StatusOr<std::string> bytes = model.Serialize();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const absl::StatusOr<LearnedModel> loaded = LearnedModel::Deserialize(*bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->target(), model.target());
  EXPECT_EQ(loaded->training_rows(), model.training_rows());
  EXPECT_EQ(loaded->training_groups(), model.training_groups());
  EXPECT_EQ(loaded->family_rows(forge::v1::KERNEL_FAMILY_POINTWISE),
            static_cast<int64_t>(train_.size()));
  EXPECT_EQ(loaded->family_rows(forge::v1::KERNEL_FAMILY_REDUCTION), 0);
  EXPECT_EQ(*loaded->PredictSeconds(TestFeatures(), TestAnalytic()),
            *model.PredictSeconds(TestFeatures(), TestAnalytic()));
  const auto importance = loaded->Importance();
  ASSERT_TRUE(importance.ok()) << importance.status();
  ASSERT_FALSE(importance->empty());
  // The hidden rule is about vector width; names come back as the schema's.
  bool named = false;
  for (const auto& [name, gain] : *importance) named |= name == "hint_vector_width";
  EXPECT_TRUE(named);
}

// SHAP contributions: they and the bias add up to the predicted target (here the log of the
// ratio to the analytic time), and the hidden rule's feature drives a scalar launch.
TEST_F(LearnedModelTest, ExplainSumsToThePredictionAndNamesTheVectorWidth) {
  const LearnedModel model = *LearnedModel::Train(train_, {});
  size_t scalar = 0;
  const size_t width = static_cast<size_t>(
      std::find(FeatureNames().begin(), FeatureNames().end(), "hint_vector_width") -
      FeatureNames().begin());
  while (test_[scalar].features[width] != 1) ++scalar;
  const absl::StatusOr<LearnedModel::Contributions> explained =
      model.Explain(test_[scalar].features);
  ASSERT_TRUE(explained.ok()) << explained.status();
  double sum = explained->bias;
  for (const auto& [name, value] : explained->features) sum += value;
  const double predicted =
      *model.PredictSeconds(test_[scalar].features, test_[scalar].analytic_seconds);
  EXPECT_NEAR(sum, std::log(predicted / test_[scalar].analytic_seconds), 1e-3);
  ASSERT_FALSE(explained->features.empty());
  bool found = false;
  for (size_t i = 0; i < std::min<size_t>(3, explained->features.size()); ++i) {
    found |= explained->features[i].first == "hint_vector_width";
  }
  EXPECT_TRUE(found) << explained->features.front().first;
  for (size_t i = 1; i < explained->features.size(); ++i) {
    EXPECT_GE(std::abs(explained->features[i - 1].second),
              std::abs(explained->features[i].second));
  }
  std::vector<float> short_row = test_[scalar].features;
  short_row.pop_back();
  EXPECT_FALSE(model.Explain(short_row).ok());
}

TEST_F(LearnedModelTest, RefusesBytesThatAreNotAForgeModel) {
  EXPECT_THAT(LearnedModel::Deserialize("").status().message(), HasSubstr("empty"));
  EXPECT_THAT(LearnedModel::Deserialize("not a model").status().message(),
              HasSubstr("not an XGBoost model"));
  // A real XGBoost model without Forge's attributes.
  const float data[] = {1, 2, 3, 4};
  const float labels[] = {1, 2};
  DMatrixHandle matrix = nullptr;
  ASSERT_EQ(XGDMatrixCreateFromMat(data, 2, 2, -1, &matrix), 0);
  ASSERT_EQ(XGDMatrixSetFloatInfo(matrix, "label", labels, 2), 0);
  BoosterHandle booster = nullptr;
  ASSERT_EQ(XGBoosterCreate(&matrix, 1, &booster), 0);
  ASSERT_EQ(XGBoosterUpdateOneIter(booster, 0, matrix), 0);
  bst_ulong length = 0;
  const char* raw = nullptr;
  ASSERT_EQ(XGBoosterSaveModelToBuffer(booster, R"({"format": "ubj"})", &length, &raw), 0);
  const std::string foreign(raw, length);
  XGBoosterFree(booster);
  XGDMatrixFree(matrix);
  EXPECT_THAT(LearnedModel::Deserialize(foreign).status().message(),
              HasSubstr("not a Forge performance model"));
}

TEST_F(LearnedModelTest, BadRowsAreErrors) {
  EXPECT_THAT(LearnedModel::Train({}, {}).status().message(), HasSubstr("no training rows"));
  std::vector<TrainingRow> rows = {train_.front()};
  rows[0].measured_seconds = 0;
  EXPECT_THAT(LearnedModel::Train(rows, {}).status().message(), HasSubstr("positive finite"));
  rows[0] = train_.front();
  rows[0].features.pop_back();
  EXPECT_THAT(LearnedModel::Train(rows, {}).status().message(), HasSubstr("schema has"));
  const LearnedModel model = *LearnedModel::Train(train_, {.rounds = 5});
  EXPECT_THAT(model.PredictSeconds(TestFeatures(), {}).status().message(),
              HasSubstr("analytic predictions"));
  EXPECT_EQ(ParseTarget("log_seconds").value(), Target::kLogSeconds);
  EXPECT_FALSE(ParseTarget("seconds").ok());
}

}  // namespace
}  // namespace forge::cost
