#include "worker/daemon/gpu_executor.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/status/status_macros.h"
#include "compiler/graph/cost.h"
#include "worker/sandbox/sanitize.h"

namespace forge::daemon {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The ptxas figures that describe the candidate (forge.v1.KernelMetrics.resources_available): a
// generated kernel's own; a host-launched object's when it has exactly one kernel (with several,
// no one kernel's figures describe it). None for cuBLASLt calls, which compile at most their
// epilogue kernel, whose figures would not describe the call, nor for cuDNN graphs or the ATen
// fallback.
const compile::PtxasFunctionReport* DescribingReport(const codegen::GeneratedKernel& kernel,
                                                     const compile::CompileResult& compiled) {
  switch (kernel.hints.executor) {
    case codegen::Executor::kGeneratedKernel: {
      const auto lowered = compiled.lowered_names.find(kernel.kernel_name);
      return compiled.ptxas.Find(
          lowered == compiled.lowered_names.end() ? kernel.kernel_name : lowered->second);
    }
    case codegen::Executor::kHostLaunched: {
      const compile::PtxasFunctionReport* only = nullptr;
      for (const auto& [name, report] : compiled.ptxas.functions) {
        if (!report.is_entry) continue;
        if (only != nullptr) return nullptr;
        only = &report;
      }
      return only;
    }
    case codegen::Executor::kCublasLt:
    case codegen::Executor::kCudnn:
    case codegen::Executor::kAten:
      return nullptr;
  }
  return nullptr;
}

void FillResources(const codegen::GeneratedKernel& kernel,
                   const std::optional<compile::CompileResult>& compiled,
                   forge::v1::KernelMetrics* metrics) {
  metrics->set_counters_available(false);
  if (!compiled.has_value()) return;
  const compile::PtxasFunctionReport* report = DescribingReport(kernel, *compiled);
  if (report == nullptr) return;
  metrics->set_resources_available(true);
  metrics->set_registers_per_thread(report->registers);
  metrics->set_shared_memory_bytes(static_cast<int32_t>(
      report->shared_memory_bytes + kernel.launch.dynamic_shared_bytes));
  metrics->set_spill_store_bytes(static_cast<int32_t>(report->spill_store_bytes));
  metrics->set_spill_load_bytes(static_cast<int32_t>(report->spill_load_bytes));
}

// The result of a sandbox request that gave no outcome: Unavailable stays an error (the
// candidate goes back); anything else is the judge's own failure on this candidate.
absl::StatusOr<forge::v1::Result> SandboxError(const absl::Status& status,
                                               absl::string_view digest,
                                               forge::v1::FailureStage stage) {
  if (absl::IsUnavailable(status)) return status;
  return FailureResult(digest, stage, forge::v1::FAILURE_REASON_INTERNAL, status.ToString());
}

forge::v1::Result OutcomeFailure(forge::v1::Failure failure) {
  forge::v1::Result result;
  *result.mutable_failure() = std::move(failure);
  return result;
}

}  // namespace

absl::StatusOr<std::vector<gpu::DeviceProperties>> DiscoverGpus() {
  FORGE_RETURN_IF_ERROR(gpu::DriverStatus());
  std::vector<gpu::DeviceProperties> gpus;
  // The driver reports at least one device; the first ordinal that does not open ends the list.
  for (int ordinal = 0;; ++ordinal) {
    absl::StatusOr<std::unique_ptr<gpu::Device>> device = gpu::Device::Open(ordinal);
    if (!device.ok()) {
      if (ordinal == 0) return device.status();
      break;
    }
    gpus.push_back((*device)->properties());
  }
  return gpus;
}

absl::StatusOr<GpuArch> TableEntryForDevice(absl::string_view device_name) {
  absl::string_view name = absl::StripPrefix(device_name, "NVIDIA ");
  name = absl::StripPrefix(name, "GeForce ");
  if (absl::StatusOr<GpuArch> entry = FindGpu(name); entry.ok()) return entry;
  // "H100 80GB HBM3": the product without its memory configuration.
  return FindGpu(name.substr(0, name.find(' ')));
}

absl::StatusOr<std::unique_ptr<GpuExecutor>> GpuExecutor::Create(
    const gpu::DeviceProperties& device, GpuExecutorOptions options, compile::CompilePool* pool) {
  FORGE_ASSIGN_OR_RETURN(
      std::unique_ptr<sandbox::Sandbox> sandbox,
      sandbox::Sandbox::Create({.child_path = options.sandbox_child, .gpu_ordinal = device.ordinal}));
  forge::v1::GpuInfo gpu;
  gpu.set_index(device.ordinal);
  gpu.set_name(device.name);
  gpu.set_arch(device.arch());
  gpu.set_memory_bytes(device.total_memory_bytes);
  gpu.set_sm_count(device.sm_count);
  absl::StatusOr<GpuArch> table_entry = TableEntryForDevice(device.name);
  return std::unique_ptr<GpuExecutor>(new GpuExecutor(
      std::move(gpu), pool, std::move(options),
      table_entry.ok() ? std::optional<GpuArch>(*std::move(table_entry)) : std::nullopt,
      std::move(sandbox)));
}

