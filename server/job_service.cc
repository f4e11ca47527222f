#include "server/job_service.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/logging/logging.h"
#include "common/status/status_macros.h"
#include "compiler/graph/partition.h"

namespace forge::server {
namespace {

using ::forge::v1::Job;
using ::forge::v1::JobEvent;

// The roles that may submit and cancel, and those that may read.
constexpr std::initializer_list<Role> kSubmitters = {Role::kSubmit, Role::kAdmin};
constexpr std::initializer_list<Role> kReaders = {Role::kRead, Role::kSubmit, Role::kAdmin};

metrics::Family<metrics::Counter>* RegisterRpcCounter(metrics::Registry* registry) {
  absl::StatusOr<metrics::Family<metrics::Counter>*> family = registry->AddCounter(
      {"forge_coordinator_rpcs_total", "JobService and WorkerService calls answered, by method and status code.", {}});
  if (!family.ok()) {
    GetLogger("coordinator")->critical("registering the RPC counter: {}", family.status().ToString());
    std::abort();
  }
  return *family;
}

// The blobs a graph names that are not inlined: digest -> declared size, in input order.
absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> BlobsNamedBy(
    const forge::v1::Graph& graph) {
  std::vector<std::pair<std::string, int64_t>> blobs;
  for (const forge::v1::GraphInput& input : graph.inputs()) {
    const forge::v1::TensorData& data = input.data();
    if (data.sha256().empty() || !data.inline_bytes().empty()) continue;
    FORGE_RETURN_IF_ERROR(ValidateSha256(
        data.sha256(), absl::StrCat("graph input \"", input.value_name(), "\": data.sha256")));
    const bool seen = std::any_of(blobs.begin(), blobs.end(),
                                  [&](const auto& blob) { return blob.first == data.sha256(); });
    if (!seen) blobs.emplace_back(data.sha256(), data.size_bytes());
  }
  return blobs;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share their numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

JobService::JobService(JobStore* jobs, BlobStore* blobs, Scheduler* scheduler,
                       metrics::Registry* registry, JobServiceOptions options)
    : jobs_(jobs),
      blobs_(blobs),
      scheduler_(scheduler),
      rpcs_(RegisterRpcCounter(registry)),
      options_(std::move(options)) {}

grpc::Status JobService::Finish(absl::string_view method, const absl::Status& status) {
  rpcs_->Add({{"method", std::string(method)}, {"code", absl::StatusCodeToString(status.code())}})
      .Increment();
  if (absl::IsUnavailable(status) || absl::IsInternal(status) || absl::IsDataLoss(status)) {
    LogWithFields(*GetLogger("coordinator"), spdlog::level::warn, "request failed",
                  {{"method", method}, {"error", status.ToString()}});
  }
  return ToGrpcStatus(status);
}

absl::StatusOr<Caller> JobService::Authorize(const grpc::ServerContext& context,
                                             std::initializer_list<Role> roles,
                                             absl::string_view job_id) {
  FORGE_ASSIGN_OR_RETURN(Caller caller, options_.auth.Authorize(context, roles));
  if (!job_id.empty() && !caller.SeesAll()) {
    FORGE_ASSIGN_OR_RETURN(const Job job, jobs_->GetJob(job_id));
    FORGE_RETURN_IF_ERROR(CheckOwner(caller, job.options().owner(), job_id));
  }
  return caller;
}

grpc::Status JobService::MissingBlobs(grpc::ServerContext* context,
                                      const forge::v1::MissingBlobsRequest* request,
                                      forge::v1::MissingBlobsResponse* response) {
  if (absl::StatusOr<Caller> caller = Authorize(*context, kSubmitters, ""); !caller.ok()) {
    return Finish("MissingBlobs", caller.status());
  }
  const std::vector<std::string> digests(request->sha256().begin(), request->sha256().end());
  absl::StatusOr<std::vector<std::string>> missing = blobs_->Missing(digests);
  if (missing.ok()) {
    for (std::string& digest : *missing) response->add_missing_sha256(std::move(digest));
  }
  return Finish("MissingBlobs", missing.status());
}

grpc::Status JobService::SubmitJob(grpc::ServerContext* context,
                                   grpc::ServerReader<forge::v1::SubmitJobRequest>* reader,
                                   forge::v1::SubmitJobResponse* response) {
  absl::StatusOr<Caller> caller = Authorize(*context, kSubmitters, "");
  return Finish("SubmitJob", caller.ok() ? Submit(*caller, reader, response) : caller.status());
}

absl::Status JobService::Submit(const Caller& caller,
                                grpc::ServerReader<forge::v1::SubmitJobRequest>* reader,
                                forge::v1::SubmitJobResponse* response) {
  forge::v1::SubmitJobRequest request;
  if (!reader->Read(&request) || !request.has_header()) {
    return absl::InvalidArgumentError("SubmitJob: the first message must be the header");
  }
  forge::v1::SubmitJobHeader header = std::move(*request.mutable_header());
  // The owner comes from the credential, not from what the client filled in.
  if (caller.authenticated) header.mutable_options()->set_owner(caller.owner);
  const forge::v1::JobBudget& budget = header.options().budget();
  FORGE_RETURN_IF_ERROR(Annotate(CheckCaps(caller, header.options().priority(),
                                           budget.max_candidate_trials(),
                                           budget.max_wall_seconds()),
                                 "SubmitJob"));
  FORGE_RETURN_IF_ERROR(
      Annotate(ValidateJobOptions(header.options(), options_.intake), "SubmitJob"));
  FORGE_RETURN_IF_ERROR(
      Annotate(ValidateGraph(header.graph(), options_.intake), "SubmitJob: graph rejected"));
  absl::StatusOr<graph::PartitionResult> partition = graph::Partition(header.graph());
  if (!partition.ok()) return Annotate(partition.status(), "SubmitJob: graph rejected");
  FORGE_ASSIGN_OR_RETURN(auto named_blobs, BlobsNamedBy(header.graph()));

  // Chunks of one blob come back to back; a new digest ends the previous blob.
  std::unique_ptr<BlobUpload> upload;
  int blobs_stored = 0;
  auto commit = [&]() -> absl::Status {
    if (upload == nullptr) return absl::OkStatus();
    FORGE_RETURN_IF_ERROR(Annotate(upload->Commit(), "SubmitJob"));
    ++blobs_stored;
    upload.reset();
    return absl::OkStatus();
  };
  while (reader->Read(&request)) {
    if (request.has_header()) return absl::InvalidArgumentError("SubmitJob: a second header");
    const forge::v1::BlobChunk& chunk = request.chunk();
    if (upload == nullptr || upload->sha256() != chunk.sha256()) {
      FORGE_RETURN_IF_ERROR(commit());
      auto named = std::find_if(named_blobs.begin(), named_blobs.end(),
                                [&](const auto& blob) { return blob.first == chunk.sha256(); });
      if (named == named_blobs.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "SubmitJob: chunk of blob \"", chunk.sha256(), "\", which the graph does not name"));
      }
      FORGE_ASSIGN_OR_RETURN(upload, blobs_->StartUpload(named->first, named->second));
    }
    FORGE_RETURN_IF_ERROR(Annotate(upload->Append(chunk.offset(), chunk.data()), "SubmitJob"));
  }
  FORGE_RETURN_IF_ERROR(commit());

