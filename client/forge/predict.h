// `forge predict`: a model graph -> the default kernel of every family for each of its tasks,
// compiled for the GPU's architecture and timed by the emulated backend's performance model. No
// GPU is used; every time it prints is PREDICTED, and says so.
#ifndef FORGE_CLIENT_FORGE_PREDICT_H_
#define FORGE_CLIENT_FORGE_PREDICT_H_

#include <string>

#include "absl/status/statusor.h"
#include "forge/v1/graph.pb.h"

namespace forge::client {

struct PredictOptions {
  std::string gpu = "h200";  // a name FindGpu knows
  bool json = false;         // JSON instead of a text table
};

// Partitions `graph`; for each task generates the default schedule point of every template of
// every applicable family with source (for gemm_library, whose library call has no source, the
// backend's library prediction), compiles it with NVRTC for the GPU's arch and predicts its time
// (worker/emulated). Renders one row per candidate: task short digest, task family,
// family/template, ops, predicted us, floor us, % of floor, registers/spill bytes, kind PREDICTED
// (or the compile failure), then totals: the best predicted time per task summed over task
// occurrences against the floors of the same tasks. Tasks only ATen can run show "ATen (not
// predicted)". NotFound for an unknown GPU; the partitioner's errors for a malformed graph.
absl::StatusOr<std::string> PredictGraph(const forge::v1::Graph& graph,
                                         const PredictOptions& options);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_PREDICT_H_
