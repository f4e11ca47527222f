#include "server/job_budget.h"

#include <algorithm>
#include <cmath>

namespace forge::server {

using ::forge::v1::KernelTask;
using ::forge::v1::TaskStopReason;

std::map<std::string, double> EagerTimes(const std::vector<KernelTask>& tasks,
                                         const std::map<std::string, TaskProgress>& progress) {
  std::map<std::string, double> eager_us;
  for (const KernelTask& task : tasks) {
    auto it = progress.find(task.digest());
    if (it == progress.end() || !it->second.eager_us.has_value()) continue;
    eager_us[task.digest()] = *it->second.eager_us * std::max(1, task.occurrences());
  }
  return eager_us;
}

std::optional<std::map<std::string, int64_t>> TrialTargets(
    const std::vector<KernelTask>& tasks, const std::map<std::string, TaskProgress>& progress,
    int64_t max_trials, const BudgetOptions& options) {
  for (const KernelTask& task : tasks) {
    auto it = progress.find(task.digest());
    if (it == progress.end() || !it->second.baseline_in) return std::nullopt;
  }
  const std::map<std::string, double> eager_us = EagerTimes(tasks, progress);
  double total_us = 0;  // summed in the tasks' order, as the shares were always computed
  for (const KernelTask& task : tasks) {
    if (auto it = eager_us.find(task.digest()); it != eager_us.end()) total_us += it->second;
  }
  const int64_t searchable = static_cast<int64_t>(eager_us.size());
  const int64_t budget = max_trials > 0
                             ? max_trials
                             : options.default_trials_per_task * std::max<int64_t>(1, searchable);
  std::map<std::string, int64_t> targets;
  for (const KernelTask& task : tasks) {
    auto it = eager_us.find(task.digest());
    const double share = total_us > 0 && it != eager_us.end() ? it->second / total_us : 0;
    targets[task.digest()] = std::max<int64_t>(options.min_trials_per_task,
                                               static_cast<int64_t>(std::llround(share * budget)));
  }
  return targets;
}

bool OutOfTime(const JobRun& job, absl::Time now) {
  const int64_t seconds = job.options.budget().max_wall_seconds();
  return seconds > 0 && now - job.started > absl::Seconds(seconds);
}

std::optional<TaskStopReason> StopReason(const TaskProgress& task, std::optional<int64_t> target,
                                         bool out_of_time, const BudgetOptions& options) {
  if (out_of_time) return forge::v1::TASK_STOP_REASON_BUDGET_EXHAUSTED;
  if (task.baseline_failed) return forge::v1::TASK_STOP_REASON_SPACE_EXHAUSTED;
  if (!task.eager_us.has_value() || !target.has_value()) return std::nullopt;
  if (task.best_percent_of_floor.has_value() &&
      *task.best_percent_of_floor >= options.near_roofline_percent) {
    return forge::v1::TASK_STOP_REASON_NEAR_ROOFLINE;
  }
  if (task.exhausted) return forge::v1::TASK_STOP_REASON_SPACE_EXHAUSTED;
  if (task.recorded >= *target && task.in_flight == 0) {
    return forge::v1::TASK_STOP_REASON_BUDGET_EXHAUSTED;
  }
  return std::nullopt;
}

}  // namespace forge::server
