#include "compiler/cost/learned/testing/synthetic_dataset.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "compiler/cost/learned/features.h"
#include "compiler/cost/perf_model.h"

namespace forge::cost::testing {
namespace {

forge::v1::TensorSpec Tensor(forge::v1::DType dtype, int64_t elements) {
  forge::v1::TensorSpec spec;
  spec.set_dtype(dtype);
  spec.add_shape(elements);
  spec.add_strides(1);
  return spec;
}

// The rule the analytic model lacks (see the header), as a factor on its time.
double HiddenFactor(const codegen::LaunchPlan& plan, int64_t elements_per_thread, int index) {
  double factor = 1;
  if (plan.hints.vector_width == 1 && elements_per_thread > 1) factor *= 1.3;
  if (plan.launch.block[0] >= 1024) factor *= 1.1;
  factor *= 1 + 0.03 * std::sin(index * 12.9898);
  return factor;
}

}  // namespace

absl::StatusOr<std::vector<SyntheticCandidate>> SyntheticPointwise(const GpuArch& gpu, int tasks) {
  std::vector<SyntheticCandidate> out;
  int index = 0;
  for (int t = 0; t < tasks; ++t) {
    const int64_t elements = int64_t{1} << (20 + (t * 5) % 9);
    const bool bf16 = t % 2 == 1;
    const forge::v1::DType dtype = bf16 ? forge::v1::DTYPE_BFLOAT16 : forge::v1::DTYPE_FLOAT32;
    const int element_bytes = bf16 ? 2 : 4;
    const int inputs = 1 + t % 3;
    forge::v1::KernelTask task;
    task.set_digest(absl::StrCat("synthetic-", t));
    task.set_family(forge::v1::KERNEL_FAMILY_POINTWISE);
    for (int i = 0; i < inputs; ++i) *task.add_inputs() = Tensor(dtype, elements);
    *task.add_outputs() = Tensor(dtype, elements);
    task.set_flops(elements * (1 + t % 4));
    task.set_min_bytes(elements * element_bytes * (inputs + 1));
    for (const int threads : {128, 256, 512, 1024}) {
      for (const int64_t per_thread : {1, 2, 4, 8}) {
        for (const int64_t vector : {1, 2, 4}) {
          SyntheticCandidate candidate;
          candidate.task = task;
          codegen::LaunchPlan& plan = candidate.plan;
          const int64_t per_block = threads * per_thread * vector;
          plan.launch.block = {static_cast<uint32_t>(threads), 1, 1};
          plan.launch.grid = {static_cast<uint32_t>((elements + per_block - 1) / per_block), 1, 1};
          plan.hints.vector_width = vector;
          plan.hints.unrolled_elements = vector * per_thread;
          plan.hints.bytes_in_flight_per_thread =
              static_cast<double>(vector * per_thread * element_bytes * inputs);
          candidate.resources.registers_per_thread = static_cast<int>(16 + vector * per_thread);
          const KernelWork work{.flops = static_cast<double>(task.flops()),
                                .bytes_moved = static_cast<double>(task.min_bytes()),
                                .bytes_in_flight_per_thread = plan.hints.bytes_in_flight_per_thread,
                                .math_mode = MathMode::kFp32};
          FORGE_ASSIGN_OR_RETURN(const KernelPrediction analytic,
                                 PredictKernelTime(gpu, plan.launch, candidate.resources, work));
          FORGE_ASSIGN_OR_RETURN(candidate.row.features,
                                 ExtractFeatures({.gpu = &gpu,
                                                  .task = &candidate.task,
                                                  .plan = &candidate.plan,
                                                  .resources = candidate.resources,
                                                  .analytic_seconds = analytic.seconds}));
          candidate.row.analytic_seconds = analytic.seconds;
          candidate.row.measured_seconds =
              analytic.seconds * HiddenFactor(plan, per_thread, index++);
          candidate.row.group = task.digest();
          out.push_back(std::move(candidate));
        }
      }
    }
  }
  return out;
}

std::vector<TrainingRow> RowsOf(const std::vector<SyntheticCandidate>& candidates) {
  std::vector<TrainingRow> rows;
  rows.reserve(candidates.size());
  for (const SyntheticCandidate& candidate : candidates) rows.push_back(candidate.row);
  return rows;
}

}  // namespace forge::cost::testing
