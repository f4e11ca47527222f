// Job budgets: the task scheduler of a job. It decides how many trials each of the job's tasks
// gets and when a task, and with it the job, is done; it reads the searches' progress and writes
// nothing itself (the Scheduler stores the targets and stop reasons it returns).
//
// Rules.
//  - Trial targets: the job's trial budget (max_candidate_trials, or default_trials_per_task per
//    searchable task when the job sets none) is spread over its tasks in proportion to their
//    share of the model's eager time (a task's baseline median times its occurrences), with at
//    least min_trials_per_task each. They are known once every task's baseline is in; a task
//    whose baseline failed has no eager time and gets the minimum.
//  - A task stops, for a job, with the first of: the job's wall budget is over (budget
//    exhausted); its baseline failed (space exhausted: nothing to compare against); [only once
//    its eager time and the targets are known] its best is within near_roofline_percent of the
//    roofline floor (near roofline); its search space is exhausted; it has its target of recorded
//    trials (cached ones included) and none is out with a worker (budget exhausted).
//  - Trials still wanted: the target less those recorded and those out with workers.
//
// Pure functions over plain values: no Redis, no locking.
#ifndef FORGE_SERVER_JOB_BUDGET_H_
#define FORGE_SERVER_JOB_BUDGET_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "forge/v1/service.pb.h"
#include "forge/v1/task.pb.h"

namespace forge::server {

// A running job as the scheduler keeps it.
struct JobRun {
  std::string id;
  int64_t number = 0;  // of "job-<n>": the order of submission
  forge::v1::JobOptions options;
  std::string space;  // empty until a worker leases for it
  std::string arch;   // the compile target of that worker's GPU
  absl::Time started;
  std::vector<forge::v1::KernelTask> tasks;  // with occurrences, by digest
  std::map<std::string, int64_t> targets;    // empty until every baseline is in
  std::map<std::string, forge::v1::TaskStopReason> stopped;
  bool finished = false;  // ended; erased at the end of the current call
  double reported_speedup = 1.0;  // the best_speedup last written to the job's progress
};

// What the budget reads of one task's search in the job's space.
struct TaskProgress {
  bool baseline_in = false;      // the baseline's outcome (time or failure) is known
  bool baseline_failed = false;
  std::optional<double> eager_us;  // the baseline's median, once measured
  std::optional<double> best_percent_of_floor;  // of the best candidate measured, if any
  bool exhausted = false;  // every valid point proposed and recorded
  int64_t recorded = 0;    // trials recorded, cached ones included
  int64_t in_flight = 0;   // proposed and out with a worker (not waiting to be leased)
};

struct BudgetOptions {
  int64_t default_trials_per_task = 24;
  int64_t min_trials_per_task = 4;
  double near_roofline_percent = 95;
};

// Each task's eager time in the job (median x occurrences), for tasks whose baseline was measured.
std::map<std::string, double> EagerTimes(const std::vector<forge::v1::KernelTask>& tasks,
                                         const std::map<std::string, TaskProgress>& progress);

// The trial target per task; nullopt while some task's baseline is not in. `max_trials` is the
// job's budget (0: none set).
std::optional<std::map<std::string, int64_t>> TrialTargets(
    const std::vector<forge::v1::KernelTask>& tasks,
    const std::map<std::string, TaskProgress>& progress, int64_t max_trials,
    const BudgetOptions& options);

// True once the job has run longer than its wall budget (when it sets one).
bool OutOfTime(const JobRun& job, absl::Time now);

// Why the task stops now, or nullopt while it goes on. `target` is its trial target, nullopt
// while the targets are not known.
std::optional<forge::v1::TaskStopReason> StopReason(const TaskProgress& task,
                                                    std::optional<int64_t> target,
                                                    bool out_of_time, const BudgetOptions& options);

// Trials the task still wants toward its target (may be zero or negative).
inline int64_t TrialsWanted(int64_t target, const TaskProgress& task) {
  return target - task.recorded - task.in_flight;
}

}  // namespace forge::server

#endif  // FORGE_SERVER_JOB_BUDGET_H_
