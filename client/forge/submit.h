// `forge submit`: models -> one job each. Per model: read it (model.h), ask the coordinator which
// of its weight blobs it lacks, stream the graph and only those blobs; then a batch summary.
#ifndef FORGE_CLIENT_FORGE_SUBMIT_H_
#define FORGE_CLIENT_FORGE_SUBMIT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/forge/connection.h"
#include "forge/v1/task.pb.h"

namespace forge::client {

struct SubmitOptions {
  std::string target_arch = "sm_90";
  int64_t max_candidate_trials = 0;  // 0: no limit
  int64_t max_wall_seconds = 0;      // 0: no limit; past it every task stops with its best so far
  int32_t priority = 0;
  std::string owner;
  // Every job gets these; and "model" = the model's name unless they set it.
  std::map<std::string, std::string> labels;
};

// What happened to one model.
struct SubmitOutcome {
  std::string path;
  std::string model_name;
  absl::Status status;     // OK when a job was created
  forge::v1::Job job;      // the job as created (or, after waiting, as it ended)
  int blobs_named = 0;     // weight blobs the graph names outside itself
  int blobs_uploaded = 0;  // of those, sent by this submission (the coordinator lacked them)
  int64_t bytes_uploaded = 0;
};

// "sm_90" stays as it is; a GPU name FindGpu knows ("h200") becomes its arch. InvalidArgument
// otherwise.
absl::StatusOr<std::string> ResolveTargetArch(absl::string_view arch_or_gpu);

// Submits one model. Errors reading the model or from the coordinator land in the outcome's
// status (the outcome's path says which model).
SubmitOutcome SubmitModel(JobClient& client, absl::string_view path, const SubmitOptions& options);

// Submits each model in turn (paths as ExpandModelPaths gives them). A model that fails does not
// stop the others, except when the coordinator becomes unreachable: the remaining models are then
// reported as not submitted with that error.
std::vector<SubmitOutcome> SubmitModels(JobClient& client, const std::vector<std::string>& paths,
                                        const SubmitOptions& options);

// The coordinator's intake checks (server/intake.h, ClientSideLimits) on the model at `path` with
// these options, without a coordinator: OK, or the error `forge submit` would give ("not
// submitted: ..."). `forge submit --check` and the Python SDK (before it uploads) run it.
absl::Status CheckModel(absl::string_view path, const SubmitOptions& options);

// One row per model (path, job, state, tasks, blobs uploaded/named, error), then totals; or with
// `json` an object {"jobs": [...], "submitted": n, "failed": n}.
std::string RenderSubmitSummary(const std::vector<SubmitOutcome>& outcomes, bool json);

// The exit code of a batch: the first failed model's (ExitCodeFor), else kExitJobUnsuccessful if
// any job (after waiting) did not end DONE while `waited`, else kExitOk.
int SubmitExitCode(const std::vector<SubmitOutcome>& outcomes, bool waited);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_SUBMIT_H_
