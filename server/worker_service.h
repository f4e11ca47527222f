// forge.v1.WorkerService over the scheduler: GPU worker daemons register, heartbeat, lease
// candidates and report results. Statuses keep the scheduler's codes; every call is counted in
// forge_coordinator_rpcs_total{method, code} like JobService's.
//
// Access: every call needs a token of role worker (server/auth/auth.h), whose owner is the worker
// identity; the request's worker_id must be that identity or start with "IDENTITY/" (Register
// with no id gets the identity itself), so a worker cannot heartbeat, lease or report as another
// (and the scheduler refuses reports for leases its id does not hold). Each reported result's
// worker_identity is set to the identity, replacing what the worker sent. With open auth anyone
// may call as any worker id, and worker_identity is left empty.
//
// The compiled-object catalog (server/compiled_catalog): FetchCompiledObject and
// PublishCompiledObject need the worker role too, but no worker id (the catalog is the fleet's, not
// a worker's). Publishing needs an authenticated identity, which the catalog records as the
// object's publisher (a coordinator without authentication refuses it: FAILED_PRECONDITION);
// without a catalog both calls are FAILED_PRECONDITION.
#ifndef FORGE_SERVER_WORKER_SERVICE_H_
#define FORGE_SERVER_WORKER_SERVICE_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"
#include "forge/v1/service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/auth/auth.h"
#include "server/compiled_catalog/compiled_catalog.h"
#include "server/scheduler.h"

namespace forge::server {

class WorkerService final : public forge::v1::WorkerService::Service {
 public:
  // `scheduler` must outlive the service; `rpcs` is the coordinator's RPC counter family. The
  // registry gets forge_coordinator_worker_rpc_seconds{method}: time spent answering, which is
  // mostly the scheduler's Redis round trips (aborts if it has the family already). `auth` says who
  // may call (open: anyone). `catalog`, when set, must outlive the service.
  WorkerService(Scheduler* scheduler, metrics::Family<metrics::Counter>* rpcs,
                metrics::Registry* registry, Authenticator auth = {},
                CompiledCatalog* catalog = nullptr);

  grpc::Status Register(grpc::ServerContext* context, const forge::v1::RegisterRequest* request,
                        forge::v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const forge::v1::HeartbeatRequest* request,
                         forge::v1::HeartbeatResponse* response) override;
  grpc::Status Lease(grpc::ServerContext* context, const forge::v1::LeaseRequest* request,
                     forge::v1::LeaseResponse* response) override;
  grpc::Status Report(grpc::ServerContext* context, const forge::v1::ReportRequest* request,
                      forge::v1::ReportResponse* response) override;
  grpc::Status FetchCompiledObject(grpc::ServerContext* context,
                                   const forge::v1::FetchCompiledObjectRequest* request,
                                   forge::v1::FetchCompiledObjectResponse* response) override;
  grpc::Status PublishCompiledObject(grpc::ServerContext* context,
                                     const forge::v1::PublishCompiledObjectRequest* request,
                                     forge::v1::PublishCompiledObjectResponse* response) override;

 private:
  // The caller of `context` when it is a worker and the coordinator keeps a catalog.
  absl::StatusOr<Caller> AuthorizeCatalog(const grpc::ServerContext& context) const;
  // The worker identity of `context`, checked to own `worker_id`.
  absl::StatusOr<Caller> Authorize(const grpc::ServerContext& context,
                                   absl::string_view worker_id) const;
  template <typename Response>
  grpc::Status Finish(absl::string_view method, absl::Time started,
                      absl::StatusOr<Response> result, Response* response);

  Scheduler* const scheduler_;
  metrics::Family<metrics::Counter>* const rpcs_;
  metrics::Family<metrics::Histogram>* const latency_;
  const Authenticator auth_;
  CompiledCatalog* const catalog_;
};

}  // namespace forge::server

#endif  // FORGE_SERVER_WORKER_SERVICE_H_
