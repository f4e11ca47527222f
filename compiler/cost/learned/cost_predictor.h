// The one way Forge predicts a candidate's time: the learned model (learned_model.h) over the
// analytic model (perf_model.h) where a learned model for the GPU is loaded and was trained on
// enough data, the analytic prediction otherwise. The search's prior and the emulated backend
// compute the analytic prediction as before and pass it here with the candidate; whoever fetches
// models (the coordinator from Redis, a worker or `forge predict` from a file or the
// coordinator) installs them with SetModel. A prediction says which model made it and, for the
// learned one, its version, so that reports can label it.
//
// The fallback thresholds: a model trained on fewer than kMinTrainingRows rows or
// kMinTrainingGroups tasks is not used (few tasks teach the trees one task's quirks; the
// held-out evaluation, benchmarks/cost_model, splits by task for that reason), and a model is not
// used for a candidate whose task family it saw fewer than kMinFamilyRows rows of (on the H200
// data the learned model lost to the analytic one on the families it had 20 rows or fewer of), nor
// for a family whose held-back rows it predicted worse than the analytic model
// (HeldOutPrefersAnalytic: with the session-19 H200 points the GEMM family passed the row count
// and its cuBLASLt tasks held out had MAPE 181% against the analytic 19%:
// benchmarks/results/2026-12-02-cost-model-heldout-session19.md).
// The trainer (server/cost_model_trainer.h) does not train below the first threshold.
//
// Models travel as forge.v1.GetCostModelResponse (the coordinator's CostModelService): Install
// takes one, with the model's measured error on held-back results (held_out), which reports show
// next to the predictions it made.
//
// Thread-safe: SetModel and Install may run while other threads predict.
#ifndef FORGE_COMPILER_COST_LEARNED_COST_PREDICTOR_H_
#define FORGE_COMPILER_COST_LEARNED_COST_PREDICTOR_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/cost/learned/features.h"
#include "compiler/cost/learned/learned_model.h"
#include "forge/v1/service.pb.h"

namespace forge::cost {

inline constexpr int64_t kMinTrainingRows = 100;
inline constexpr int64_t kMinTrainingGroups = 5;
inline constexpr int64_t kMinFamilyRows = 30;

// Whether the predictor uses `model` for a candidate of task `family` (forge.v1.KernelFamily): it
// was trained on enough rows and tasks, and on kMinFamilyRows rows of the family.
bool LearnedModelServes(const LearnedModel& model, int family);

// Whether a model's held-out evaluation measured the learned model worse than the analytic one on
// `family`'s held-back rows (median error): then the predictor uses the analytic model for the
// family even where LearnedModelServes. A family without held-back rows is not judged.
bool HeldOutPrefersAnalytic(const forge::v1::CostModelEvaluation& held_out, int family);

// A learned model as stored: its version (1, 2, ... per GPU kind) and bytes' model, with its
// measured error on results held back from its training (empty when none were held back).
struct VersionedModel {
  int64_t version = 0;
  LearnedModel model;
  forge::v1::CostModelEvaluation held_out;
};

enum class PredictionSource { kAnalytic, kLearned };

// "analytic" or "learned".
absl::string_view PredictionSourceName(PredictionSource source);

struct CostPrediction {
  double seconds = 0;
  double analytic_seconds = 0;
  PredictionSource source = PredictionSource::kAnalytic;
  int64_t model_version = 0;  // 0 for the analytic model
};

// Which model made `prediction`: "analytic" or "learned vN".
std::string PredictedBy(const CostPrediction& prediction);

class CostPredictor {
 public:
  CostPredictor() = default;

  // Installs `model` (nullopt: back to the analytic model). A model under the threshold is kept
  // but not used.
  void SetModel(std::optional<VersionedModel> model);

  // Installs the model of `response` when its version differs from the installed one (version 0:
  // back to the analytic model); returns whether the installed model changed. InvalidArgument
  // when a new version comes without bytes or with bytes that are no model of this build's
  // feature schema (the installed model is kept).
  absl::StatusOr<bool> Install(const forge::v1::GetCostModelResponse& response);

  // The installed model's version (0: none).
  int64_t model_version() const;

  // What drives the installed model's prediction for `candidate` (LearnedModel::Explain), for
  // `forge predict --explain`. FailedPrecondition when no model is installed; ExtractFeatures'
  // errors.
  absl::StatusOr<LearnedModel::Contributions> Explain(const CandidateDescription& candidate) const;

  // The installed model (null: none), for its held-out error and --explain.
  std::shared_ptr<const VersionedModel> model() const { return Current(); }

  // Whether predictions use the learned model (for the families it saw enough of).
  bool UsesLearnedModel() const;

  // The prediction for `candidate` (its analytic_seconds already computed). Fails only for a
  // candidate ExtractFeatures refuses; a learned model that fails to predict falls back to the
  // analytic prediction.
  absl::StatusOr<CostPrediction> Predict(const CandidateDescription& candidate) const;

 private:
  std::shared_ptr<const VersionedModel> Current() const;

  mutable std::mutex mutex_;
  std::shared_ptr<const VersionedModel> model_;  // guarded by mutex_
};

}  // namespace forge::cost

#endif  // FORGE_COMPILER_COST_LEARNED_COST_PREDICTOR_H_
