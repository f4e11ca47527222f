#include "compiler/search/prior.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/dtype/dtype.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/aten_fallback/aten_fallback.h"
#include "compiler/graph/cost.h"
#include "compiler/cost/perf_model.h"

namespace forge::search {
namespace {

// Registers of a generated kernel that holds nothing in flight, and the hardware's per-thread cap.
constexpr int kBaseRegisters = 32;
constexpr int kMaxRegisters = 255;

bool HasDType(const forge::v1::KernelTask& task, forge::v1::DType dtype) {
  for (const auto* specs : {&task.inputs(), &task.outputs()}) {
    for (const forge::v1::TensorSpec& spec : *specs) {
      if (spec.dtype() == dtype) return true;
    }
  }
  return false;
}

// Generated kernels compute as GeneratedKernelMathMode says; cuBLASLt runs 16-bit data on the
// tensor cores.
MathMode MathModeOf(const forge::v1::KernelTask& task, bool library_call) {
  const MathMode generated = graph::GeneratedKernelMathMode(task);
  if (library_call && generated != MathMode::kFp64 &&
      (HasDType(task, forge::v1::DTYPE_BFLOAT16) || HasDType(task, forge::v1::DTYPE_FLOAT16))) {
    return MathMode::kBf16;
  }
  return generated;
}

// The index space a kernel walks is its largest tensor's.
std::int64_t LargestTensorElements(const forge::v1::KernelTask& task) {
  std::int64_t largest = 1;
  for (const auto* specs : {&task.inputs(), &task.outputs()}) {
    for (const forge::v1::TensorSpec& spec : *specs) {
      largest = std::max(largest, graph::NumElements(spec));
    }
  }
  return largest;
}

// Input bytes per index of that space: small broadcast inputs weigh in proportion to their size.
double InputBytesPerIndex(const forge::v1::KernelTask& task) {
  double bytes = 0;
  for (const forge::v1::TensorSpec& input : task.inputs()) {
    bytes += static_cast<double>(graph::NumElements(input)) * DTypeBytes(input.dtype());
  }
  return bytes / static_cast<double>(LargestTensorElements(task));
}

double LaunchedThreads(const codegen::LaunchDims& launch) {
  double threads = 1;
  for (int d = 0; d < 3; ++d) threads *= static_cast<double>(launch.grid[d]) * launch.block[d];
  return threads;
}

}  // namespace

absl::StatusOr<CostModelPrior> CostModelPrior::ForGpu(absl::string_view gpu_name,
                                                      const cost::CostPredictor* learned) {
  FORGE_ASSIGN_OR_RETURN(GpuArch gpu, FindGpu(gpu_name));
  return CostModelPrior(std::move(gpu), learned);
}

EstimatedKernel CostModelPrior::Estimate(const forge::v1::KernelTask& task,
                                         const codegen::LaunchPlan& plan) {
  const codegen::CostHints& hints = plan.hints;
  const double handled_per_thread =
      std::max(1.0, static_cast<double>(LargestTensorElements(task)) /
                        LaunchedThreads(plan.launch));
  // A row cached in registers is loaded whole up front; otherwise the loop's unrolled loads are
  // in flight.
  const double in_registers =
      hints.row_cache == codegen::RowCache::kRegisters
          ? handled_per_thread
          : std::min(handled_per_thread, static_cast<double>(hints.unrolled_elements));
  EstimatedKernel estimate;
  estimate.elements_in_flight_per_thread = in_registers;
  if (hints.row_cache == codegen::RowCache::kSharedMemory) {
    // A cached cluster copies a thread's whole part of the row into shared memory at once
    // (cp.async, no registers): its share of the cache is in flight.
    const double block_threads = static_cast<double>(plan.launch.block[0]) *
                                 plan.launch.block[1] * plan.launch.block[2];
    estimate.elements_in_flight_per_thread =
        plan.launch.dynamic_shared_bytes / block_threads / InputBytesPerIndex(task);
  }
  // A point's register cap bounds them (row_reduce asks __launch_bounds__ for the blocks per SM).
  const double cap =
      hints.max_registers > 0 ? static_cast<double>(hints.max_registers) : kMaxRegisters;
  estimate.registers_per_thread = static_cast<int>(
      std::min<double>(cap, kBaseRegisters + std::ceil(in_registers)));
  return estimate;
}

absl::StatusOr<double> CostModelPrior::PredictSeconds(const forge::v1::KernelTask& task,
                                                      const codegen::LaunchPlan& plan) const {
  int estimated_registers = 0;
  FORGE_ASSIGN_OR_RETURN(const double analytic, AnalyticSeconds(task, plan, estimated_registers));
  if (learned_ == nullptr) return analytic;
  FORGE_ASSIGN_OR_RETURN(const cost::CostPrediction prediction,
                         learned_->Predict({.gpu = &gpu_,
                                            .task = &task,
                                            .plan = &plan,
                                            .estimated_registers = estimated_registers,
                                            .analytic_seconds = analytic}));
  return prediction.seconds;
}

absl::StatusOr<double> CostModelPrior::AnalyticSeconds(const forge::v1::KernelTask& task,
                                                       const codegen::LaunchPlan& plan,
                                                       int& estimated_registers) const {
  // The ATen fallback is the baseline; other families' ATen calls (the SDPA backends) are
  // library calls below.
  if (plan.hints.executor == codegen::Executor::kAten &&
      plan.template_name == codegen::AtenFallbackFamily::kTemplateName) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prior ranks search-space points; the ATen fallback of task ", task.digest(),
        " is the baseline, not one of them"));
  }
  const double flops = static_cast<double>(task.flops());
  const double bytes = static_cast<double>(task.min_bytes());
  if (plan.hints.gemm_math != codegen::GemmMath::kNone) {
    FORGE_ASSIGN_OR_RETURN(const cost::GemmPrediction prediction,
                           cost::PredictGemmTime(gpu_, flops, bytes, plan.hints));
    return prediction.seconds;
  }
  if (plan.hints.executor == codegen::Executor::kCublasLt ||
      plan.hints.executor == codegen::Executor::kCudnn ||
      plan.hints.executor == codegen::Executor::kHostLaunched ||
      plan.hints.executor == codegen::Executor::kAten) {
    FORGE_ASSIGN_OR_RETURN(const cost::LibraryPrediction prediction,
                           cost::PredictLibraryTime(gpu_, flops, bytes, MathModeOf(task, true),
                                                    plan.hints.kernel_launches));
    return prediction.seconds;
  }
  const EstimatedKernel estimate = Estimate(task, plan);
  estimated_registers = estimate.registers_per_thread;
  const cost::KernelResources resources{
      .registers_per_thread = estimate.registers_per_thread,
      .dynamic_shared_bytes = plan.launch.dynamic_shared_bytes};
  const cost::KernelWork work{
      .flops = flops,
      .bytes_moved = bytes,
      .bytes_in_flight_per_thread =
          estimate.elements_in_flight_per_thread * InputBytesPerIndex(task),
      .math_mode = MathModeOf(task, false)};
  FORGE_ASSIGN_OR_RETURN(const cost::KernelPrediction prediction,
                         cost::PredictKernelTime(gpu_, plan.launch, resources, work));
  return prediction.seconds;
}

}  // namespace forge::search
