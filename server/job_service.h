// forge.v1.JobService over the job and blob stores: model intake (validation against
// JobServiceOptions::intake, see intake.h; blobs; partition),
// job state, WatchJob's event stream, listing and cancellation; results and the fleet come from
// the scheduler.
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
#include "server/blob_store.h"
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

  // The forge_coordinator_rpcs_total family, which WorkerService counts its calls in too.
  metrics::Family<metrics::Counter>* rpc_counter() const { return rpcs_; }

 private:
  absl::Status Submit(grpc::ServerReader<forge::v1::SubmitJobRequest>* reader,
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
