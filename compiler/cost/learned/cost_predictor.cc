#include "compiler/cost/learned/cost_predictor.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace forge::cost {
namespace {

bool Usable(const VersionedModel* model) {
  return model != nullptr && model->model.training_rows() >= kMinTrainingRows &&
         model->model.training_groups() >= kMinTrainingGroups;
}

}  // namespace

bool LearnedModelServes(const LearnedModel& model, int family) {
  return model.training_rows() >= kMinTrainingRows &&
         model.training_groups() >= kMinTrainingGroups && model.family_rows(family) >= kMinFamilyRows;
}

bool HeldOutPrefersAnalytic(const forge::v1::CostModelEvaluation& held_out, int family) {
  for (const forge::v1::CostModelError& error : held_out.errors()) {
    if (static_cast<int>(error.family()) == family && error.source() == "learned" &&
        error.median_percent_error() > error.analytic_median_percent_error()) {
      return true;
    }
  }
  return false;
}

absl::string_view PredictionSourceName(PredictionSource source) {
  switch (source) {
    case PredictionSource::kAnalytic: return "analytic";
    case PredictionSource::kLearned: return "learned";
  }
  return "unknown";
}

std::string PredictedBy(const CostPrediction& prediction) {
  if (prediction.source == PredictionSource::kLearned) {
    return absl::StrCat("learned v", prediction.model_version);
  }
  return std::string(PredictionSourceName(prediction.source));
}

absl::StatusOr<bool> CostPredictor::Install(const forge::v1::GetCostModelResponse& response) {
  if (response.version() == model_version()) return false;
  if (response.version() <= 0) {
    SetModel(std::nullopt);
    return true;
  }
  if (response.model().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("performance model version ",
                                                   response.version(), " came without its bytes"));
  }
  absl::StatusOr<LearnedModel> model = LearnedModel::Deserialize(response.model());
  if (!model.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("performance model version ",
                                                   response.version(), " of ", response.space(),
                                                   ": ", model.status().message()));
  }
  SetModel(VersionedModel{.version = response.version(),
                          .model = *std::move(model),
                          .held_out = response.held_out()});
  return true;
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

absl::StatusOr<LearnedModel::Contributions> CostPredictor::Explain(
    const CandidateDescription& candidate) const {
  const std::shared_ptr<const VersionedModel> model = Current();
  if (model == nullptr) return absl::FailedPreconditionError("no learned model is installed");
  FORGE_ASSIGN_OR_RETURN(const std::vector<float> features, ExtractFeatures(candidate));
  return model->model.Explain(features);
}

absl::StatusOr<CostPrediction> CostPredictor::Predict(const CandidateDescription& candidate) const {
  FORGE_ASSIGN_OR_RETURN(const std::vector<float> features, ExtractFeatures(candidate));
  CostPrediction prediction;
  prediction.seconds = candidate.analytic_seconds;
  prediction.analytic_seconds = candidate.analytic_seconds;
  const std::shared_ptr<const VersionedModel> model = Current();
  if (model == nullptr ||
      !LearnedModelServes(model->model, static_cast<int>(candidate.task->family())) ||
      HeldOutPrefersAnalytic(model->held_out, static_cast<int>(candidate.task->family()))) {
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
