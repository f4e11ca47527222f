#include "worker/emulated/emulated_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/dtype/dtype.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/family.h"
#include "compiler/cost/plan_prediction.h"
#include "compiler/graph/cost.h"

namespace forge::emulated {
namespace {

constexpr std::size_t kMaxFailureLogBytes = 64 * 1024;  // task.proto: Failure.log

std::string LastBytes(const std::string& text) {
  return text.size() <= kMaxFailureLogBytes ? text : text.substr(text.size() - kMaxFailureLogBytes);
}

EmulatedResult CompileFailure(absl::string_view candidate_digest, forge::v1::FailureReason reason,
                              std::string detail, const std::string& log) {
  EmulatedResult outcome;
  forge::v1::Failure* failure = outcome.result.mutable_failure();
  failure->set_candidate_digest(std::string(candidate_digest));
  failure->set_stage(forge::v1::FAILURE_STAGE_COMPILE);
  failure->set_reason(reason);
  failure->set_detail(detail);
  failure->set_log(LastBytes(log));
  outcome.explanation = std::move(detail);
  return outcome;
}

forge::v1::Measurement* StartMeasurement(EmulatedResult& outcome, const GpuArch& gpu,
                                         absl::string_view candidate_digest,
                                         const cost::CostPrediction& prediction,
                                         double floor_seconds) {
  const double seconds = prediction.seconds;
  outcome.prediction = prediction;
  forge::v1::Measurement* measurement = outcome.result.mutable_measurement();
  measurement->set_candidate_digest(std::string(candidate_digest));
  measurement->set_kind(forge::v1::MEASUREMENT_KIND_PREDICTED);
  const double micros = seconds * 1e6;
  measurement->set_median_us(micros);
  measurement->set_min_us(micros);
  measurement->set_max_us(micros);
  measurement->set_roofline_floor_us(floor_seconds * 1e6);
  measurement->set_percent_of_floor(floor_seconds / seconds * 100);
  measurement->set_device_name(absl::StrCat(gpu.name, " (predicted)"));
  return measurement;
}

}  // namespace

cost::CostPrediction EmulatedBackend::Refine(
    const GpuArch& gpu, const forge::v1::KernelTask& task, const codegen::LaunchPlan& plan,
    const std::optional<cost::KernelResources>& resources, const cost::PlanPrediction& analytic,
    std::string& explanation) const {
  cost::CostPrediction analytic_only{.seconds = analytic.seconds,
                                     .analytic_seconds = analytic.seconds};
  if (learned_ == nullptr) return analytic_only;
  const absl::StatusOr<cost::CostPrediction> prediction =
      learned_->Predict({.gpu = &gpu, .task = &task, .plan = &plan, .resources = resources,
                         .analytic_seconds = analytic.seconds});
  if (!prediction.ok() || prediction->source != cost::PredictionSource::kLearned) {
    return analytic_only;
  }
  explanation = absl::StrCat("learned model v", prediction->model_version, " (analytic ",
                             absl::SixDigits(analytic.seconds * 1e6), " us: ", explanation, ")");
  return *prediction;
}

absl::StatusOr<EmulatedResult> EmulatedBackend::Predict(const forge::v1::KernelTask& task,
                                                        const codegen::GeneratedKernel& kernel,
                                                        absl::string_view gpu_name,
                                                        absl::string_view candidate_digest) const {
  FORGE_ASSIGN_OR_RETURN(const GpuArch gpu, FindGpu(gpu_name));
  const MathMode mode = graph::FloorMathMode(task);
  FORGE_ASSIGN_OR_RETURN(const Roofline floor,
                         RooflineFloor(gpu, static_cast<double>(task.flops()),
                                       static_cast<double>(task.min_bytes()), mode));
  EmulatedResult outcome;

  if (kernel.hints.executor != codegen::Executor::kGeneratedKernel) {
    // A tiled GEMM from its hints, any other library-like call from the roofline.
    FORGE_ASSIGN_OR_RETURN(const cost::PlanPrediction prediction,
                           cost::PredictPlan(gpu, task, kernel, std::nullopt));
    std::string explanation = prediction.explanation;
    const cost::CostPrediction refined = Refine(gpu, task, kernel, std::nullopt, prediction, explanation);
    forge::v1::Measurement* measurement =
        StartMeasurement(outcome, gpu, candidate_digest, refined, floor.seconds);
    measurement->mutable_metrics()->set_counters_available(false);
    measurement->mutable_metrics()->set_resources_available(false);
    outcome.explanation = std::move(explanation);
    return outcome;
  }

  std::optional<compile::CompileRequest> request = compile::CompileRequestFor(kernel, gpu.arch);
  if (!request.has_value()) {
    return CompileFailure(candidate_digest, forge::v1::FAILURE_REASON_INTERNAL,
                          absl::StrCat("the generated kernel of template '", kernel.template_name,
                                       "' names no kernel to compile"),
                          "");
  }
  const compile::CompileResult compiled = pool_->Compile(*std::move(request));
  if (!compiled.ok()) {
    return CompileFailure(candidate_digest, forge::v1::FAILURE_REASON_COMPILE_ERROR,
                          absl::StrCat("compile for ", gpu.arch, " (", gpu.name,
                                       "): ", compiled.status.message()),
                          compiled.log);
  }
  const auto lowered = compiled.lowered_names.find(kernel.kernel_name);
  const compile::PtxasFunctionReport* report =
      compiled.ptxas.Find(lowered == compiled.lowered_names.end() ? kernel.kernel_name
                                                                  : lowered->second);
  if (report == nullptr) {
    return CompileFailure(candidate_digest, forge::v1::FAILURE_REASON_INTERNAL,
                          absl::StrCat("ptxas reported nothing for kernel '", kernel.kernel_name,
                                       "' compiled for ", gpu.arch),
                          compiled.log);
  }
  cost::KernelResources resources{.registers_per_thread = report->registers,
                            .static_shared_bytes = report->shared_memory_bytes,
                            .dynamic_shared_bytes = kernel.launch.dynamic_shared_bytes,
                            .spill_store_bytes = report->spill_store_bytes,
                            .spill_load_bytes = report->spill_load_bytes};
  const std::int64_t threads_per_block = std::int64_t{kernel.launch.block[0]} *
                                         kernel.launch.block[1] * kernel.launch.block[2];
  absl::StatusOr<cost::Occupancy> occupancy =
      cost::ComputeOccupancy(gpu, threads_per_block, resources);
  if (absl::IsResourceExhausted(occupancy.status())) {
    return CompileFailure(candidate_digest, forge::v1::FAILURE_REASON_RESOURCE_LIMIT,
                          std::string(occupancy.status().message()), compiled.log);
  }
  if (!occupancy.ok()) return occupancy.status();
  FORGE_ASSIGN_OR_RETURN(const cost::PlanPrediction prediction,
                         cost::PredictPlan(gpu, task, kernel, resources));
  std::string explanation = prediction.explanation;
  const cost::CostPrediction refined = Refine(gpu, task, kernel, resources, prediction, explanation);

  forge::v1::Measurement* measurement =
      StartMeasurement(outcome, gpu, candidate_digest, refined, floor.seconds);
  forge::v1::KernelMetrics* metrics = measurement->mutable_metrics();
  metrics->set_counters_available(false);
  metrics->set_resources_available(true);
  metrics->set_registers_per_thread(report->registers);
  metrics->set_shared_memory_bytes(
      static_cast<int32_t>(report->shared_memory_bytes + kernel.launch.dynamic_shared_bytes));
  metrics->set_spill_store_bytes(static_cast<int32_t>(report->spill_store_bytes));
  metrics->set_spill_load_bytes(static_cast<int32_t>(report->spill_load_bytes));
  outcome.explanation = std::move(explanation);
  outcome.resources = resources;
  return outcome;
}

}  // namespace forge::emulated
