// `forge predict`: a model graph -> the default kernel of every family for each of its tasks,
// compiled for the GPU's architecture and timed by the emulated backend's performance model. No
// GPU is used; every time it prints is PREDICTED, and says so.
#ifndef FORGE_CLIENT_FORGE_PREDICT_H_
#define FORGE_CLIENT_FORGE_PREDICT_H_

#include <string>

#include "absl/status/statusor.h"
#include "compiler/cost/learned/cost_predictor.h"
#include "forge/v1/graph.pb.h"

namespace forge::client {

struct PredictOptions {
  std::string gpu = "h200";  // a name FindGpu knows
  bool json = false;         // JSON instead of a text table
  // Under each row, what drove its prediction: the learned model's largest per-feature
  // contributions (XGBoost's SHAP values, as factors on the time), or the analytic model's
  // account of its own prediction.
  bool explain = false;
  // The learned performance model to refine the analytic one with (fetched from a coordinator:
  // `forge predict --learned`); null: the analytic model alone. Must outlive the call.
  const cost::CostPredictor* learned = nullptr;
  // Where `learned` came from, for the report ("coordinator HOST:PORT").
  std::string learned_origin;
  // A GPU (FindGpu name) whose model `learned` is, when it is not `gpu`'s: each candidate the
  // learned model serves is predicted on that GPU and carried to `gpu` by the ratio of the two
  // GPUs' ceilings on its bottleneck (compiler/cost/learned/transfer.h); its row says so, and the
  // report says the transferred times have no measured error. Empty: no transfer.
  std::string transfer_from;
};

// Partitions `graph`; for each task generates the default schedule point of every template of
// every applicable family with source (for gemm_library, whose library call has no source, the
// backend's library prediction), compiles it with NVRTC for the GPU's arch and predicts its time
// (worker/emulated). Renders one row per candidate: task short digest, task family,
// family/template, ops, predicted us, floor us, % of floor, registers/spill bytes, kind PREDICTED
// (or the compile failure), then totals: the best predicted time per task summed over task
// occurrences against the floors of the same tasks. Tasks only ATen can run show "ATen (not
// predicted)". Each row names the model that predicted it ("analytic" or "learned vN"); the
// report ends with the performance model in use and, per task family, its measured error on
// results held back from its training (the model version's CostModelEvaluation; "no measured
// error" when it has none, and always for the analytic model, which nothing here measured).
// NotFound for an unknown GPU; the partitioner's errors for a malformed graph.
absl::StatusOr<std::string> PredictGraph(const forge::v1::Graph& graph,
                                         const PredictOptions& options);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_PREDICT_H_
