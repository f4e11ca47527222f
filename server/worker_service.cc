#include "server/worker_service.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "common/logging/logging.h"
#include "common/status/status_macros.h"

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
                             metrics::Registry* registry, Authenticator auth,
                             CompiledCatalog* catalog)
    : scheduler_(scheduler),
      rpcs_(rpcs),
      latency_(RegisterLatency(registry)),
      auth_(std::move(auth)),
      catalog_(catalog) {}

absl::StatusOr<Caller> WorkerService::Authorize(const grpc::ServerContext& context,
                                                absl::string_view worker_id) const {
  FORGE_ASSIGN_OR_RETURN(Caller caller, auth_.Authorize(context, {Role::kWorker}));
  FORGE_RETURN_IF_ERROR(CheckWorkerId(caller, worker_id));
  return caller;
}

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

grpc::Status WorkerService::Register(grpc::ServerContext* context,
                                     const forge::v1::RegisterRequest* request,
                                     forge::v1::RegisterResponse* response) {
  const absl::Time started = absl::Now();
  absl::StatusOr<Caller> caller = auth_.Authorize(*context, {Role::kWorker});
  forge::v1::RegisterRequest bound = *request;
  // A worker that asks for no id gets its identity as its id.
  if (caller.ok() && caller->authenticated && bound.worker_id().empty()) {
    bound.set_worker_id(caller->owner);
  }
  const absl::Status allowed =
      caller.ok() ? CheckWorkerId(*caller, bound.worker_id()) : caller.status();
  if (!allowed.ok()) {
    return Finish<forge::v1::RegisterResponse>("Register", started, allowed, response);
  }
  return Finish("Register", started, scheduler_->Register(bound), response);
}

grpc::Status WorkerService::Heartbeat(grpc::ServerContext* context,
                                      const forge::v1::HeartbeatRequest* request,
                                      forge::v1::HeartbeatResponse* response) {
  const absl::Time started = absl::Now();
  absl::StatusOr<Caller> caller = Authorize(*context, request->worker_id());
  if (!caller.ok()) {
    return Finish<forge::v1::HeartbeatResponse>("Heartbeat", started, caller.status(), response);
  }
  return Finish("Heartbeat", started, scheduler_->Heartbeat(*request), response);
}

grpc::Status WorkerService::Lease(grpc::ServerContext* context,
                                  const forge::v1::LeaseRequest* request,
                                  forge::v1::LeaseResponse* response) {
  const absl::Time started = absl::Now();
  absl::StatusOr<Caller> caller = Authorize(*context, request->worker_id());
  if (!caller.ok()) {
    return Finish<forge::v1::LeaseResponse>("Lease", started, caller.status(), response);
  }
  return Finish("Lease", started, scheduler_->Lease(*request), response);
}

grpc::Status WorkerService::Report(grpc::ServerContext* context,
                                   const forge::v1::ReportRequest* request,
                                   forge::v1::ReportResponse* response) {
  const absl::Time started = absl::Now();
  absl::StatusOr<Caller> caller = Authorize(*context, request->worker_id());
  if (!caller.ok()) {
    return Finish<forge::v1::ReportResponse>("Report", started, caller.status(), response);
  }
  // Provenance: the results carry the identity that reported them, not a field the worker fills.
  forge::v1::ReportRequest attributed = *request;
  for (forge::v1::Result& result : *attributed.mutable_results()) {
    result.set_worker_identity(caller->authenticated ? caller->owner : "");
  }
  return Finish("Report", started, scheduler_->Report(attributed), response);
}

absl::StatusOr<Caller> WorkerService::AuthorizeCatalog(const grpc::ServerContext& context) const {
  FORGE_ASSIGN_OR_RETURN(Caller caller, auth_.Authorize(context, {Role::kWorker}));
  if (catalog_ == nullptr) {
    return absl::FailedPreconditionError(
        "this coordinator keeps no compiled-object catalog (catalog.enabled is off)");
  }
  return caller;
}

grpc::Status WorkerService::FetchCompiledObject(
    grpc::ServerContext* context, const forge::v1::FetchCompiledObjectRequest* request,
    forge::v1::FetchCompiledObjectResponse* response) {
  const absl::Time started = absl::Now();
  absl::StatusOr<Caller> caller = AuthorizeCatalog(*context);
  if (!caller.ok()) {
    return Finish<forge::v1::FetchCompiledObjectResponse>("FetchCompiledObject", started,
                                                          caller.status(), response);
  }
  return Finish("FetchCompiledObject", started, catalog_->Fetch(request->cache_key()), response);
}

grpc::Status WorkerService::PublishCompiledObject(
    grpc::ServerContext* context, const forge::v1::PublishCompiledObjectRequest* request,
    forge::v1::PublishCompiledObjectResponse* response) {
  const absl::Time started = absl::Now();
  absl::StatusOr<Caller> caller = AuthorizeCatalog(*context);
  absl::Status allowed = caller.status();
  if (caller.ok() && !caller->authenticated) {
    allowed = absl::FailedPreconditionError(
        "publishing compiled objects needs an authenticated worker identity, and this "
        "coordinator has no authentication (auth.tokens or auth.token-secret)");
  }
  if (!allowed.ok()) {
    return Finish<forge::v1::PublishCompiledObjectResponse>("PublishCompiledObject", started,
                                                            allowed, response);
  }
  absl::StatusOr<forge::v1::PublishCompiledObjectResponse> published;
  absl::StatusOr<bool> stored = catalog_->Publish(*request, caller->owner);
  if (stored.ok()) {
    published.emplace().set_stored(*stored);
  } else {
    published = stored.status();
  }
  return Finish("PublishCompiledObject", started, std::move(published), response);
}

}  // namespace forge::server
