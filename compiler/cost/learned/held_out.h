// The measured error of a learned model on results it was not trained on, as the trainer stores
// it with every model version (server/cost_model_trainer.h) and reports show it: the rows are split
// by task (every kHoldOutEvery-th task digest in sorted order is held back, so no task has rows on
// both sides), a model is trained on the rest with the same options, and the held-back rows are
// predicted as CostPredictor would predict them (the learned model for families it saw
// kMinFamilyRows rows of, the analytic model otherwise). Scores per task family and over all
// held-back rows: median and mean absolute percentage error and Spearman within each task, with
// the analytic model's median error over the same rows. Never the training error.
//
// The served model is trained on every row afterwards, so its error on new tasks is estimated by a
// model trained on four fifths of the data: a slightly pessimistic estimate.
#ifndef FORGE_COMPILER_COST_LEARNED_HELD_OUT_H_
#define FORGE_COMPILER_COST_LEARNED_HELD_OUT_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compiler/cost/learned/learned_model.h"
#include "forge/v1/service.pb.h"

namespace forge::cost {

inline constexpr int kHoldOutEvery = 5;

// The held-out evaluation of `rows` (TrainingRow.group: the task digest). nullopt when the rows
// span fewer than two tasks or kHoldOutEvery leaves no task to hold back. XGBoost's errors as
// LearnedModel::Train's.
absl::StatusOr<std::optional<forge::v1::CostModelEvaluation>> EvaluateHeldOut(
    absl::Span<const TrainingRow> rows, const TrainOptions& options);

}  // namespace forge::cost

#endif  // FORGE_COMPILER_COST_LEARNED_HELD_OUT_H_
