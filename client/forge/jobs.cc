#include "client/forge/jobs.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "client/forge/proto_json.h"
#include "common/status/status_macros.h"
#include "google/protobuf/util/time_util.h"

namespace forge::client {
namespace {

using ::forge::v1::Job;

absl::Time ToTime(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixMillis(google::protobuf::util::TimeUtil::TimestampToMilliseconds(timestamp));
}

std::string FormatTime(const google::protobuf::Timestamp& timestamp) {
  if (timestamp.seconds() == 0 && timestamp.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S %Z", ToTime(timestamp), absl::LocalTimeZone());
}

// "12s", "4m", "3h", "2d": how long ago, coarsely.
std::string Age(absl::Duration age) {
  if (age < absl::Minutes(1)) return absl::StrCat(absl::ToInt64Seconds(age), "s");
  if (age < absl::Hours(1)) return absl::StrCat(absl::ToInt64Minutes(age), "m");
  if (age < absl::Hours(48)) return absl::StrCat(absl::ToInt64Hours(age), "h");
  return absl::StrCat(absl::ToInt64Hours(age) / 24, "d");
}

std::string Labels(const google::protobuf::Map<std::string, std::string>& labels) {
  std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  return sorted.empty() ? "-" : absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

std::string Progress(const forge::v1::JobProgress& progress) {
  return absl::StrFormat("%d/%d tasks, %d candidates (%d measured, %d failed), best %.2fx",
                         progress.tasks_done(), progress.tasks_total(),
                         progress.candidates_leased(), progress.candidates_completed(),
                         progress.candidates_failed(), progress.best_speedup());
}

}  // namespace

absl::StatusOr<forge::v1::JobState> ParseJobState(absl::string_view text) {
  std::string name = absl::AsciiStrToUpper(text);
  if (!absl::StartsWith(name, "JOB_STATE_")) name = absl::StrCat("JOB_STATE_", name);
  forge::v1::JobState state;
  if (forge::v1::JobState_Parse(name, &state) && state != forge::v1::JOB_STATE_UNSPECIFIED) {
    return state;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown job state \"", text, "\"; one of queued, running, done, failed, cancelled"));
}

std::string JobStateName(forge::v1::JobState state) {
  return absl::AsciiStrToLower(absl::StripPrefix(forge::v1::JobState_Name(state), "JOB_STATE_"));
}

absl::StatusOr<std::map<std::string, std::string>> ParseLabels(
    const std::vector<std::string>& entries) {
  std::map<std::string, std::string> labels;
  for (const std::string& entry : entries) {
    const size_t equals = entry.find('=');
    if (equals == std::string::npos || equals == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("label \"", entry, "\" is not KEY=VALUE with a non-empty key"));
    }
    labels[entry.substr(0, equals)] = entry.substr(equals + 1);
  }
  return labels;
}

std::string RenderJob(const Job& job) {
  const forge::v1::JobOptions& options = job.options();
  std::string out = absl::StrFormat(
      "job        %s\n"
      "state      %s\n"
      "progress   %s\n"
      "owner      %s\n"
      "labels     %s\n"
      "arch       %s\n"
      "budget     %s candidate trials, %s seconds\n"
      "priority   %d\n"
      "model      %s\n"
      "created    %s\n"
      "updated    %s\n",
      job.id(), JobStateName(job.state()), Progress(job.progress()),
      options.owner().empty() ? "-" : options.owner(), Labels(options.labels()),
      options.target_arch().empty() ? "-" : options.target_arch(),
      options.budget().max_candidate_trials() == 0
          ? "unlimited"
          : absl::StrCat(options.budget().max_candidate_trials()),
      options.budget().max_wall_seconds() == 0 ? "unlimited"
                                               : absl::StrCat(options.budget().max_wall_seconds()),
      options.priority(), job.model_digest(), FormatTime(job.created_at()),
      FormatTime(job.updated_at()));
  if (!job.error().empty()) absl::StrAppend(&out, "error      ", job.error(), "\n");
  return out;
}

std::string RenderJobList(const forge::v1::ListJobsResponse& response) {
  std::string out =
      absl::StrFormat("%-14s  %-9s  %-12s  %-9s  %-10s  %-8s  %-19s  %s\n", "job", "state", "owner",
                      "tasks", "candidates", "speedup", "created", "labels");
  for (const Job& job : response.jobs()) {
    absl::StrAppendFormat(
        &out, "%-14s  %-9s  %-12s  %-9s  %-10d  %-8s  %-19s  %s\n", job.id(),
        JobStateName(job.state()), job.options().owner().empty() ? "-" : job.options().owner(),
        absl::StrCat(job.progress().tasks_done(), "/", job.progress().tasks_total()),
        job.progress().candidates_leased(), absl::StrFormat("%.2fx", job.progress().best_speedup()),
        job.created_at().seconds() == 0
            ? "-"
            : absl::FormatTime("%Y-%m-%d %H:%M:%S", ToTime(job.created_at()),
                               absl::LocalTimeZone()),
        Labels(job.options().labels()));
  }
  if (response.jobs().empty()) absl::StrAppend(&out, "(no jobs match)\n");
  if (!response.next_page_token().empty()) {
    absl::StrAppend(&out, "more: --page-token ", response.next_page_token(), "\n");
  }
  return out;
}

std::string RenderWorkers(const forge::v1::ListWorkersResponse& response, absl::Time now) {
  std::string out =
      absl::StrFormat("%-20s  %-16s  %-5s  %6s  %9s  %6s  %9s  %-14s  %s\n", "worker", "host",
                      "live", "leased", "completed", "failed", "heartbeat", "generator", "gpus");
  for (const forge::v1::WorkerStatus& worker : response.workers()) {
    std::vector<std::string> gpus;
    for (const forge::v1::GpuInfo& gpu : worker.gpus()) {
      gpus.push_back(absl::StrCat(gpu.index(), ":", gpu.name(), " ", gpu.arch(),
                                  gpu.emulated() ? " (emulated: times PREDICTED)" : ""));
    }
    absl::StrAppendFormat(&out, "%-20s  %-16s  %-5s  %6d  %9d  %6d  %9s  %-14s  %s\n",
                          worker.worker_id(), worker.hostname(), worker.live() ? "yes" : "no",
                          worker.candidates_leased(), worker.candidates_completed(),
                          worker.candidates_failed(),
                          Age(now - ToTime(worker.last_heartbeat_at())) + " ago",
                          worker.generator_version(), absl::StrJoin(gpus, ", "));
  }
  if (response.workers().empty()) absl::StrAppend(&out, "(no workers)\n");
  return out;
}

absl::StatusOr<std::string> StatusCommand(JobClient& client, absl::string_view job_id, bool json) {
  FORGE_ASSIGN_OR_RETURN(Job job, client.GetJob(job_id));
  return json ? ProtoJson(job, /*pretty=*/true) : RenderJob(job);
}

absl::StatusOr<std::string> JobsCommand(JobClient& client, forge::v1::ListJobsRequest request,
                                        bool all_pages, bool json) {
  FORGE_ASSIGN_OR_RETURN(forge::v1::ListJobsResponse response, client.ListJobs(request));
  while (all_pages && !response.next_page_token().empty()) {
    request.set_page_token(response.next_page_token());
    FORGE_ASSIGN_OR_RETURN(forge::v1::ListJobsResponse next, client.ListJobs(request));
    for (Job& job : *next.mutable_jobs()) *response.add_jobs() = std::move(job);
    response.set_next_page_token(next.next_page_token());
  }
  return json ? ProtoJson(response, /*pretty=*/true) : RenderJobList(response);
}

absl::StatusOr<std::string> WorkersCommand(JobClient& client, bool include_dead, bool json) {
  forge::v1::ListWorkersRequest request;
  request.set_include_dead(include_dead);
  FORGE_ASSIGN_OR_RETURN(forge::v1::ListWorkersResponse response, client.ListWorkers(request));
  return json ? ProtoJson(response, /*pretty=*/true) : RenderWorkers(response, absl::Now());
}

absl::StatusOr<std::string> CancelCommand(JobClient& client, absl::string_view job_id,
                                          absl::string_view reason, bool json) {
  FORGE_ASSIGN_OR_RETURN(Job job, client.CancelJob(job_id, reason));
  if (json) return ProtoJson(job, /*pretty=*/true);
  if (job.state() == forge::v1::JOB_STATE_CANCELLED) {
    return absl::StrCat("job ", job.id(), " cancelled; results found so far are kept\n");
  }
  return absl::StrCat("job ", job.id(), " had already ended: ", JobStateName(job.state()), "\n");
}

}  // namespace forge::client
