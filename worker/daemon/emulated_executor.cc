#include "worker/daemon/emulated_executor.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/arch/arch.h"
#include "common/status/status_macros.h"

namespace forge::daemon {

absl::StatusOr<std::unique_ptr<EmulatedExecutor>> EmulatedExecutor::Create(
    absl::string_view gpu_name, int index, compile::CompilePool* pool,
    const cost::CostPredictor* learned) {
  FORGE_ASSIGN_OR_RETURN(const GpuArch arch, FindGpu(gpu_name));
  forge::v1::GpuInfo gpu;
  gpu.set_index(index);
  gpu.set_name(arch.name);
  gpu.set_arch(arch.arch);
  gpu.set_sm_count(arch.sm_count);
  gpu.set_emulated(true);
  return std::unique_ptr<EmulatedExecutor>(new EmulatedExecutor(std::move(gpu), pool, learned));
}

absl::StatusOr<forge::v1::Result> EmulatedExecutor::Execute(PreparedCandidate prepared,
                                                            StageTimes* times) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<emulated::EmulatedResult> predicted =
      backend_.Predict(*prepared.task, prepared.kernel, gpu().name(), prepared.digest);
  times->Add(Stage::kPredict,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!predicted.ok()) {
    return FailureResult(prepared.digest, forge::v1::FAILURE_STAGE_TIME,
                         forge::v1::FAILURE_REASON_INTERNAL,
                         absl::StrCat("predict on ", gpu().name(), " (emulated): ",
                                      predicted.status().ToString()));
  }
  return std::move(predicted->result);
}

}  // namespace forge::daemon
