#include "compiler/cost/learned/cost_predictor.h"

#include <utility>

#include "common/status/status_macros.h"

namespace forge::cost {
namespace {

bool Usable(const VersionedModel* model) {
  return model != nullptr && model->model.training_rows() >= kMinTrainingRows &&
         model->model.training_groups() >= kMinTrainingGroups;
}

}  // namespace

absl::string_view PredictionSourceName(PredictionSource source) {
  switch (source) {
    case PredictionSource::kAnalytic: return "analytic";
    case PredictionSource::kLearned: return "learned";
  }
  return "unknown";
}

void CostPredictor::SetModel(std::optional<VersionedModel> model) {
  std::shared_ptr<const VersionedModel> next =
      model.has_value() ? std::make_shared<const VersionedModel>(*std::move(model)) : nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  model_ = std::move(next);
}

std::shared_ptr<const VersionedModel> CostPredictor::Current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return model_;
}

int64_t CostPredictor::model_version() const {
  const std::shared_ptr<const VersionedModel> model = Current();
  return model == nullptr ? 0 : model->version;
}

bool CostPredictor::UsesLearnedModel() const { return Usable(Current().get()); }

absl::StatusOr<CostPrediction> CostPredictor::Predict(const CandidateDescription& candidate) const {
  FORGE_ASSIGN_OR_RETURN(const std::vector<float> features, ExtractFeatures(candidate));
  CostPrediction prediction;
  prediction.seconds = candidate.analytic_seconds;
  prediction.analytic_seconds = candidate.analytic_seconds;
  const std::shared_ptr<const VersionedModel> model = Current();
  if (!Usable(model.get()) ||
      model->model.family_rows(static_cast<int>(candidate.task->family())) < kMinFamilyRows) {
    return prediction;
  }
  const absl::StatusOr<double> learned =
      model->model.PredictSeconds(features, candidate.analytic_seconds);
  if (!learned.ok() || !(*learned > 0)) return prediction;
  prediction.seconds = *learned;
  prediction.source = PredictionSource::kLearned;
  prediction.model_version = model->version;
  return prediction;
}

}  // namespace forge::cost