  std::vector<std::string> digests;
  for (const auto& [digest, size] : named_blobs) digests.push_back(digest);
  FORGE_ASSIGN_OR_RETURN(std::vector<std::string> missing, blobs_->Missing(digests));
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("SubmitJob: ", missing.size(), " blob(s) the graph names are neither stored "
                     "nor sent: ", absl::StrJoin(missing, ", ")));
  }
  // The quota binds owners, not admins (nor the anonymous caller of open auth).
  const int64_t max_active_jobs =
      caller.SeesAll() ? 0 : options_.intake.max_active_jobs_per_owner;
  absl::StatusOr<Job> created =
      jobs_->CreateJob(header.graph(), header.options(), partition->tasks, max_active_jobs);
  if (!created.ok()) return Annotate(created.status(), "SubmitJob");
  Job job = *std::move(created);
  LogWithFields(*GetLogger("coordinator"), spdlog::level::info, "job accepted",
                {{"job", job.id()},
                 {"model", header.graph().metadata().name()},
                 {"tasks", job.progress().tasks_total()},
                 {"blobs_stored", blobs_stored}});
  const std::string job_id = job.id();
  *response->mutable_job() = std::move(job);
  response->set_blobs_stored(blobs_stored);
  scheduler_->JobSubmitted(job_id);
  return absl::OkStatus();
}

