// `forge watch` (and `forge submit --wait`): a job's progress from WatchJob's event stream.
//
// Per task it shows the best candidate's time, its speedup over eager, its % of the roofline floor
// and its bottleneck (BottleneckHint, inspect.h: memory- or compute-bound from the task's flops
// and min_bytes against the GPU's ceilings, and how much of that ceiling the time reaches). Times
// the emulated backend predicted are marked PREDICTED.
//
// Three renderings: a view redrawn in place with ANSI escapes (for a terminal), one plain line per
// event (for logs and pipes), or one JSON object per event (JobEvent in protobuf's JSON mapping).
#ifndef FORGE_CLIENT_FORGE_WATCH_H_
#define FORGE_CLIENT_FORGE_WATCH_H_

#include <deque>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/forge/connection.h"
#include "common/arch/arch.h"
#include "forge/v1/service.pb.h"
#include "forge/v1/task.pb.h"

namespace forge::client {

enum class WatchOutput { kTerminal, kLog, kJsonLines };

struct WatchOptions {
  std::string gpu = "h200";  // whose ceilings classify bottlenecks (a name FindGpu knows)
  WatchOutput output = WatchOutput::kLog;
  int terminal_width = 120;  // kTerminal: longer lines are cut, so that redrawing stays aligned
  absl::Duration redraw_interval = absl::Milliseconds(100);  // kTerminal: at most this often
  int max_task_rows = 25;  // kTerminal: the tasks with most baseline time first
};

// A job as its events so far describe it.
class JobView {
 public:
  // `tasks` in display order (GetResults': most baseline time first).
  JobView(GpuArch gpu, forge::v1::Job job, const std::vector<forge::v1::KernelTask>& tasks);

  void Apply(const forge::v1::JobEvent& event);

  const forge::v1::Job& job() const { return job_; }
  // Candidates finished per second over the last 10 s of event time; 0 before two samples.
  double CandidatesPerSecond() const;
  // The full view: header, progress bar, model speedup, one row per task (at most `max_rows`),
  // each line at most `width` characters.
  std::string Frame(int width, int max_rows) const;
  // One line (no newline) describing `event`, which was the last one applied.
  std::string LogLine(const forge::v1::JobEvent& event) const;

 private:
  struct TaskState {
    forge::v1::KernelTask task;  // only the digest when the job's task list lacked it
    bool started = false;
    std::optional<forge::v1::TaskImproved> best;
    std::optional<forge::v1::TaskFinished> finished;
  };
  TaskState& Task(const std::string& digest);
  // "123.4 us, 1.35x eager, 71% of floor, memory-bound at 62% of bandwidth", PREDICTED marked.
  std::string Describe(const TaskState& task) const;
  bool AnyPredicted() const;

  GpuArch gpu_;
  forge::v1::Job job_;
  std::vector<TaskState> tasks_;
  absl::flat_hash_map<std::string, size_t> task_index_;
  std::deque<std::pair<absl::Time, int64_t>> finished_counts_;  // (event time, candidates done)
};

// Follows the job until it ends, rendering to `out` as `options` say; returns the job's final
// record (GetJob after the stream's end). NotFound for an unknown job or GPU.
absl::StatusOr<forge::v1::Job> FollowJob(JobClient& client, absl::string_view job_id,
                                         const WatchOptions& options, std::ostream& out);

// Blocks until the job ends, rendering nothing; returns its final record.
absl::StatusOr<forge::v1::Job> WaitForJob(JobClient& client, absl::string_view job_id);

// kExitOk for a DONE job, kExitJobUnsuccessful for a FAILED or CANCELLED one.
int ExitCodeForJob(const forge::v1::Job& job);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_WATCH_H_
