// Keeps the learned performance model of a worker's emulated GPUs in step with the coordinator:
// polls forge.v1.CostModelService every `interval` with the version each predictor holds and
// installs a new version when one arrives (cost::CostPredictor::Install), so the emulated backend
// (worker/emulated, through EmulatedExecutor) predicts with the newest model without a restart.
// Until a model arrives, and for a GPU the coordinator trains no model of, the predictors keep the
// analytic model. A failed poll (coordinator unreachable, an older coordinator without the
// service, a model of another feature schema) keeps the installed model and is logged when the
// error changes; polling continues.
//
// Separate from the lease loop (worker_daemon.h) on purpose: a model is advice to the emulated
// backend, never needed to lease or report, and its bytes (hundreds of KiB) should not ride on
// heartbeats.
#ifndef FORGE_WORKER_DAEMON_COST_MODEL_FETCHER_H_
#define FORGE_WORKER_DAEMON_COST_MODEL_FETCHER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "compiler/cost/learned/cost_predictor.h"
#include "grpcpp/security/credentials.h"

namespace forge::daemon {

struct CostModelFetcherOptions {
  // The coordinator, "host:port", and how to reach it (the worker's credentials; null: plaintext).
  std::string coordinator;
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  absl::Duration interval = absl::Seconds(30);
  absl::Duration rpc_timeout = absl::Seconds(10);
};

// A GPU (arch-table or product name) and the predictor its lanes use; the predictor must outlive
// the fetcher.
struct FetchedModel {
  std::string gpu;
  cost::CostPredictor* predictor = nullptr;
};

class CostModelFetcher {
 public:
  // Does not poll; Start begins the polling thread.
  CostModelFetcher(CostModelFetcherOptions options, std::vector<FetchedModel> models);
  // Stops and joins the thread.
  ~CostModelFetcher();
  CostModelFetcher(const CostModelFetcher&) = delete;
  CostModelFetcher& operator=(const CostModelFetcher&) = delete;

  // Polls once for every GPU now; the first error, after trying them all.
  absl::Status PollOnce();

  // Polls now and then every interval on a thread of its own, until destruction.
  void Start();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace forge::daemon

#endif  // FORGE_WORKER_DAEMON_COST_MODEL_FETCHER_H_
