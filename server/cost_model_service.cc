#include "server/cost_model_service.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "server/cost_model_trainer.h"
#include "server/job_service.h"

namespace forge::server {
namespace {

constexpr size_t kMaxGpuNameBytes = 256;

}  // namespace

absl::StatusOr<forge::v1::GetCostModelResponse> AnswerCostModelRequest(
    CostModelStore& store, const std::vector<std::string>& spaces,
    const forge::v1::GetCostModelRequest& request) {
  if (request.gpu().empty() || request.gpu().size() > kMaxGpuNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GetCostModel needs a GPU name of 1 to ", kMaxGpuNameBytes, " bytes, got ",
        request.gpu().size()));
  }
  if (request.have_version() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("have_version must be 0 or more, got ", request.have_version()));
  }
  absl::StatusOr<GpuArch> gpu = GpuOfSpace(request.gpu());
  if (!gpu.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GetCostModel: ", gpu.status().message()));
  }
  forge::v1::GetCostModelResponse response;
  for (const std::string& space : spaces) {
    const absl::StatusOr<GpuArch> trained = GpuOfSpace(space);
    if (!trained.ok() || trained->name != gpu->name) continue;
    FORGE_ASSIGN_OR_RETURN(const std::optional<StoredCostModel> stored, store.GetStored(space));
    response.set_space(space);
    if (!stored.has_value()) return response;  // configured, nothing trained yet: version 0
    response.set_version(stored->info.version);
    response.set_training_rows(stored->info.rows);
    response.set_training_tasks(stored->info.tasks);
    if (stored->info.held_out.test_rows() > 0) *response.mutable_held_out() = stored->info.held_out;
    if (stored->info.version != request.have_version()) response.set_model(stored->bytes);
    return response;
  }
  return response;
}

grpc::Status CostModelService::GetCostModel(grpc::ServerContext* context,
                                            const forge::v1::GetCostModelRequest* request,
                                            forge::v1::GetCostModelResponse* response) {
  const absl::StatusOr<Caller> caller =
      auth_.Authorize(*context, {Role::kRead, Role::kSubmit, Role::kAdmin, Role::kWorker});
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<forge::v1::GetCostModelResponse> answer =
      AnswerCostModelRequest(*store_, spaces_, *request);
  if (!answer.ok()) return ToGrpcStatus(answer.status());
  *response = *std::move(answer);
  return grpc::Status::OK;
}

}  // namespace forge::server
