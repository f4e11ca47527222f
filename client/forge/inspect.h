// `forge inspect`: a model graph -> its kernel tasks, their costs and roofline floors on a GPU.
#ifndef FORGE_CLIENT_FORGE_INSPECT_H_
#define FORGE_CLIENT_FORGE_INSPECT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/arch/arch.h"
#include "forge/v1/graph.pb.h"
#include "forge/v1/task.pb.h"

namespace forge::client {

struct InspectOptions {
  std::string gpu = "h200";  // a name FindGpu knows
  bool json = false;         // JSON instead of a text table
};

// How `task` at `median_us` on `gpu` relates to its roofline: "memory-bound at 62% of bandwidth
// (compute 3% of fp32 peak)", "compute-bound at 71% of bf16 peak", "launch-bound: no DRAM traffic
// or arithmetic", or a warning when the time is below the floor. Empty when the GPU lacks the
// task's math mode or the time is not positive.
std::string BottleneckHint(const GpuArch& gpu, const forge::v1::KernelTask& task,
                           double median_us);

// The ops of a task's group without its views, "+"-joined ("linear+gelu"); the views when that is
// all there is.
std::string OpSummary(const forge::v1::Graph& group);

// Partitions `graph` and renders the task list: per task the short digest (12 hex), family, ops,
// input and output shapes, GFLOP, MB, roofline floor on the GPU (in graph::FloorMathMode),
// occurrences and notes (an ATen task's: why each of its ops runs through ATen), then totals. NotFound for an unknown GPU.
absl::StatusOr<std::string> InspectGraph(const forge::v1::Graph& graph,
                                         const InspectOptions& options);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_INSPECT_H_
