// JobView from a hand-written event sequence: what the coordinator streams once workers report
// (tests/remote_test.cc follows real, cancelled jobs end to end).
#include "client/forge/watch.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"

namespace forge::client {
namespace {

using ::forge::v1::JobEvent;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTask[] = "aaaaaaaaaaaa0000000000000000000000000000000000000000000000000000";

// A float32 pointwise task whose floor on the H200 is its 43 MB of traffic: 10 us.
forge::v1::KernelTask MemoryBoundTask() {
  forge::v1::KernelTask task;
  task.set_digest(kTask);
  task.set_family(forge::v1::KERNEL_FAMILY_POINTWISE);
  task.add_inputs()->set_dtype(forge::v1::DTYPE_FLOAT32);
  task.set_flops(1'000'000);
  task.set_min_bytes(43'000'000);
  task.set_occurrences(1);
  return task;
}

JobEvent Event(int64_t millis, int64_t finished_candidates) {
  JobEvent event;
  event.set_job_id("job-1");
  *event.mutable_time() = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(millis);
  event.mutable_progress()->set_tasks_total(1);
  event.mutable_progress()->set_candidates_leased(finished_candidates);
  event.mutable_progress()->set_candidates_completed(finished_candidates);
  event.mutable_progress()->set_best_speedup(1.5);
  return event;
}

class JobViewTest : public ::testing::Test {
 protected:
  JobViewTest() : view_(*FindGpu("h200"), Job(), {MemoryBoundTask()}) {}

  static forge::v1::Job Job() {
    forge::v1::Job job;
    job.set_id("job-1");
    job.set_state(forge::v1::JOB_STATE_QUEUED);
    job.mutable_options()->set_target_arch("sm_90");
    (*job.mutable_options()->mutable_labels())["model"] = "toy";
    return job;
  }

  JobView view_;
};

TEST_F(JobViewTest, ShowsSpeedupFloorBottleneckAndRate) {
  JobEvent running = Event(1'000, 10);
  running.mutable_state_changed()->set_previous(forge::v1::JOB_STATE_QUEUED);
  running.mutable_state_changed()->set_current(forge::v1::JOB_STATE_RUNNING);
  view_.Apply(running);
  JobEvent started = Event(1'000, 10);
  started.mutable_task_started()->set_task_digest(kTask);
  started.mutable_task_started()->set_family(forge::v1::KERNEL_FAMILY_POINTWISE);
  view_.Apply(started);
  EXPECT_THAT(view_.Frame(200, 10), HasSubstr("searching"));

  JobEvent improved = Event(3'000, 30);
  improved.mutable_task_improved()->set_task_digest(kTask);
  improved.mutable_task_improved()->set_candidate_digest("c0ffee");
  improved.mutable_task_improved()->set_median_us(20);
  improved.mutable_task_improved()->set_speedup_vs_eager(1.5);
  improved.mutable_task_improved()->set_kind(forge::v1::MEASUREMENT_KIND_MEASURED);
  view_.Apply(improved);

  EXPECT_DOUBLE_EQ(view_.CandidatesPerSecond(), 10.0);  // 20 more over 2 s
  const std::string frame = view_.Frame(200, 10);
  EXPECT_THAT(frame, HasSubstr("forge job job-1  RUNNING  arch sm_90"));
  EXPECT_THAT(frame, HasSubstr("model toy"));
  EXPECT_THAT(frame, HasSubstr("10.0/s"));
  EXPECT_THAT(frame, HasSubstr("20.000 us, 1.50x eager, 50% of floor"));
  EXPECT_THAT(frame, HasSubstr("memory-bound at 50% of bandwidth"));
  EXPECT_THAT(frame, Not(HasSubstr("PREDICTED")));
  const std::string line = view_.LogLine(improved);
  EXPECT_THAT(line, HasSubstr("task aaaaaaaaaaaa best 20.000 us"));
  EXPECT_THAT(line, HasSubstr("memory-bound at 50% of bandwidth"));

  JobEvent predicted = improved;
  predicted.mutable_task_improved()->set_median_us(12.5);
  predicted.mutable_task_improved()->set_kind(forge::v1::MEASUREMENT_KIND_PREDICTED);
  view_.Apply(predicted);
  EXPECT_THAT(view_.Frame(200, 10), HasSubstr("80% of floor"));
  EXPECT_THAT(view_.Frame(200, 10), HasSubstr("[PREDICTED]"));
  EXPECT_THAT(view_.Frame(200, 10), HasSubstr("(PREDICTED times included)"));
  EXPECT_THAT(view_.LogLine(predicted), HasSubstr("[PREDICTED]"));

  JobEvent finished = Event(4'000, 30);
  finished.mutable_task_finished()->set_task_digest(kTask);
  finished.mutable_task_finished()->set_stop_reason(forge::v1::TASK_STOP_REASON_NEAR_ROOFLINE);
  finished.mutable_task_finished()->set_best_candidate_digest("c0ffee");
  finished.mutable_task_finished()->set_speedup_vs_eager(1.6);
  finished.mutable_task_finished()->set_candidates_tried(30);
  view_.Apply(finished);
  EXPECT_THAT(view_.Frame(200, 10), HasSubstr("done: near roofline"));
  EXPECT_THAT(view_.LogLine(finished), HasSubstr("finished (near roofline) after 30 candidates"));

  JobEvent done = Event(5'000, 30);
  done.mutable_state_changed()->set_previous(forge::v1::JOB_STATE_RUNNING);
  done.mutable_state_changed()->set_current(forge::v1::JOB_STATE_DONE);
  view_.Apply(done);
  EXPECT_EQ(view_.job().state(), forge::v1::JOB_STATE_DONE);
  EXPECT_EQ(ExitCodeForJob(view_.job()), 0);
  EXPECT_THAT(view_.Frame(200, 10), HasSubstr("\njob done\n"));
}

TEST_F(JobViewTest, FrameLinesFitTheTerminalAndTasksAreCapped) {
  JobEvent other = Event(1'000, 0);
  other.mutable_task_started()->set_task_digest("bbbbbbbbbbbb");  // not in the job's task list
  view_.Apply(other);
  const std::string frame = view_.Frame(40, 1);
  for (absl::string_view line : absl::StrSplit(frame, '\n', absl::SkipEmpty())) {
    EXPECT_LT(line.size(), 40u) << line;
  }
  EXPECT_THAT(frame, HasSubstr("... 1 more tasks"));
  EXPECT_TRUE(frame.ends_with("\n"));
}

TEST_F(JobViewTest, FailedJobShowsItsError) {
  JobEvent failed = Event(1'000, 0);
  failed.mutable_state_changed()->set_previous(forge::v1::JOB_STATE_RUNNING);
  failed.mutable_state_changed()->set_current(forge::v1::JOB_STATE_FAILED);
  failed.mutable_state_changed()->set_detail("partition lost");
  view_.Apply(failed);
  EXPECT_EQ(ExitCodeForJob(view_.job()), 1);
  EXPECT_THAT(view_.Frame(200, 10), HasSubstr("job failed: partition lost"));
  EXPECT_THAT(view_.Frame(200, 10), HasSubstr("stopped"));
  EXPECT_THAT(view_.LogLine(failed), HasSubstr("running -> failed: partition lost"));
}

}  // namespace
}  // namespace forge::client
