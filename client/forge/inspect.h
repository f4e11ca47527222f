// `forge inspect`: a model graph -> its kernel tasks, their costs and roofline floors on a GPU.
#ifndef FORGE_CLIENT_FORGE_INSPECT_H_
#define FORGE_CLIENT_FORGE_INSPECT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "forge/v1/graph.pb.h"

namespace forge::client {

struct InspectOptions {
  std::string gpu = "h200";  // a name FindGpu knows
  bool json = false;         // JSON instead of a text table
};

// Reads a model: a torch.export archive (.pt2, recognised by its zip signature, imported by
// compiler/import) or a binary forge.v1.Graph (what `python -m forge export` writes). NotFound
// when the file cannot be opened; InvalidArgument when it is neither, or has no nodes; the
// importer's errors for a bad archive. Messages name the path.
absl::StatusOr<forge::v1::Graph> ReadModelFile(absl::string_view path);

// The ops of a task's group without its views, "+"-joined ("linear+gelu"); the views when that is
// all there is.
std::string OpSummary(const forge::v1::Graph& group);

// Partitions `graph` and renders the task list: per task the short digest (12 hex), family, ops,
// input and output shapes, GFLOP, MB, roofline floor on the GPU and occurrences, then totals.
// The floor uses tensor-core rates for GEMM, convolution and attention tasks in bf16/fp16/fp8,
// and CUDA-core rates otherwise (float32 never assumes TF32). NotFound for an unknown GPU.
absl::StatusOr<std::string> InspectGraph(const forge::v1::Graph& graph,
                                         const InspectOptions& options);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_INSPECT_H_
