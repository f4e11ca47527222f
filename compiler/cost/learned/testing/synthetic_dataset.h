// A synthetic-but-real dataset for the learned model's tests: elementwise tasks of many sizes and
// dtypes, each with a grid of launches (threads per block, elements per thread, vector width)
// described by real cost hints, their real features (features.h) and real analytic predictions
// (perf_model.h), and a "measured" time from a known rule the analytic model lacks: what the H200
// showed for pointwise schedules (benchmarks/results/2026-11-30-perf-model-vs-h200.md): scalar
// loads cost per access, about 30% over the roofline when a thread issues several of them, and
// 1024-thread blocks lose 10%; plus a deterministic +-3% jitter. A model that learns cuts the
// error on tasks it never saw; one that does not, cannot.
#ifndef FORGE_COMPILER_COST_LEARNED_TESTING_SYNTHETIC_DATASET_H_
#define FORGE_COMPILER_COST_LEARNED_TESTING_SYNTHETIC_DATASET_H_

#include <vector>

#include "absl/status/statusor.h"
#include "common/arch/arch.h"
#include "compiler/codegen/generated_kernel.h"
#include "compiler/cost/learned/learned_model.h"
#include "compiler/cost/perf_model.h"
#include "forge/v1/task.pb.h"

namespace forge::cost::testing {

struct SyntheticCandidate {
  forge::v1::KernelTask task;
  codegen::LaunchPlan plan;
  KernelResources resources;
  TrainingRow row;  // features, measured (by the rule), analytic, group = task digest
};

// Candidates of `tasks` elementwise tasks (digests "synthetic-<i>", sizes from 2^20 to 2^28
// elements, float32 or bfloat16 by task) on `gpu`, every launch of the grid for each.
absl::StatusOr<std::vector<SyntheticCandidate>> SyntheticPointwise(const GpuArch& gpu, int tasks);

// The rows of `candidates`.
std::vector<TrainingRow> RowsOf(const std::vector<SyntheticCandidate>& candidates);

}  // namespace forge::cost::testing

#endif  // FORGE_COMPILER_COST_LEARNED_TESTING_SYNTHETIC_DATASET_H_
