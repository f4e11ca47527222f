#include "server/worker_service.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "common/logging/logging.h"

#include "server/job_service.h"

namespace forge::server {
namespace {

metrics::Family<metrics::Histogram>* RegisterLatency(metrics::Registry* registry) {
  absl::StatusOr<metrics::Family<metrics::Histogram>*> family = registry->AddHistogram(
      {"forge_coordinator_worker_rpc_seconds",
       "Time the coordinator spent answering WorkerService calls, by method.",
       {}},
      {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2});
  if (!family.ok()) {
    GetLogger("coordinator")->critical("registering the latency histogram: {}",
                                       family.status().ToString());
    std::abort();
  }
  return *family;
}

}  // namespace

WorkerService::WorkerService(Scheduler* scheduler, metrics::Family<metrics::Counter>* rpcs,
                             metrics::Registry* registry)
    : scheduler_(scheduler), rpcs_(rpcs), latency_(RegisterLatency(registry)) {}

template <typename Response>
grpc::Status WorkerService::Finish(absl::string_view method, absl::Time started,
                                   absl::StatusOr<Response> result, Response* response) {
  latency_->Add({{"method", std::string(method)}})
      .Observe(absl::ToDoubleSeconds(absl::Now() - started));
  rpcs_->Add({{"method", std::string(method)},
              {"code", absl::StatusCodeToString(result.status().code())}})
      .Increment();
  if (result.ok()) *response = *std::move(result);
  return ToGrpcStatus(result.status());
}

grpc::Status WorkerService::Register(grpc::ServerContext*,
                                     const forge::v1::RegisterRequest* request,
                                     forge::v1::RegisterResponse* response) {
  const absl::Time started = absl::Now();
  return Finish("Register", started, scheduler_->Register(*request), response);
}

grpc::Status WorkerService::Heartbeat(grpc::ServerContext*,
                                      const forge::v1::HeartbeatRequest* request,
                                      forge::v1::HeartbeatResponse* response) {
  const absl::Time started = absl::Now();
  return Finish("Heartbeat", started, scheduler_->Heartbeat(*request), response);
}

grpc::Status WorkerService::Lease(grpc::ServerContext*, const forge::v1::LeaseRequest* request,
                                  forge::v1::LeaseResponse* response) {
  const absl::Time started = absl::Now();
  return Finish("Lease", started, scheduler_->Lease(*request), response);
}

grpc::Status WorkerService::Report(grpc::ServerContext*, const forge::v1::ReportRequest* request,
                                   forge::v1::ReportResponse* response) {
  const absl::Time started = absl::Now();
  return Finish("Report", started, scheduler_->Report(*request), response);
}

}  // namespace forge::server
