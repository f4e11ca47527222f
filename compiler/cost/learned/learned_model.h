// The learned performance model: gradient-boosted trees (XGBoost 1.7 through its C API,
// xgboost/c_api.h) over the candidate features of features.h, trained on measured times of one
// GPU kind. It refines the analytic model (perf_model.h), whose prediction is one of its
// features, and never replaces it where it has not learned: the caller falls back to the analytic
// prediction when no model is trained yet (cost_predictor.h says when).
//
// The target is one of two (Target below), fixed at training and recorded in the model:
//  - kLogSeconds: log of the measured median time;
//  - kLogRatioToAnalytic: log of measured over the analytic prediction, so that an unfamiliar
//    candidate (trees predict a ratio near the training data's) still scales with the analytic
//    model. benchmarks/cost_model measures which predicts held-out tasks better.
//
// A model serializes to XGBoost's own binary JSON (UBJSON), with the target, the feature schema
// (FeatureSchemaDigest), the training rows, tasks and rows per task family as attributes in it; Deserialize refuses a
// model of another schema. A model is immutable after training; prediction is thread-safe.
#ifndef FORGE_COMPILER_COST_LEARNED_LEARNED_MODEL_H_
#define FORGE_COMPILER_COST_LEARNED_LEARNED_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace forge::cost {

enum class Target { kLogSeconds, kLogRatioToAnalytic };

// "log_seconds" or "log_ratio_to_analytic".
absl::string_view TargetName(Target target);
// The inverse of TargetName; InvalidArgument for another name.
absl::StatusOr<Target> ParseTarget(absl::string_view name);

// One measured candidate.
struct TrainingRow {
  std::vector<float> features;  // ExtractFeatures' row
  double measured_seconds = 0;  // the measured median (> 0)
  double analytic_seconds = 0;  // the analytic model's prediction (> 0)
  std::string group;            // the task digest: held-out evaluation splits by it
};

struct TrainOptions {
  Target target = Target::kLogRatioToAnalytic;
  int rounds = 300;
  int max_depth = 6;
  double learning_rate = 0.05;
  double subsample = 0.8;
  double min_child_weight = 2;
  int threads = 1;
  int seed = 0;
};

class LearnedModel {
 public:
  // Trains on `rows` (at least one; every row of FeatureNames().size() features, positive times).
  // InvalidArgument for bad rows; Internal with XGBoost's message when it fails.
  static absl::StatusOr<LearnedModel> Train(absl::Span<const TrainingRow> rows,
                                            const TrainOptions& options);

  // A model Serialize wrote. InvalidArgument when the bytes are not such a model or it was
  // trained on another feature schema.
  static absl::StatusOr<LearnedModel> Deserialize(absl::string_view bytes);

  // XGBoost's UBJSON with Forge's attributes.
  absl::StatusOr<std::string> Serialize() const;

  // Predicted seconds for each row of `features` with its analytic prediction.
  // InvalidArgument when the sizes disagree or a row has the wrong length.
  absl::StatusOr<std::vector<double>> PredictSeconds(
      absl::Span<const std::vector<float>> features,
      absl::Span<const double> analytic_seconds) const;
  absl::StatusOr<double> PredictSeconds(const std::vector<float>& features,
                                        double analytic_seconds) const;

  Target target() const { return target_; }
  int64_t training_rows() const { return training_rows_; }
  int64_t training_groups() const { return training_groups_; }
  // Training rows of tasks of `family` (forge.v1.KernelFamily, the task_family feature).
  int64_t family_rows(int family) const;

  // What drives the prediction for one row (XGBoost's SHAP contributions, pred_contribs): per
  // feature its additive share of the predicted target (log seconds, or log of the ratio to the
  // analytic prediction), largest magnitude first, and the bias (the training mean) apart;
  // exp(contribution) is the feature's factor on the time. Features contributing 0 are left out.
  struct Contributions {
    std::vector<std::pair<std::string, double>> features;
    double bias = 0;
  };
  absl::StatusOr<Contributions> Explain(const std::vector<float>& features) const;

  // Features by gain importance (name, total gain), largest first; for --explain and reports.
  absl::StatusOr<std::vector<std::pair<std::string, double>>> Importance() const;

 private:
  struct Booster;
  LearnedModel(std::shared_ptr<Booster> booster, Target target, int64_t rows, int64_t groups,
               std::map<int, int64_t> family_rows)
      : booster_(std::move(booster)), target_(target), training_rows_(rows),
        training_groups_(groups), family_rows_(std::move(family_rows)) {}

  std::shared_ptr<Booster> booster_;
  Target target_;
  int64_t training_rows_ = 0;
  int64_t training_groups_ = 0;
  std::map<int, int64_t> family_rows_;
};

}  // namespace forge::cost

#endif  // FORGE_COMPILER_COST_LEARNED_LEARNED_MODEL_H_
