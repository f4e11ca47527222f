#include "compiler/cost/learned/held_out.h"

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "compiler/cost/learned/cost_predictor.h"
#include "compiler/cost/learned/evaluation.h"
#include "compiler/cost/learned/features.h"

namespace forge::cost {
namespace {

// The held-back rows of one family (or all), scored.
struct Selection {
  std::vector<double> predicted, analytic, measured;
  std::vector<std::string> tasks;
  bool learned = false;  // any row predicted by the learned model
};

forge::v1::CostModelError ErrorOf(forge::v1::KernelFamily family, const Selection& selection) {
  const GroupedScores scores =
      ScoreByTask(selection.predicted, selection.measured, selection.tasks);
  const GroupedScores analytic =
      ScoreByTask(selection.analytic, selection.measured, selection.tasks);
  forge::v1::CostModelError error;
  error.set_family(family);
  error.set_rows(scores.rows);
  error.set_tasks(scores.tasks);
  error.set_median_percent_error(scores.median_ape);
  error.set_mean_percent_error(scores.mean_ape);
  if (!std::isnan(scores.spearman)) error.set_spearman(scores.spearman);
  error.set_source(selection.learned ? "learned" : "analytic");
  error.set_analytic_median_percent_error(analytic.median_ape);
  return error;
}

}  // namespace

absl::StatusOr<std::optional<forge::v1::CostModelEvaluation>> EvaluateHeldOut(
    absl::Span<const TrainingRow> rows, const TrainOptions& options) {
  std::set<std::string> task_set;
  for (const TrainingRow& row : rows) task_set.insert(row.group);
  std::set<std::string> held;
  int index = 0;
  for (const std::string& task : task_set) {
    if (++index % kHoldOutEvery == 0) held.insert(task);
  }
  if (task_set.size() < 2) return std::nullopt;
  if (held.empty()) held.insert(*task_set.rbegin());  // fewer tasks than kHoldOutEvery: the last
  std::vector<TrainingRow> train;
  std::vector<const TrainingRow*> test;
  for (const TrainingRow& row : rows) {
    if (held.contains(row.group)) {
      test.push_back(&row);
    } else {
      train.push_back(row);
    }
  }
  FORGE_ASSIGN_OR_RETURN(const LearnedModel model, LearnedModel::Train(train, options));
  std::vector<std::vector<float>> features;
  std::vector<double> analytic;
  for (const TrainingRow* row : test) {
    features.push_back(row->features);
    analytic.push_back(row->analytic_seconds);
  }
  FORGE_ASSIGN_OR_RETURN(const std::vector<double> learned,
                         model.PredictSeconds(features, analytic));
  std::map<int, Selection> by_family;  // 0: all
  for (size_t i = 0; i < test.size(); ++i) {
    const int family = TaskFamilyOf(test[i]->features);
    const bool serves = LearnedModelServes(model, family);
    for (const int key : {family, 0}) {
      Selection& selection = by_family[key];
      selection.predicted.push_back(serves ? learned[i] : test[i]->analytic_seconds);
      selection.analytic.push_back(test[i]->analytic_seconds);
      selection.measured.push_back(test[i]->measured_seconds);
      selection.tasks.push_back(test[i]->group);
      selection.learned = selection.learned || serves;
    }
  }
  forge::v1::CostModelEvaluation evaluation;
  evaluation.set_method(absl::StrCat("held out by task: every ", kHoldOutEvery,
                                     "th task digest in sorted order (", held.size(), " of ",
                                     task_set.size(), " tasks); model trained on the others"));
  evaluation.set_train_rows(static_cast<int64_t>(train.size()));
  evaluation.set_test_rows(static_cast<int64_t>(test.size()));
  for (const auto& [family, selection] : by_family) {
    if (family == 0) continue;
    *evaluation.add_errors() = ErrorOf(static_cast<forge::v1::KernelFamily>(family), selection);
  }
  *evaluation.add_errors() = ErrorOf(forge::v1::KERNEL_FAMILY_UNSPECIFIED, by_family[0]);
  return evaluation;
}

}  // namespace forge::cost
