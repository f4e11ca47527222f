// Job budgets: trial targets by eager-time share, wall budgets and the stop rules.
#include "server/job_budget.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::server {
namespace {

using ::testing::Optional;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

forge::v1::KernelTask Task(const std::string& digest, int occurrences = 1) {
  forge::v1::KernelTask task;
  task.set_digest(digest);
  task.set_occurrences(occurrences);
  return task;
}

TaskProgress Measured(double eager_us) {
  TaskProgress progress;
  progress.baseline_in = true;
  progress.eager_us = eager_us;
  return progress;
}

TaskProgress Failed() {
  TaskProgress progress;
  progress.baseline_in = true;
  progress.baseline_failed = true;
  return progress;
}

const BudgetOptions kOptions{.default_trials_per_task = 10, .min_trials_per_task = 2,
                             .near_roofline_percent = 95};

TEST(TrialTargetsTest, UnknownUntilEveryBaselineIsIn) {
  const std::vector<forge::v1::KernelTask> tasks = {Task("a"), Task("b")};
  EXPECT_EQ(TrialTargets(tasks, {{"a", Measured(10)}}, 0, kOptions), std::nullopt);
  EXPECT_EQ(TrialTargets(tasks, {{"a", Measured(10)}, {"b", TaskProgress()}}, 0, kOptions),
            std::nullopt);
}

TEST(TrialTargetsTest, SpreadsTheBudgetByEagerTimeTimesOccurrencesWithAMinimum) {
  // Eager times in the job: a 30 us x 3 = 90, b 10 us = 10, c failed: nothing.
  const std::vector<forge::v1::KernelTask> tasks = {Task("a", 3), Task("b"), Task("c")};
  const std::map<std::string, TaskProgress> progress = {
      {"a", Measured(30)}, {"b", Measured(10)}, {"c", Failed()}};
  EXPECT_THAT(EagerTimes(tasks, progress), UnorderedElementsAre(Pair("a", 90.0), Pair("b", 10.0)));
  // The job's own budget: 50 trials -> 45 and 5; the failed task gets the minimum.
  EXPECT_THAT(TrialTargets(tasks, progress, 50, kOptions),
              Optional(UnorderedElementsAre(Pair("a", 45), Pair("b", 5), Pair("c", 2))));
  // No budget set: 10 per searchable task (2 of them) = 20 -> 18 and 2.
  EXPECT_THAT(TrialTargets(tasks, progress, 0, kOptions),
              Optional(UnorderedElementsAre(Pair("a", 18), Pair("b", 2), Pair("c", 2))));
}

TEST(TrialTargetsTest, EveryBaselineFailedGivesTheMinimum) {
  const std::vector<forge::v1::KernelTask> tasks = {Task("a")};
  EXPECT_THAT(TrialTargets(tasks, {{"a", Failed()}}, 0, kOptions),
              Optional(UnorderedElementsAre(Pair("a", 2))));
}

TEST(OutOfTimeTest, OnlyWithAWallBudgetThatHasPassed) {
  JobRun job;
  job.started = absl::FromUnixSeconds(1000);
  EXPECT_FALSE(OutOfTime(job, job.started + absl::Hours(100)));
  job.options.mutable_budget()->set_max_wall_seconds(60);
  EXPECT_FALSE(OutOfTime(job, job.started + absl::Seconds(60)));
  EXPECT_TRUE(OutOfTime(job, job.started + absl::Seconds(61)));
}

TEST(StopReasonTest, FollowsTheRulesInOrder) {
  TaskProgress task = Measured(10);
  task.recorded = 3;
  EXPECT_EQ(StopReason(task, 5, /*out_of_time=*/false, kOptions), std::nullopt);
  EXPECT_EQ(StopReason(task, 5, /*out_of_time=*/true, kOptions),
            forge::v1::TASK_STOP_REASON_BUDGET_EXHAUSTED);
  EXPECT_EQ(StopReason(Failed(), std::nullopt, false, kOptions),
            forge::v1::TASK_STOP_REASON_SPACE_EXHAUSTED);
  // Nothing else stops a task before its eager time and the targets are known.
  TaskProgress waiting;
  waiting.exhausted = true;
  EXPECT_EQ(StopReason(waiting, 5, false, kOptions), std::nullopt);
  task.exhausted = true;
  EXPECT_EQ(StopReason(task, std::nullopt, false, kOptions), std::nullopt);
  EXPECT_EQ(StopReason(task, 5, false, kOptions), forge::v1::TASK_STOP_REASON_SPACE_EXHAUSTED);
  task.best_percent_of_floor = 95;
  EXPECT_EQ(StopReason(task, 5, false, kOptions), forge::v1::TASK_STOP_REASON_NEAR_ROOFLINE);
}

TEST(StopReasonTest, ABudgetIsMetOnlyWithNothingOutWithWorkers) {
  TaskProgress task = Measured(10);
  task.best_percent_of_floor = 50;
  task.recorded = 5;
  task.in_flight = 1;
  EXPECT_EQ(StopReason(task, 5, false, kOptions), std::nullopt);
  EXPECT_EQ(TrialsWanted(5, task), -1);
  task.in_flight = 0;
  EXPECT_EQ(StopReason(task, 5, false, kOptions), forge::v1::TASK_STOP_REASON_BUDGET_EXHAUSTED);
  task.recorded = 2;
  EXPECT_EQ(TrialsWanted(5, task), 3);
}

}  // namespace
}  // namespace forge::server
