#include "worker/daemon/cost_model_fetcher.h"

#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status/grpc_status.h"
#include "common/logging/logging.h"
#include "forge/v1/service.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace forge::daemon {

struct CostModelFetcher::State {
  CostModelFetcherOptions options;
  std::vector<FetchedModel> models;
  std::unique_ptr<forge::v1::CostModelService::Stub> stub;
  std::thread thread;
  absl::Mutex mutex;
  bool stopping = false;     // guarded by mutex
  std::string last_error;    // the thread's; logged when it changes

  absl::Status Poll(const FetchedModel& model) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         absl::ToChronoMilliseconds(options.rpc_timeout));
    forge::v1::GetCostModelRequest request;
    request.set_gpu(model.gpu);
    request.set_have_version(model.predictor->model_version());
    forge::v1::GetCostModelResponse response;
    const grpc::Status status = stub->GetCostModel(&context, request, &response);
    if (!status.ok()) {
      return FromGrpcStatus(
          status, absl::StrCat("GetCostModel(", model.gpu, ") at ", options.coordinator));
    }
    const absl::StatusOr<bool> installed = model.predictor->Install(response);
    if (!installed.ok()) return installed.status();
    if (*installed) {
      GetLogger("worker")->info(
          "performance model for {}: {}", model.gpu,
          response.version() == 0
              ? std::string("analytic (no learned model)")
              : absl::StrCat("learned version ", response.version(), " of ", response.space(),
                             " (", response.training_rows(), " rows, ", response.training_tasks(),
                             " tasks)",
                             model.predictor->UsesLearnedModel() ? ""
                                                                 : "; too little data: analytic"));
    }
    return absl::OkStatus();
  }
};

CostModelFetcher::CostModelFetcher(CostModelFetcherOptions options,
                                   std::vector<FetchedModel> models)
    : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  state_->models = std::move(models);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      state_->options.credentials != nullptr ? state_->options.credentials
                                             : grpc::InsecureChannelCredentials();
  state_->stub = forge::v1::CostModelService::NewStub(
      grpc::CreateChannel(state_->options.coordinator, credentials));
}

CostModelFetcher::~CostModelFetcher() {
  {
    absl::MutexLock lock(&state_->mutex);
    state_->stopping = true;
  }
  if (state_->thread.joinable()) state_->thread.join();
}

absl::Status CostModelFetcher::PollOnce() {
  absl::Status first;
  for (const FetchedModel& model : state_->models) {
    absl::Status polled = state_->Poll(model);
    if (first.ok()) first = std::move(polled);
  }
  return first;
}

void CostModelFetcher::Start() {
  state_->thread = std::thread([this] {
    State& state = *state_;
    while (true) {
      const absl::Status polled = PollOnce();
      const std::string error = polled.ok() ? "" : polled.ToString();
      if (error != state.last_error && !error.empty()) {
        GetLogger("worker")->warn("performance model: {} (keeping the installed model)", error);
      }
      state.last_error = error;
      absl::MutexLock lock(&state.mutex);
      if (state.mutex.AwaitWithTimeout(absl::Condition(&state.stopping), state.options.interval)) {
        return;
      }
    }
  });
}

}  // namespace forge::daemon
