// `forge results`: a job's GetResultsResponse -> a result bundle on disk.
//
//   DIR/report.md, report.json   per task and end to end: eager, forge, floor, speedups,
//                                % of floor, bottleneck, MEASURED or PREDICTED
//   DIR/plan.json                the model as kernel / library / ATen calls over named buffers,
//                                in an order that respects dependencies (the partition of the
//                                job's graph)
//   DIR/speedup.png              per-task speedup over eager (PREDICTED bars marked)
//   DIR/roofline.png             achieved FLOP/s against arithmetic intensity under the GPU's roofs
//   DIR/tasks/<task>/kernel.cu   the winner's source, regenerated from its Candidate
//                                (search::GenerateCandidate: byte-identical to what the worker ran)
//   DIR/tasks/<task>/candidate.json  the winner: candidate, schedule, launch, measurement, judge
//   DIR/include/compiler/codegen/host_launch_abi.h  the host-launch ABI, when a winner is a
//                                host-launched translation unit (CUTLASS), which includes it
//
// PREDICTED times (the emulated backend's, without a GPU) are labelled PREDICTED in every file.
// <task> is the task digest's first 12 hex digits (all 64 if two tasks share a prefix).
#ifndef FORGE_CLIENT_FORGE_RESULTS_H_
#define FORGE_CLIENT_FORGE_RESULTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "forge/v1/graph.pb.h"
#include "forge/v1/service.pb.h"

namespace forge::client {

struct ResultsOptions {
  // GPU whose ceilings draw the roofline, unless the measurements name a GPU FindGpu knows.
  std::string gpu = "h200";
};

struct ResultsReport {
  std::string markdown;  // report.md
  std::string json;      // report.json
};

// The reports of `results`, without touching the disk. `plan_note` is what report.md says about
// plan.json. NotFound for an unknown GPU.
absl::StatusOr<ResultsReport> RenderResultsReport(const forge::v1::GetResultsResponse& results,
                                                  const ResultsOptions& options,
                                                  absl::string_view plan_note = "");

// plan.json: for every task instance of `model`'s partition, in order, one step that calls the
// task's winner (a generated kernel with its launch; a host-launched translation unit with what
// building and calling it takes: nvcc_flags (compile::NvccFlags of the job's arch, as the worker
// built it), compile_options, runtime_args and the include directory of the ABI header; a
// library call with the cuBLASLt algorithm its measurement recorded; or the ATen calls of its
// nodes when no candidate won) on named
// buffers; and the buffers (graph inputs with their role and weight digest, intermediates,
// outputs) with dtype and shape. InvalidArgument when the model is not the job's (its digest
// differs from Job.model_digest); FailedPrecondition when its partition names a task the job
// lacks (the coordinator partitions differently).
absl::StatusOr<std::string> RenderPlan(const forge::v1::GetResultsResponse& results,
                                       const forge::v1::Graph& model);

// Writes the bundle into `directory` (created as needed; existing files of the same names are
// replaced). Without `model` (nullptr) there is no plan.json, and report.md says why. Returns
// the paths written, relative to `directory`, in writing order.
absl::StatusOr<std::vector<std::string>> WriteResultsBundle(
    const forge::v1::GetResultsResponse& results, const forge::v1::Graph* model,
    const ResultsOptions& options, absl::string_view directory);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_RESULTS_H_