grpc::Status JobService::GetJob(grpc::ServerContext* context,
                                const forge::v1::GetJobRequest* request,
                                forge::v1::GetJobResponse* response) {
  if (absl::StatusOr<Caller> caller = Authorize(*context, kReaders, request->job_id());
      !caller.ok()) {
    return Finish("GetJob", caller.status());
  }
  absl::StatusOr<Job> job = jobs_->GetJob(request->job_id());
  if (job.ok()) *response->mutable_job() = *std::move(job);
  return Finish("GetJob", job.status());
}

grpc::Status JobService::WatchJob(grpc::ServerContext* context,
                                  const forge::v1::WatchJobRequest* request,
                                  grpc::ServerWriter<JobEvent>* writer) {
  absl::StatusOr<Caller> caller = Authorize(*context, kReaders, request->job_id());
  return Finish("WatchJob", caller.ok() ? Watch(context, *request, writer) : caller.status());
}

absl::Status JobService::Watch(grpc::ServerContext* context,
                               const forge::v1::WatchJobRequest& request,
                               grpc::ServerWriter<JobEvent>* writer) {
  FORGE_ASSIGN_OR_RETURN(Job job, jobs_->GetJob(request.job_id()));
  JobEventReader reader(options_.watch_redis, request.job_id(), request.resume_after(),
                        options_.watch_wait);
  // A job that was already finished: its terminal event is in the stream (written with the state
  // change), so reading without blocking until the stream is exhausted sends everything left.
  bool finished = IsTerminal(job.state());
  while (!context->IsCancelled()) {
    FORGE_ASSIGN_OR_RETURN(std::vector<JobEvent> events, reader.Next(/*block=*/!finished));
    for (const JobEvent& event : events) {
      if (!writer->Write(event)) return absl::CancelledError("WatchJob: the caller went away");
      if (event.has_state_changed() && IsTerminal(event.state_changed().current())) {
        return absl::OkStatus();
      }
    }
    if (events.empty()) {
      if (finished) return absl::OkStatus();
      // Nothing new within the wait: the job may have ended before our cursor (a resume after
      // its terminal event); one more pass without blocking then drains what is left.
      FORGE_ASSIGN_OR_RETURN(job, jobs_->GetJob(request.job_id()));
      finished = IsTerminal(job.state());
    }
  }
  return absl::CancelledError("WatchJob: the caller went away");
}

grpc::Status JobService::CancelJob(grpc::ServerContext* context,
                                   const forge::v1::CancelJobRequest* request,
                                   forge::v1::CancelJobResponse* response) {
  if (absl::StatusOr<Caller> caller = Authorize(*context, kSubmitters, request->job_id());
      !caller.ok()) {
    return Finish("CancelJob", caller.status());
  }
  absl::StatusOr<Job> job = jobs_->Cancel(request->job_id(), request->reason());
  if (job.ok()) {
    scheduler_->JobCancelled(job->id());
    LogWithFields(*GetLogger("coordinator"), spdlog::level::info, "job cancelled",
                  {{"job", job->id()}, {"reason", request->reason()}});
    *response->mutable_job() = *std::move(job);
  }
  return Finish("CancelJob", job.status());
}