GpuExecutor::GpuExecutor(forge::v1::GpuInfo gpu, compile::CompilePool* pool,
                         GpuExecutorOptions options, std::optional<GpuArch> table_entry,
                         std::unique_ptr<sandbox::Sandbox> sandbox)
    : Executor(std::move(gpu), pool),
      options_(std::move(options)),
      table_entry_(std::move(table_entry)),
      sandbox_(std::move(sandbox)) {}

absl::StatusOr<forge::v1::Result> GpuExecutor::Execute(PreparedCandidate prepared,
                                                       StageTimes* times) {
  const forge::v1::KernelTask& task = *prepared.task;
  sandbox::SandboxCandidate candidate{
      .digest = prepared.digest,
      .task = task,
      .kernel = std::move(prepared.kernel),
      .cubin = prepared.compiled.has_value() ? std::move(prepared.compiled->cubin) : ""};

  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<sandbox::SandboxOutcome> judged = sandbox_->Judge(candidate, options_.judge);
  times->Add(Stage::kJudge, SecondsSince(start));
  if (!judged.ok()) {
    return SandboxError(judged.status(), prepared.digest, forge::v1::FAILURE_STAGE_JUDGE);
  }
  if (judged->verdict.has_value()) {
    const judge::JudgeVerdict::StageSeconds& seconds = judged->verdict->seconds;
    times->set_judge_breakdown(absl::StrFormat(
        "draw=%.3f,upload=%.3f,candidate=%.3f,reference=%.3f,compare=%.3f,draws_on_device=%d",
        seconds.draw, seconds.upload, seconds.candidate, seconds.reference, seconds.compare,
        judged->verdict->draws_on_device));
  }
  if (judged->failure.has_value()) return OutcomeFailure(*std::move(judged->failure));

  // The child judged this candidate last, so Time goes straight to the timed runs.
  start = std::chrono::steady_clock::now();
  absl::StatusOr<sandbox::SandboxOutcome> timed =
      sandbox_->Time(candidate, options_.judge, options_.timer);
  times->Add(Stage::kTime, SecondsSince(start));
  if (!timed.ok()) {
    return SandboxError(timed.status(), prepared.digest, forge::v1::FAILURE_STAGE_TIME);
  }
  if (timed->failure.has_value()) return OutcomeFailure(*std::move(timed->failure));
  if (!timed->timing.has_value() || !timed->verdict.has_value()) {
    return FailureResult(prepared.digest, forge::v1::FAILURE_STAGE_TIME,
                         forge::v1::FAILURE_REASON_INTERNAL,
                         "the sandbox answered a time request without a timing or a verdict");
  }

  forge::v1::Result result;
  forge::v1::Measurement* measurement = result.mutable_measurement();
  measurement->set_candidate_digest(prepared.digest);
  measurement->set_kind(forge::v1::MEASUREMENT_KIND_MEASURED);
  const timer::Summary& summary = timed->timing->summary;
  measurement->set_median_us(summary.median);
  measurement->set_min_us(summary.min);
  measurement->set_max_us(summary.max);
  measurement->set_reps(summary.count);
  measurement->set_spread(summary.spread);
  if (table_entry_.has_value()) {
    absl::StatusOr<Roofline> floor =
        RooflineFloor(*table_entry_, static_cast<double>(task.flops()),
                      static_cast<double>(task.min_bytes()), graph::FloorMathMode(task));
    if (floor.ok()) {
      measurement->set_roofline_floor_us(floor->seconds * 1e6);
      if (summary.median > 0) {
        measurement->set_percent_of_floor(floor->seconds * 1e6 / summary.median * 100);
      }
    }
  }
  // Would it become the task's best? Then compute-sanitizer checks it first.
  double bar = prepared.sanitize_below_us;
  if (const auto sanitized = sanitized_best_us_.find(task.digest());
      sanitized != sanitized_best_us_.end()) {
    bar = std::min(bar, sanitized->second);
  }
  if (summary.median < bar) {
    forge::v1::SanitizerEvidence* evidence = measurement->mutable_sanitizer();
    if (options_.compute_sanitizer.empty()) {
      evidence->set_state(forge::v1::SANITIZER_STATE_UNAVAILABLE);
      evidence->set_detail("not sanitized: this worker has no compute-sanitizer");
    } else {
      start = std::chrono::steady_clock::now();
      absl::StatusOr<sandbox::SanitizeOutcome> sanitized =
          sandbox::Sanitize({.tool_path = options_.compute_sanitizer,
                             .child_path = options_.sandbox_child,
                             .gpu_ordinal = gpu().index()},
                            candidate, options_.judge);
      times->Add(Stage::kSanitize, SecondsSince(start));
      if (!sanitized.ok()) {
        evidence->set_state(forge::v1::SANITIZER_STATE_UNAVAILABLE);
        evidence->set_detail(absl::StrCat("not sanitized: ", sanitized.status().ToString()));
      } else if (sanitized->failure.has_value()) {
        return OutcomeFailure(*std::move(sanitized->failure));
      } else {
        *evidence = std::move(sanitized->evidence);
        if (evidence->state() == forge::v1::SANITIZER_STATE_PASSED) {
          sanitized_best_us_[task.digest()] = summary.median;
        }
      }
    }
  }
  FillResources(candidate.kernel, prepared.compiled, measurement->mutable_metrics());
  *measurement->mutable_judge() = std::move(timed->verdict->evidence);
  measurement->set_device_name(gpu().name());
  measurement->set_library_algorithm(std::move(timed->library_algorithm));
  return result;
}

}  // namespace forge::daemon
