// forge.v1.CostModelService: the learned performance models the coordinator trains
// (cost_model_trainer.h) and stores in Redis (cost_model_store.h), served to worker daemons (their
// emulated backends predict with them) and to `forge predict`.
//
// The coordinator trains one model per configured space (a GPU kind, "NVIDIA H200":
// coordinator_main's cost-model.space). A request names a GPU by product name or arch-table name;
// it gets the model of the configured space whose GPU is that one (GpuOfSpace), or version 0
// (predict with the analytic model) when there is none. Callers poll with the version they hold
// (have_version): the bytes (hundreds of KiB) travel only when the version changed, so a version
// the trainer stores reaches every poller at its next poll, without a restart.
//
// Access: any authenticated caller (read, submit, admin or worker tokens); with open auth, anyone.
// InvalidArgument for an empty or over-long GPU name, a GPU the arch table lacks, a "predicted:"
// name, or a negative have_version; a stored model is sent as stored (the fetcher checks its
// schema; the store's own Get reports DataLoss for unusable bytes).
#ifndef FORGE_SERVER_COST_MODEL_SERVICE_H_
#define FORGE_SERVER_COST_MODEL_SERVICE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "forge/v1/service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/auth/auth.h"
#include "server/cost_model_store.h"

namespace forge::server {

// The answer to `request` from the models of `spaces` in `store`; no gRPC (tests and the service).
absl::StatusOr<forge::v1::GetCostModelResponse> AnswerCostModelRequest(
    CostModelStore& store, const std::vector<std::string>& spaces,
    const forge::v1::GetCostModelRequest& request);

class CostModelService final : public forge::v1::CostModelService::Service {
 public:
  // `store` must outlive the service; `spaces` are the spaces the coordinator trains.
  CostModelService(CostModelStore* store, std::vector<std::string> spaces, Authenticator auth = {})
      : store_(store), spaces_(std::move(spaces)), auth_(std::move(auth)) {}

  grpc::Status GetCostModel(grpc::ServerContext* context,
                            const forge::v1::GetCostModelRequest* request,
                            forge::v1::GetCostModelResponse* response) override;

 private:
  CostModelStore* const store_;
  const std::vector<std::string> spaces_;
  const Authenticator auth_;
};

}  // namespace forge::server

#endif  // FORGE_SERVER_COST_MODEL_SERVICE_H_
