// forge.v1.JobService over the job and blob stores: model intake (validation against
// JobServiceOptions::intake, see intake.h; blobs; partition),
// job state, WatchJob's event stream, listing and cancellation; results and the fleet come from
// the scheduler.
//
// Access (options.auth): SubmitJob and MissingBlobs need role submit or admin, CancelJob too;
// GetJob, WatchJob, ListJobs, GetResults and ListWorkers need read, submit or admin;
// PurgeResults needs admin, and every purge is one audit line in the log ("results purged":
// who, the filter, what was removed); a purge of a worker identity's results also revokes that
// identity (server/revocation) before it purges, so the worker cannot register or report again.
// RevokeToken needs admin and logs "token revoked" (or "token restored"). A submitted
// job's owner is the caller's (the owner the client names is replaced), and its priority and
// budget must fit the caller's caps; a caller other than admin reads, lists and cancels only its
// own owner's jobs (ListJobs naming another owner is PERMISSION_DENIED). An owner may have at most
// intake.max_active_jobs_per_owner jobs queued or running: one more is RESOURCE_EXHAUSTED (admins
// are exempt). With open auth every caller passes, keeps the owner it names and has no quota.
//
// Every RPC turns the stores' absl::Status into the gRPC status of the same code with the same
// message (Unavailable while Redis is down, naming it), and counts itself in
// forge_coordinator_rpcs_total{method, code}.
#ifndef FORGE_SERVER_JOB_SERVICE_H_
#define FORGE_SERVER_JOB_SERVICE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"
#include "common/redis/redis_client.h"
#include "forge/v1/service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/auth/auth.h"
#include "server/blob_store.h"
#include "server/compiled_catalog/compiled_catalog.h"
#include "server/intake.h"
#include "server/job_store.h"
#include "server/scheduler.h"

namespace forge::server {

// The gRPC status with the same code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

struct JobServiceOptions {
  // Where WatchJob opens its own connection per call (blocking reads must not share one).
  RedisClientOptions watch_redis;
  // Longest a WatchJob call blocks in Redis before it looks whether the caller is still there.
  absl::Duration watch_wait = absl::Seconds(1);
  // What SubmitJob accepts (intake.h).
  IntakeLimits intake;
  // Who may call what (server/auth/auth.h); open by default: every caller anonymous.
  Authenticator auth;
  // The compiled-object catalog, whose objects a purge of a worker identity removes too; null:
  // none. Must outlive the service.
  CompiledCatalog* catalog = nullptr;
};

class JobService final : public forge::v1::JobService::Service {
 public:
  // The stores and the scheduler must outlive the service. Aborts if `registry` already has the
  // RPC counter family (one service per registry).
  JobService(JobStore* jobs, BlobStore* blobs, Scheduler* scheduler, metrics::Registry* registry,
             JobServiceOptions options);

  grpc::Status MissingBlobs(grpc::ServerContext* context,
                            const forge::v1::MissingBlobsRequest* request,
                            forge::v1::MissingBlobsResponse* response) override;
  grpc::Status SubmitJob(grpc::ServerContext* context,
                         grpc::ServerReader<forge::v1::SubmitJobRequest>* reader,
                         forge::v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const forge::v1::GetJobRequest* request,
                      forge::v1::GetJobResponse* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const forge::v1::WatchJobRequest* request,
                        grpc::ServerWriter<forge::v1::JobEvent>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const forge::v1::CancelJobRequest* request,
                         forge::v1::CancelJobResponse* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const forge::v1::ListJobsRequest* request,
                        forge::v1::ListJobsResponse* response) override;
  grpc::Status GetResults(grpc::ServerContext* context,
                          const forge::v1::GetResultsRequest* request,
                          forge::v1::GetResultsResponse* response) override;
  grpc::Status ListWorkers(grpc::ServerContext* context,
                           const forge::v1::ListWorkersRequest* request,
                           forge::v1::ListWorkersResponse* response) override;
  // InvalidArgument for no filter, a worker identity together with `unattributed`, or a digest
  // that is no SHA-256 hex (Scheduler::PurgeResults does the work).
  grpc::Status PurgeResults(grpc::ServerContext* context,
                            const forge::v1::PurgeResultsRequest* request,
                            forge::v1::PurgeResultsResponse* response) override;
  // InvalidArgument unless exactly one of token_id and worker_identity is set;
  // FailedPrecondition with open auth (no tokens to revoke) or no revocation list.
  grpc::Status RevokeToken(grpc::ServerContext* context,
                           const forge::v1::RevokeTokenRequest* request,
                           forge::v1::RevokeTokenResponse* response) override;

  // The forge_coordinator_rpcs_total family, which WorkerService counts its calls in too.
  metrics::Family<metrics::Counter>* rpc_counter() const { return rpcs_; }

 private:
  // The caller of `context` when it holds one of `roles` and, for a non-empty `job_id`, may see
  // that job. Every RPC starts with it.
  absl::StatusOr<Caller> Authorize(const grpc::ServerContext& context,
                                   std::initializer_list<Role> roles, absl::string_view job_id);
  absl::Status Submit(const Caller& caller,
                      grpc::ServerReader<forge::v1::SubmitJobRequest>* reader,
                      forge::v1::SubmitJobResponse* response);
  absl::Status Watch(grpc::ServerContext* context, const forge::v1::WatchJobRequest& request,
                     grpc::ServerWriter<forge::v1::JobEvent>* writer);
  // Counts the call and converts its status.
  grpc::Status Finish(absl::string_view method, const absl::Status& status);

  JobStore* const jobs_;
  BlobStore* const blobs_;
  Scheduler* const scheduler_;
  metrics::Family<metrics::Counter>* const rpcs_;
  const JobServiceOptions options_;
};

}  // namespace forge::server

#endif  // FORGE_SERVER_JOB_SERVICE_H_