grpc::Status JobService::ListJobs(grpc::ServerContext* context,
                                  const forge::v1::ListJobsRequest* request,
                                  forge::v1::ListJobsResponse* response) {
  absl::StatusOr<Caller> caller = Authorize(*context, kReaders, "");
  if (!caller.ok()) return Finish("ListJobs", caller.status());
  JobFilter filter;
  filter.owner = request->owner();
  if (!caller->SeesAll()) {
    if (!filter.owner.empty() && filter.owner != caller->owner) {
      return Finish("ListJobs", absl::PermissionDeniedError(absl::StrCat(
                                    "ListJobs: \"", caller->owner,
                                    "\" may not list the jobs of \"", filter.owner, "\"")));
    }
    filter.owner = caller->owner;
  }
  for (int state : request->states()) {
    filter.states.push_back(static_cast<forge::v1::JobState>(state));
  }
  filter.labels.insert(request->labels().begin(), request->labels().end());
  absl::StatusOr<JobPage> page =
      jobs_->ListJobs(filter, request->page_size(), request->page_token());
  if (page.ok()) {
    for (Job& job : page->jobs) *response->add_jobs() = std::move(job);
    response->set_next_page_token(page->next_page_token);
  }
  return Finish("ListJobs", page.status());
}

grpc::Status JobService::GetResults(grpc::ServerContext* context,
                                    const forge::v1::GetResultsRequest* request,
                                    forge::v1::GetResultsResponse* response) {
  if (absl::StatusOr<Caller> caller = Authorize(*context, kReaders, request->job_id());
      !caller.ok()) {
    return Finish("GetResults", caller.status());
  }
  absl::StatusOr<forge::v1::GetResultsResponse> results =
      scheduler_->Results(request->job_id(), request->include_all_results());
  if (results.ok()) *response = *std::move(results);
  return Finish("GetResults", results.status());
}

grpc::Status JobService::ListWorkers(grpc::ServerContext* context,
                                     const forge::v1::ListWorkersRequest* request,
                                     forge::v1::ListWorkersResponse* response) {
  if (absl::StatusOr<Caller> caller = Authorize(*context, kReaders, ""); !caller.ok()) {
    return Finish("ListWorkers", caller.status());
  }
  absl::StatusOr<std::vector<forge::v1::WorkerStatus>> workers =
      scheduler_->Workers(request->include_dead());
  if (workers.ok()) {
    for (forge::v1::WorkerStatus& worker : *workers) *response->add_workers() = std::move(worker);
  }
  return Finish("ListWorkers", workers.status());
}

namespace {

// The request as a filter the cache can scan with (digests become glob patterns there).
absl::StatusOr<ResultFilter> PurgeFilter(const forge::v1::PurgeResultsRequest& request) {
  ResultFilter filter{.worker_identity = request.worker_identity(),
                      .unattributed = request.unattributed(),
                      .candidate_digest = request.candidate_digest(),
                      .task_digest = request.task_digest()};
  if (filter.empty()) {
    return absl::InvalidArgumentError(
        "PurgeResults: name a worker_identity, unattributed, a candidate_digest or a task_digest");
  }
  if (filter.unattributed && !filter.worker_identity.empty()) {
    return absl::InvalidArgumentError(
        "PurgeResults: worker_identity and unattributed exclude each other");
  }
  if (!filter.candidate_digest.empty()) {
    FORGE_RETURN_IF_ERROR(ValidateSha256(filter.candidate_digest, "PurgeResults: candidate_digest"));
  }
  if (!filter.task_digest.empty()) {
    FORGE_RETURN_IF_ERROR(ValidateSha256(filter.task_digest, "PurgeResults: task_digest"));
  }
  return filter;
}

}  // namespace

