#include "client/forge/submit.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "client/forge/exit_code.h"
#include "client/forge/jobs.h"
#include "client/forge/model.h"
#include "client/forge/proto_json.h"
#include "common/arch/arch.h"
#include "common/status/status_macros.h"
#include "common/text/json.h"
#include "common/version/version.h"
#include "server/intake.h"

namespace forge::client {
namespace {

// The job header SubmitJob would send for `model`, after the coordinator's own intake checks:
// what it would refuse is refused here with its words, before anything is sent.
absl::StatusOr<forge::v1::SubmitJobHeader> CheckedHeader(const LocalModel& model,
                                                         const SubmitOptions& options) {
  forge::v1::SubmitJobHeader header;
  *header.mutable_graph() = model.graph;
  forge::v1::JobOptions& job_options = *header.mutable_options();
  job_options.mutable_budget()->set_max_candidate_trials(options.max_candidate_trials);
  job_options.mutable_budget()->set_max_wall_seconds(options.max_wall_seconds);
  job_options.set_priority(options.priority);
  job_options.set_owner(options.owner);
  job_options.set_target_arch(options.target_arch);
  job_options.mutable_labels()->insert(options.labels.begin(), options.labels.end());
  if (job_options.labels().count("model") == 0) {
    (*job_options.mutable_labels())["model"] = model.Name();
  }
  FORGE_RETURN_IF_ERROR(Annotate(
      server::ValidateJobOptions(job_options, server::ClientSideLimits()), "not submitted"));
  FORGE_RETURN_IF_ERROR(Annotate(server::ValidateGraph(header.graph(), server::ClientSideLimits()),
                                 "not submitted: graph rejected"));
  return header;
}

absl::Status Submit(JobClient& client, absl::string_view path, const SubmitOptions& options,
                    SubmitOutcome& outcome) {
  FORGE_ASSIGN_OR_RETURN(const LocalModel model, ReadModel(path));
  outcome.model_name = model.Name();
  const std::vector<std::string> digests = UploadableBlobDigests(model.graph);
  outcome.blobs_named = static_cast<int>(digests.size());
  FORGE_ASSIGN_OR_RETURN(const forge::v1::SubmitJobHeader header, CheckedHeader(model, options));

  forge::v1::MissingBlobsRequest missing_request;
  for (const std::string& digest : digests) missing_request.add_sha256(digest);
  FORGE_ASSIGN_OR_RETURN(forge::v1::MissingBlobsResponse missing,
                         client.MissingBlobs(missing_request));
  const std::vector<std::string> upload(missing.missing_sha256().begin(),
                                        missing.missing_sha256().end());

  int64_t bytes_uploaded = 0;
  FORGE_ASSIGN_OR_RETURN(
      forge::v1::SubmitJobResponse response,
      client.SubmitJob(
          header, upload,
          [&model, &bytes_uploaded](const std::string& sha256) -> absl::StatusOr<std::string> {
            absl::StatusOr<std::string> bytes = model.ReadBlob(sha256);
            if (bytes.ok()) bytes_uploaded += static_cast<int64_t>(bytes->size());
            return bytes;
          }));
  outcome.job = std::move(*response.mutable_job());
  outcome.blobs_uploaded = response.blobs_stored();
  outcome.bytes_uploaded = bytes_uploaded;
  return absl::OkStatus();
}

std::string Megabytes(int64_t bytes) { return absl::StrFormat("%.1f MB", bytes / 1e6); }

}  // namespace

absl::StatusOr<std::string> ResolveTargetArch(absl::string_view arch_or_gpu) {
  int version = 0;
  if (absl::StartsWith(arch_or_gpu, "sm_") &&
      absl::SimpleAtoi(absl::StripSuffix(arch_or_gpu.substr(3), "a"), &version) && version > 0) {
    return std::string(arch_or_gpu);
  }
  absl::StatusOr<GpuArch> gpu = FindGpu(arch_or_gpu);
  if (gpu.ok()) return gpu->arch;
  return absl::InvalidArgumentError(absl::StrCat(
      "--arch \"", arch_or_gpu,
      "\" is neither an architecture like sm_90 nor a GPU name: ", gpu.status().message()));
}

SubmitOutcome SubmitModel(JobClient& client, absl::string_view path, const SubmitOptions& options) {
  SubmitOutcome outcome;
  outcome.path = std::string(path);
  outcome.status = Submit(client, path, options, outcome);
  return outcome;
}

std::vector<SubmitOutcome> SubmitModels(JobClient& client, const std::vector<std::string>& paths,
                                        const SubmitOptions& options) {
  std::vector<SubmitOutcome> outcomes;
  absl::Status unreachable;
  for (const std::string& path : paths) {
    if (!unreachable.ok()) {
      SubmitOutcome skipped;
      skipped.path = path;
      skipped.status = unreachable;
      outcomes.push_back(std::move(skipped));
      continue;
    }
    outcomes.push_back(SubmitModel(client, path, options));
    if (ExitCodeFor(outcomes.back().status) == kExitUnreachable) {
      unreachable = absl::Status(outcomes.back().status.code(),
                                 absl::StrCat("not submitted: the coordinator became unreachable "
                                              "while submitting ",
                                              path));
    }
  }
  return outcomes;
}

absl::Status CheckModel(absl::string_view path, const SubmitOptions& options) {
  FORGE_ASSIGN_OR_RETURN(const LocalModel model, ReadModel(path));
  return CheckedHeader(model, options).status();
}

std::string RenderSubmitSummary(const std::vector<SubmitOutcome>& outcomes, bool json) {
  int submitted = 0;
  int blobs_uploaded = 0;
  int64_t bytes_uploaded = 0;
  for (const SubmitOutcome& outcome : outcomes) {
    if (outcome.status.ok()) ++submitted;
    blobs_uploaded += outcome.blobs_uploaded;
    bytes_uploaded += outcome.bytes_uploaded;
  }
  const int failed = static_cast<int>(outcomes.size()) - submitted;
  if (json) {
    std::vector<std::string> entries;
    for (const SubmitOutcome& outcome : outcomes) {
      entries.push_back(absl::StrCat(
          "{\"path\": ", JsonString(outcome.path), ", \"model\": ", JsonString(outcome.model_name),
          ", \"ok\": ", outcome.status.ok() ? "true" : "false",
          ", \"error\": ", JsonString(outcome.status.ok() ? "" : outcome.status.message()),
          ", \"blobs_named\": ", outcome.blobs_named, ", \"blobs_uploaded\": ",
          outcome.blobs_uploaded, ", \"bytes_uploaded\": ", outcome.bytes_uploaded,
          ", \"job\": ", ProtoJson(outcome.job, /*pretty=*/false), "}"));
    }
    return absl::StrCat("{\"version\": ", JsonString(FullVersion()), ", \"jobs\": [\n  ",
                        absl::StrJoin(entries, ",\n  "),
                        "\n], \"submitted\": ", submitted, ", \"failed\": ", failed, "}\n");
  }
  std::string out = absl::StrFormat("%-40s  %-14s  %-9s  %-7s  %-22s\n", "model", "job", "state",
                                    "tasks", "blobs uploaded/named");
  for (const SubmitOutcome& outcome : outcomes) {
    if (!outcome.status.ok()) {
      absl::StrAppendFormat(&out, "%-40s  %-14s  %s\n", outcome.path, "-",
                            absl::StrCat("error: ", outcome.status.message()));
      continue;
    }
    absl::StrAppendFormat(&out, "%-40s  %-14s  %-9s  %-7d  %-22s\n", outcome.path, outcome.job.id(),
                          JobStateName(outcome.job.state()), outcome.job.progress().tasks_total(),
                          absl::StrCat(outcome.blobs_uploaded, "/", outcome.blobs_named, " (",
                                       Megabytes(outcome.bytes_uploaded), ")"));
  }
  absl::StrAppend(&out, submitted, " of ", outcomes.size(), " model(s) submitted",
                  failed > 0 ? absl::StrCat(", ", failed, " failed") : "", "; ", blobs_uploaded,
                  " blob(s) uploaded (", Megabytes(bytes_uploaded), ")\n");
  return out;
}

int SubmitExitCode(const std::vector<SubmitOutcome>& outcomes, bool waited) {
  for (const SubmitOutcome& outcome : outcomes) {
    if (!outcome.status.ok()) return ExitCodeFor(outcome.status);
  }
  if (waited) {
    for (const SubmitOutcome& outcome : outcomes) {
      if (outcome.job.state() != forge::v1::JOB_STATE_DONE) return kExitJobUnsuccessful;
    }
  }
  return kExitOk;
}

}  // namespace forge::client
