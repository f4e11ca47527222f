// `forge status`, `forge jobs`, `forge workers` and `forge cancel`: one call each to the
// coordinator, rendered as text for people or as JSON (ProtoJson of the response) for programs.
#ifndef FORGE_CLIENT_FORGE_JOBS_H_
#define FORGE_CLIENT_FORGE_JOBS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/forge/connection.h"
#include "forge/v1/service.pb.h"

namespace forge::client {

// "queued", "RUNNING", "job_state_done" ... -> the JobState. InvalidArgument listing the states.
absl::StatusOr<forge::v1::JobState> ParseJobState(absl::string_view text);
// Lower-case state name without the prefix: "running".
std::string JobStateName(forge::v1::JobState state);

// "key=value" entries -> labels. InvalidArgument for an entry without '=' or with an empty key.
absl::StatusOr<std::map<std::string, std::string>> ParseLabels(
    const std::vector<std::string>& entries);

// A job's record: state, owner, labels, arch, budget, progress, times, error.
std::string RenderJob(const forge::v1::Job& job);
// One row per job, and how to get the next page when there is one.
std::string RenderJobList(const forge::v1::ListJobsResponse& response);
// One row per worker: id, host, GPUs (emulated ones marked), live, leased/completed/failed,
// time since the last heartbeat as of `now`.
std::string RenderWorkers(const forge::v1::ListWorkersResponse& response, absl::Time now);

// The commands: the rendered answer, or the call's error.
absl::StatusOr<std::string> StatusCommand(JobClient& client, absl::string_view job_id, bool json);
// With `all_pages`, follows next_page_token to the end and renders every job as one list.
absl::StatusOr<std::string> JobsCommand(JobClient& client, forge::v1::ListJobsRequest request,
                                        bool all_pages, bool json);
absl::StatusOr<std::string> WorkersCommand(JobClient& client, bool include_dead, bool json);
absl::StatusOr<std::string> CancelCommand(JobClient& client, absl::string_view job_id,
                                          absl::string_view reason, bool json);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_JOBS_H_