grpc::Status JobService::PurgeResults(grpc::ServerContext* context,
                                      const forge::v1::PurgeResultsRequest* request,
                                      forge::v1::PurgeResultsResponse* response) {
  absl::StatusOr<Caller> caller = Authorize(*context, {Role::kAdmin}, "");
  if (!caller.ok()) return Finish("PurgeResults", caller.status());
  absl::StatusOr<ResultFilter> filter = PurgeFilter(*request);
  if (!filter.ok()) return Finish("PurgeResults", filter.status());
  const std::string by = caller->authenticated ? caller->owner : "(anonymous)";
  // A worker whose results are purged is not trusted again: revoked before the purge, so that it
  // cannot report between the two.
  Revocations* const revocations = options_.auth.revocations();
  const bool revoke = !filter->worker_identity.empty() && !options_.auth.open() &&
                      revocations != nullptr;
  if (revoke) {
    if (absl::Status revoked = revocations->RevokeIdentity(filter->worker_identity, by);
        !revoked.ok()) {
      return Finish("PurgeResults", revoked);
    }
  }
  absl::StatusOr<forge::v1::PurgeResultsResponse> purged = scheduler_->PurgeResults(*filter);
  if (purged.ok()) purged->set_identity_revoked(revoke);
  // The compiled objects it published go too: other workers would load its host code.
  if (purged.ok() && !filter->worker_identity.empty() && options_.catalog != nullptr) {
    absl::StatusOr<int64_t> objects = options_.catalog->PurgePublisher(filter->worker_identity);
    if (objects.ok()) {
      purged->set_compiled_objects_removed(*objects);
    } else {
      purged = Annotate(objects.status(), "purging the worker's compiled objects");
    }
  }
  // The audit line: who purged what, also when it failed midway.
  LogWithFields(*GetLogger("coordinator"), spdlog::level::warn, "results purged",
                {{"by", by},
                 {"worker_identity", filter->worker_identity},
                 {"identity_revoked", revoke ? "true" : "false"},
                 {"unattributed", filter->unattributed ? "true" : "false"},
                 {"candidate", filter->candidate_digest},
                 {"task", filter->task_digest},
                 {"removed", purged.ok() ? purged->results_removed() : int64_t{0}},
                 {"compiled_objects_removed",
                  purged.ok() ? purged->compiled_objects_removed() : int64_t{0}},
                 {"tasks", purged.ok() ? absl::StrJoin(purged->task_digests(), ",") : ""},
                 {"status", purged.status().ToString()}});
  if (purged.ok()) *response = *std::move(purged);
  return Finish("PurgeResults", purged.status());
}

grpc::Status JobService::RevokeToken(grpc::ServerContext* context,
                                     const forge::v1::RevokeTokenRequest* request,
                                     forge::v1::RevokeTokenResponse* response) {
  absl::StatusOr<Caller> caller = Authorize(*context, {Role::kAdmin}, "");
  if (!caller.ok()) return Finish("RevokeToken", caller.status());
  Revocations* const revocations = options_.auth.revocations();
  if (options_.auth.open() || revocations == nullptr) {
    return Finish("RevokeToken", absl::FailedPreconditionError(
                                     "RevokeToken: authentication is off, there is no token to "
                                     "revoke (set auth.tokens or auth.token-secret)"));
  }
  const std::string& token_id = request->token_id();
  const std::string& identity = request->worker_identity();
  if (token_id.empty() == identity.empty()) {
    return Finish("RevokeToken", absl::InvalidArgumentError(
                                     "RevokeToken: set exactly one of token_id and worker_identity"));
  }
  const absl::Time expires = request->expires_unix_seconds() > 0
                                 ? absl::FromUnixSeconds(request->expires_unix_seconds())
                                 : absl::InfiniteFuture();
  absl::Status changed;
  if (request->restore()) {
    changed = token_id.empty() ? revocations->RestoreIdentity(identity)
                               : revocations->RestoreToken(token_id);
  } else {
    changed = token_id.empty() ? revocations->RevokeIdentity(identity, caller->owner)
                               : revocations->RevokeToken(token_id, expires, caller->owner);
  }
  LogWithFields(*GetLogger("coordinator"), spdlog::level::warn,
                request->restore() ? "token restored" : "token revoked",
                {{"by", caller->owner},
                 {"token_id", token_id},
                 {"worker_identity", identity},
                 {"status", changed.ToString()}});
  if (!changed.ok()) return Finish("RevokeToken", changed);
  absl::StatusOr<Revocations::Counts> counts = revocations->Count();
  if (counts.ok()) {
    response->set_revoked_tokens(counts->tokens);
    response->set_revoked_identities(counts->identities);
  }
  return Finish("RevokeToken", counts.status());
}

}  // namespace forge::server
