#include "client/forge/watch.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/forge/exit_code.h"
#include "client/forge/inspect.h"
#include "compiler/graph/cost.h"
#include "client/forge/jobs.h"
#include "client/forge/proto_json.h"
#include "common/status/status_macros.h"
#include "google/protobuf/util/time_util.h"

namespace forge::client {
namespace {

using ::forge::v1::JobEvent;
using ::forge::v1::KernelTask;

constexpr absl::Duration kRateWindow = absl::Seconds(10);
constexpr int kBarWidth = 30;

absl::Time EventTime(const JobEvent& event) {
  return absl::FromUnixMillis(
      google::protobuf::util::TimeUtil::TimestampToMilliseconds(event.time()));
}

std::string ShortDigest(const std::string& digest) { return digest.substr(0, 12); }

std::string FamilyName(forge::v1::KernelFamily family) {
  return std::string(absl::StripPrefix(forge::v1::KernelFamily_Name(family), "KERNEL_FAMILY_"));
}

std::string StopReason(forge::v1::TaskStopReason reason) {
  switch (reason) {
    case forge::v1::TASK_STOP_REASON_NEAR_ROOFLINE:
      return "near roofline";
    case forge::v1::TASK_STOP_REASON_BUDGET_EXHAUSTED:
      return "budget spent";
    case forge::v1::TASK_STOP_REASON_SPACE_EXHAUSTED:
      return "space exhausted";
    case forge::v1::TASK_STOP_REASON_JOB_CANCELLED:
      return "job cancelled";
    default:
      return "stopped";
  }
}

bool IsTerminal(forge::v1::JobState state) {
  return state == forge::v1::JOB_STATE_DONE || state == forge::v1::JOB_STATE_FAILED ||
         state == forge::v1::JOB_STATE_CANCELLED;
}

// `text` (lines ending in '\n') with every line cut to fewer than `width` characters, so that a
// terminal does not wrap it and the redraw's line count stays right.
std::string CutLines(absl::string_view text, int width) {
  const size_t limit = static_cast<size_t>(std::max(width - 1, 1));
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  lines.pop_back();  // the empty piece after the last newline
  std::string out;
  for (absl::string_view line : lines) absl::StrAppend(&out, line.substr(0, limit), "\n");
  return out;
}

// The job's record once its event stream has ended; Unavailable if it has not ended after all
// (the coordinator stopped streaming).
absl::StatusOr<forge::v1::Job> EndedJob(JobClient& client, absl::string_view job_id) {
  FORGE_ASSIGN_OR_RETURN(forge::v1::Job job, client.GetJob(job_id));
  if (!IsTerminal(job.state())) {
    return absl::UnavailableError(
        absl::StrCat("coordinator ", client.address(), ": the event stream of job ", job_id,
                     " ended while the job is ", JobStateName(job.state())));
  }
  return job;
}

}  // namespace

JobView::JobView(GpuArch gpu, forge::v1::Job job, const std::vector<KernelTask>& tasks)
    : gpu_(std::move(gpu)), job_(std::move(job)) {
  for (const KernelTask& task : tasks) Task(task.digest()).task = task;
}

JobView::TaskState& JobView::Task(const std::string& digest) {
  auto [it, inserted] = task_index_.try_emplace(digest, tasks_.size());
  if (inserted) {
    tasks_.emplace_back();
    tasks_.back().task.set_digest(digest);
  }
  return tasks_[it->second];
}

void JobView::Apply(const JobEvent& event) {
  if (event.has_progress()) *job_.mutable_progress() = event.progress();
  const forge::v1::JobProgress& progress = job_.progress();
  finished_counts_.emplace_back(EventTime(event),
                                progress.candidates_completed() + progress.candidates_failed());
  while (finished_counts_.size() > 2 &&
         finished_counts_.back().first - finished_counts_.front().first > kRateWindow) {
    finished_counts_.pop_front();
  }
  switch (event.event_case()) {
    case JobEvent::kStateChanged:
      job_.set_state(event.state_changed().current());
      if (event.state_changed().current() == forge::v1::JOB_STATE_FAILED) {
        job_.set_error(event.state_changed().detail());
      }
      break;
    case JobEvent::kTaskStarted: {
      TaskState& task = Task(event.task_started().task_digest());
      task.started = true;
      if (task.task.family() == forge::v1::KERNEL_FAMILY_UNSPECIFIED) {
        task.task.set_family(event.task_started().family());
      }
      break;
    }
    case JobEvent::kTaskImproved: {
      TaskState& task = Task(event.task_improved().task_digest());
      task.started = true;
      task.best = event.task_improved();
      break;
    }
    case JobEvent::kTaskFinished:
      Task(event.task_finished().task_digest()).finished = event.task_finished();
      break;
    case JobEvent::EVENT_NOT_SET:
      break;
  }
}

double JobView::CandidatesPerSecond() const {
  if (finished_counts_.size() < 2) return 0;
  const absl::Duration span = finished_counts_.back().first - finished_counts_.front().first;
  if (span <= absl::ZeroDuration()) return 0;
  return static_cast<double>(finished_counts_.back().second - finished_counts_.front().second) /
         absl::ToDoubleSeconds(span);
}

bool JobView::AnyPredicted() const {
  return std::any_of(tasks_.begin(), tasks_.end(), [](const TaskState& task) {
    return task.best.has_value() && task.best->kind() == forge::v1::MEASUREMENT_KIND_PREDICTED;
  });
}

std::string JobView::Describe(const TaskState& task) const {
  const forge::v1::TaskImproved& best = *task.best;
  // The kind first: a narrow terminal cuts the end of the line, never the PREDICTED label.
  std::string text = absl::StrFormat(
      "%s%.3f us, %.2fx eager",
      best.kind() == forge::v1::MEASUREMENT_KIND_PREDICTED ? "[PREDICTED] " : "",
      best.median_us(), best.speedup_vs_eager());
  if (task.task.flops() > 0 || task.task.min_bytes() > 0) {
    absl::StatusOr<Roofline> floor =
        RooflineFloor(gpu_, static_cast<double>(task.task.flops()),
                      static_cast<double>(task.task.min_bytes()), graph::FloorMathMode(task.task));
    if (floor.ok() && best.median_us() > 0) {
      absl::StrAppendFormat(&text, ", %.0f%% of floor",
                            floor->seconds * 1e6 / best.median_us() * 100);
    }
    if (std::string hint = BottleneckHint(gpu_, task.task, best.median_us()); !hint.empty()) {
      absl::StrAppend(&text, ", ", hint);
    }
  }
  return text;
}

std::string JobView::Frame(int width, int max_rows) const {
  const forge::v1::JobProgress& progress = job_.progress();
  const auto model = job_.options().labels().find("model");
  std::string out = absl::StrFormat(
      "forge job %s  %s  arch %s  owner %s%s  (ceilings: %s)\n", job_.id(),
      absl::AsciiStrToUpper(JobStateName(job_.state())),
      job_.options().target_arch().empty() ? "-" : job_.options().target_arch(),
      job_.options().owner().empty() ? "-" : job_.options().owner(),
      model == job_.options().labels().end() ? "" : absl::StrCat("  model ", model->second),
      gpu_.name);
  const double done = progress.tasks_total() > 0
                          ? static_cast<double>(progress.tasks_done()) / progress.tasks_total()
                          : 0;
  const int filled = static_cast<int>(std::lround(done * kBarWidth));
  const int64_t budget = job_.options().budget().max_candidate_trials();
  absl::StrAppendFormat(
      &out, "[%s%s] %d/%d tasks  %d candidates%s: %d measured, %d failed  %.1f/s\n",
      std::string(filled, '#'), std::string(kBarWidth - filled, '.'), progress.tasks_done(),
      progress.tasks_total(), progress.candidates_leased(),
      budget > 0 ? absl::StrCat(" of ", budget) : "", progress.candidates_completed(),
      progress.candidates_failed(), CandidatesPerSecond());
  absl::StrAppendFormat(&out, "whole model so far: %.2fx over eager%s\n", progress.best_speedup(),
                        AnyPredicted() ? " (PREDICTED times included)" : "");
  absl::StrAppendFormat(&out, "%-12s  %-9s  %-22s  %s\n", "task", "family", "status", "best");
  int rows = 0;
  for (const TaskState& task : tasks_) {
    if (rows++ == max_rows) {
      absl::StrAppend(&out, "... ", tasks_.size() - max_rows, " more tasks\n");
      break;
    }
    std::string status =
        task.finished.has_value()
            ? absl::StrCat("done: ", StopReason(task.finished->stop_reason()))
            : (IsTerminal(job_.state()) ? "stopped" : (task.started ? "searching" : "waiting"));
    absl::StrAppendFormat(&out, "%-12s  %-9s  %-22s  %s\n", ShortDigest(task.task.digest()),
                          FamilyName(task.task.family()), status,
                          task.best.has_value()    ? Describe(task)
                          : task.finished.has_value() ? "eager (ATen): nothing beat it"
                                                      : "-");
  }
  if (IsTerminal(job_.state())) {
    absl::StrAppend(&out, "job ", JobStateName(job_.state()),
                    job_.error().empty() ? "" : absl::StrCat(": ", job_.error()), "\n");
  }
  return CutLines(out, width);
}

std::string JobView::LogLine(const JobEvent& event) const {
  const forge::v1::JobProgress& progress = job_.progress();
  std::string line = absl::StrCat(
      absl::FormatTime("%H:%M:%S", EventTime(event), absl::LocalTimeZone()), " ", job_.id(), " ");
  switch (event.event_case()) {
    case JobEvent::kStateChanged: {
      const forge::v1::JobStateChanged& change = event.state_changed();
      absl::StrAppend(&line,
                      change.previous() == forge::v1::JOB_STATE_UNSPECIFIED
                          ? ""
                          : absl::StrCat(JobStateName(change.previous()), " -> "),
                      JobStateName(change.current()),
                      change.detail().empty() ? "" : absl::StrCat(": ", change.detail()));
      break;
    }
    case JobEvent::kTaskStarted: {
      const forge::v1::TaskStarted& started = event.task_started();
      absl::StrAppend(
          &line, "task ", ShortDigest(started.task_digest()), " (", FamilyName(started.family()),
          started.has_baseline_share()
              ? absl::StrFormat(", %.0f%% of eager time", started.baseline_share() * 100)
              : "",
          ") search started");
      break;
    }
    case JobEvent::kTaskImproved: {
      const std::string& digest = event.task_improved().task_digest();
      absl::StrAppend(&line, "task ", ShortDigest(digest), " best ",
                      Describe(tasks_[task_index_.at(digest)]), " (candidate ",
                      ShortDigest(event.task_improved().candidate_digest()), ")");
      break;
    }
    case JobEvent::kTaskFinished: {
      const forge::v1::TaskFinished& finished = event.task_finished();
      absl::StrAppend(&line, "task ", ShortDigest(finished.task_digest()), " finished (",
                      StopReason(finished.stop_reason()), ") after ", finished.candidates_tried(),
                      " candidates: ",
                      finished.best_candidate_digest().empty()
                          ? "no candidate passed, runs as ATen calls"
                          : absl::StrFormat("%.2fx eager", finished.speedup_vs_eager()));
      break;
    }
    case JobEvent::EVENT_NOT_SET:
      absl::StrAppend(&line, "event ", event.event_id());
      break;
  }
  absl::StrAppendFormat(&line, "  [%d/%d tasks, %d candidates]", progress.tasks_done(),
                        progress.tasks_total(), progress.candidates_leased());
  return line;
}

absl::StatusOr<forge::v1::Job> FollowJob(JobClient& client, absl::string_view job_id,
                                         const WatchOptions& options, std::ostream& out) {
  FORGE_ASSIGN_OR_RETURN(const GpuArch gpu, FindGpu(options.gpu));
  FORGE_ASSIGN_OR_RETURN(forge::v1::Job job, client.GetJob(job_id));
  // The tasks' flops and bytes, for the roofline; events name tasks by digest only.
  forge::v1::GetResultsRequest results_request;
  results_request.set_job_id(std::string(job_id));
  FORGE_ASSIGN_OR_RETURN(forge::v1::GetResultsResponse results, client.GetResults(results_request));
  std::vector<KernelTask> tasks;
  for (const forge::v1::TaskResults& task : results.tasks()) tasks.push_back(task.task());
  JobView view(gpu, job, tasks);

  if (options.output == WatchOutput::kLog) {
    out << "following job " << job.id() << " (" << JobStateName(job.state()) << ") on "
        << client.address() << "; bottlenecks against " << gpu.name << "'s ceilings" << std::endl;
  }
  int drawn_lines = 0;
  absl::Time last_draw = absl::InfinitePast();
  auto draw = [&] {
    if (drawn_lines > 0) out << "\x1b[" << drawn_lines << "F\x1b[J";
    const std::string frame = view.Frame(options.terminal_width, options.max_task_rows);
    out << frame << std::flush;
    drawn_lines = static_cast<int>(std::count(frame.begin(), frame.end(), '\n'));
    last_draw = absl::Now();
  };
  if (options.output == WatchOutput::kTerminal) draw();

  forge::v1::WatchJobRequest request;
  request.set_job_id(std::string(job_id));
  FORGE_RETURN_IF_ERROR(client.WatchJob(request, [&](const JobEvent& event) {
    view.Apply(event);
    switch (options.output) {
      case WatchOutput::kTerminal:
        if (absl::Now() - last_draw >= options.redraw_interval) draw();
        break;
      case WatchOutput::kLog:
        out << view.LogLine(event) << std::endl;
        break;
      case WatchOutput::kJsonLines:
        out << ProtoJson(event, /*pretty=*/false) << std::endl;
        break;
    }
    return true;
  }));
  if (options.output == WatchOutput::kTerminal) draw();
  return EndedJob(client, job_id);
}

absl::StatusOr<forge::v1::Job> WaitForJob(JobClient& client, absl::string_view job_id) {
  forge::v1::WatchJobRequest request;
  request.set_job_id(std::string(job_id));
  FORGE_RETURN_IF_ERROR(client.WatchJob(request, [](const JobEvent&) { return true; }));
  return EndedJob(client, job_id);
}

int ExitCodeForJob(const forge::v1::Job& job) {
  return job.state() == forge::v1::JOB_STATE_DONE ? kExitOk : kExitJobUnsuccessful;
}

}  // namespace forge::client
