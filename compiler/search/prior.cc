#include "compiler/search/prior.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/dtype/dtype.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/reduction/reduction.h"
#include "compiler/codegen/gemm_library/gemm_library.h"
#include "compiler/graph/cost.h"
#include "worker/emulated/perf_model.h"

namespace forge::search {
namespace {

// Registers of a generated kernel that holds nothing in flight, and the hardware's per-thread cap.
constexpr int kBaseRegisters = 32;
constexpr int kMaxRegisters = 255;

bool IsGemmLibraryCall(const codegen::GeneratedKernel& kernel) {
  return kernel.template_name == codegen::GemmLibraryFamily::kCublasLtTemplate ||
         kernel.template_name == codegen::GemmLibraryFamily::kCublasLtThenPointwiseTemplate;
}

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

absl::StatusOr<CostModelPrior> CostModelPrior::ForGpu(absl::string_view gpu_name) {
  FORGE_ASSIGN_OR_RETURN(GpuArch gpu, FindGpu(gpu_name));
  return CostModelPrior(std::move(gpu));
}

EstimatedKernel CostModelPrior::Estimate(const forge::v1::KernelTask& task,
                                         const codegen::GeneratedKernel& kernel) {
  const double handled_per_thread =
      std::max(1.0, static_cast<double>(LargestTensorElements(task)) /
                        LaunchedThreads(kernel.launch));
  const double unrolled = static_cast<double>(kernel.Parameter("vector_width", 1) *
                                              kernel.Parameter("elements_per_thread", 1));
  const bool caches_row = kernel.Parameter("cache_row", 0) == 1;
  // With cluster_blocks a row's chunks loop unrolled kClusterChunkUnroll deep. A cached cluster
  // copies a thread's whole part of the row into shared memory at once (cp.async, no registers):
  // its share of the cache is in flight.
  const bool cluster = kernel.Parameter("cluster_blocks", 1) > 1;
  const bool caches_in_registers = caches_row && !cluster;
  const double chunk_unroll = cluster ? codegen::ReductionFamily::kClusterChunkUnroll : 1;
  const double in_registers = caches_in_registers
                                  ? handled_per_thread
                                  : std::min(handled_per_thread, chunk_unroll * unrolled);
  EstimatedKernel estimate;
  estimate.elements_in_flight_per_thread = in_registers;
  if (caches_row && cluster) {
    const double block_threads = static_cast<double>(kernel.launch.block[0]) *
                                 kernel.launch.block[1] * kernel.launch.block[2];
    estimate.elements_in_flight_per_thread =
        kernel.launch.dynamic_shared_bytes / block_threads / InputBytesPerIndex(task);
  }
  // A point's max_registers caps them (row_reduce asks __launch_bounds__ for the blocks per SM).
  const int64_t max_registers = kernel.Parameter("max_registers", 0);
  const double cap = max_registers > 0 ? static_cast<double>(max_registers) : kMaxRegisters;
  estimate.registers_per_thread = static_cast<int>(
      std::min<double>(cap, kBaseRegisters + std::ceil(in_registers)));
  return estimate;
}

absl::StatusOr<double> CostModelPrior::PredictSeconds(
    const forge::v1::KernelTask& task, const codegen::GeneratedKernel& kernel) const {
  if (codegen::IsAtenFallback(kernel)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prior ranks search-space points; the ATen fallback of task ", task.digest(),
        " is the baseline, not one of them"));
  }
  const double flops = static_cast<double>(task.flops());
  const double bytes = static_cast<double>(task.min_bytes());
  if (IsGemmLibraryCall(kernel)) {
    const int launches = kernel.kernel_name.empty() ? 1 : 2;
    FORGE_ASSIGN_OR_RETURN(const emulated::LibraryPrediction prediction,
                           emulated::PredictLibraryTime(gpu_, flops, bytes,
                                                        MathModeOf(task, true), launches));
    return prediction.seconds;
  }
  const EstimatedKernel estimate = Estimate(task, kernel);
  const emulated::KernelResources resources{
      .registers_per_thread = estimate.registers_per_thread,
      .dynamic_shared_bytes = kernel.launch.dynamic_shared_bytes};
  const emulated::KernelWork work{
      .flops = flops,
      .bytes_moved = bytes,
      .bytes_in_flight_per_thread =
          estimate.elements_in_flight_per_thread * InputBytesPerIndex(task),
      .math_mode = MathModeOf(task, false)};
  FORGE_ASSIGN_OR_RETURN(const emulated::KernelPrediction prediction,
                         emulated::PredictKernelTime(gpu_, kernel.launch, resources, work));
  return prediction.seconds;
}

}  // namespace forge::search
