// The features of the learned performance model (learned_model.h): one fixed-length row of
// numbers per candidate, from what every candidate has before it runs:
//  - the GPU's figures from the arch table (common/arch: SMs, L2, DRAM bandwidth, the peak of the
//    task's math, shared memory and registers per SM);
//  - the task's work: flops and minimum DRAM bytes, their roofline floor on the GPU, the largest
//    tensor, element bytes, inputs and outputs, the task's kernel family;
//  - the launch (grid, block, dynamic shared memory) and the family's typed cost hints
//    (codegen::CostHints: executor, vector width, unrolled loads, row cache, bytes in flight, row
//    re-reads, register cap, GEMM tile, CTAs and math);
//  - bytes per level of the memory hierarchy: DRAM (the task's minimum plus spills), the row
//    re-reads' traffic and the share of it that the rows resident at once leave in L2;
//  - ptxas' resources (registers, static shared memory, spills) when known (the emulated backend
//    and measured results have them; the search's prior does not: missing);
//  - occupancy (blocks per SM, the limiter, occupancy fraction), waves and wave efficiency, from
//    the occupancy rules of compiler/cost with ptxas' registers or the prior's estimate;
//  - the analytic model's prediction (perf_model.h) and its ratio to the roofline floor.
// A figure a candidate lacks is NaN, which XGBoost treats as missing. The order and names are a
// table in features.cc; a model records FeatureSchemaDigest() and refuses rows of another schema.
#ifndef FORGE_COMPILER_COST_LEARNED_FEATURES_H_
#define FORGE_COMPILER_COST_LEARNED_FEATURES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/arch/arch.h"
#include "compiler/codegen/generated_kernel.h"
#include "compiler/cost/perf_model.h"
#include "forge/v1/task.pb.h"

namespace forge::cost {

// What one candidate's row is made of. `gpu`, `task` and `plan` must outlive the call.
struct CandidateDescription {
  const GpuArch* gpu = nullptr;
  const forge::v1::KernelTask* task = nullptr;
  const codegen::LaunchPlan* plan = nullptr;
  // ptxas' figures for the kernel (with the launch's dynamic shared memory), when known.
  std::optional<KernelResources> resources;
  // Registers to assume for occupancy when `resources` is unknown (the prior's estimate); 0: none.
  int estimated_registers = 0;
  // The analytic model's prediction for this candidate, in seconds (> 0).
  double analytic_seconds = 0;
};

// The feature names, in row order.
const std::vector<std::string>& FeatureNames();

// A digest of the names and their order: a model trained on one schema refuses another's rows.
const std::string& FeatureSchemaDigest();

// The task family (forge.v1.KernelFamily) a row of ExtractFeatures was made for; UNSPECIFIED
// (0) for a row of another length or without it.
int TaskFamilyOf(absl::Span<const float> row);

// The row of `candidate`: FeatureNames().size() numbers, NaN where a figure is unknown.
// InvalidArgument when a pointer is null or analytic_seconds is not positive.
absl::StatusOr<std::vector<float>> ExtractFeatures(const CandidateDescription& candidate);

}  // namespace forge::cost

#endif  // FORGE_COMPILER_COST_LEARNED_FEATURES_H_
