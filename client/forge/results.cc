#include "client/forge/results.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "client/forge/inspect.h"
#include "compiler/graph/cost.h"
#include "client/forge/model.h"
#include "client/forge/plot.h"
#include "client/forge/png.h"
#include "client/forge/proto_json.h"
#include "client/forge/task_label.h"
#include "common/arch/arch.h"
#include "common/dtype/dtype.h"
#include "common/speedup/speedup.h"
#include "common/status/status_macros.h"
#include "common/text/json.h"
#include "common/version/version.h"
#include "compiler/codegen/aten_fallback/aten_fallback.h"
#include "compiler/codegen/cudnn_conv/cudnn_conv.h"
#include "compiler/codegen/gemm_library/gemm_library.h"
#include "compiler/codegen/sdpa_library/sdpa_library.h"
#include "compiler/graph/partition.h"
#include "compiler/search/candidate.h"
#include "compiler/graph/task_digest.h"
#include "worker/compile/nvcc.h"

namespace forge::client {
namespace {

namespace fs = std::filesystem;

using ::forge::v1::GetResultsResponse;
using ::forge::v1::KernelTask;
using ::forge::v1::Measurement;
using ::forge::v1::TaskResults;

constexpr char kKernelFile[] = "kernel.cu";
constexpr char kCandidateFile[] = "candidate.json";

std::string KindName(bool predicted) { return predicted ? "PREDICTED" : "MEASURED"; }

// A JSON number; null for NaN and infinities, which JSON lacks.
std::string JsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  return absl::StrFormat("%.6g", value);
}

std::string JsonStrings(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const std::string& item : items) quoted.push_back(JsonString(item));
  return absl::StrCat("[", absl::StrJoin(quoted, ", "), "]");
}

std::string FamilyName(forge::v1::KernelFamily family) {
  return std::string(absl::StripPrefix(forge::v1::KernelFamily_Name(family), "KERNEL_FAMILY_"));
}

std::string StageName(forge::v1::FailureStage stage) {
  return absl::AsciiStrToLower(
      absl::StripPrefix(forge::v1::FailureStage_Name(stage), "FAILURE_STAGE_"));
}

std::string StopReasonName(forge::v1::TaskStopReason reason) {
  return absl::AsciiStrToLower(
      absl::StripPrefix(forge::v1::TaskStopReason_Name(reason), "TASK_STOP_REASON_"));
}

// How a task's winner runs.
enum class Implementation { kNone, kKernel, kHostLaunched, kLibrary, kAten, kSdpa, kCudnnConv };

// Where a bundle keeps the host-launch ABI header, as an include directory.
constexpr char kIncludeDirectory[] = "include";
// The CUDA source of the kernels a cudnn_conv winner's run launches around its graph
// (codegen::RunKernelsSource: the kernel prelude, batch_norm_fold.cuh, transpose.cuh), written
// when a step needs them: the runtime compiles the very source the worker compiled.
constexpr char kCudnnRunKernelsFile[] = "cudnn_conv_kernels.cuh";

std::string ImplementationName(Implementation implementation) {
  switch (implementation) {
    case Implementation::kKernel:
      return "kernel";
    case Implementation::kHostLaunched:
      return "host_launched";
    case Implementation::kLibrary:
      return "library";
    case Implementation::kAten:
      return "aten";
    case Implementation::kSdpa:
      return "sdpa";
    case Implementation::kCudnnConv:
      return "cudnn_conv";
    case Implementation::kNone:
      break;
  }
  return "none";
}

// A task's winner, regenerated from its Candidate.
struct Winner {
  Implementation implementation = Implementation::kNone;
  std::optional<codegen::GeneratedKernel> kernel;
  std::string generate_error;  // why `kernel` is missing
  std::string library_call;    // kLibrary: the cuBLASLt call
  // kLibrary: the cuBLASLt algorithm the call's algo index chose where it was measured; empty
  // for predicted times and older results.
  std::string library_algorithm;
  // Why the plan runs this step otherwise than its winner (empty when it runs the winner).
  std::string plan_note;
  // An sdpa_library winner: the SDPA backend ("flash", "efficient", "cudnn", "math").
  std::string sdpa_backend;
  // kSdpa: the group the winner ran (codegen::AtenExecutedTask: one scaled_dot_product_attention
  // node with the backend's attribute, the views that lay out Q, K and V, the epilogue).
  std::optional<forge::v1::Graph> sdpa_group;
  // kCudnnConv: the fused graph as JSON (codegen::CudnnConvCallJson), and whether its run
  // launches kernels around the graph (batch norm folds, channels-last copies).
  std::string cudnn_conv;
  bool cudnn_run_kernels = false;
};

Winner Regenerate(const TaskResults& results) {
  Winner winner;
  if (!results.has_best_candidate() || !results.has_best()) return winner;
  const forge::v1::Candidate& candidate = results.best_candidate();
  const std::string& template_name = candidate.template_name();
  if (template_name == codegen::AtenFallbackFamily::kTemplateName) {
    winner.implementation = Implementation::kAten;
  } else if (codegen::IsSdpaLibraryTemplate(template_name)) {
    // One of ATen's SDPA backends (sdpa_library): the step runs the group the worker ran, one
    // scaled_dot_product_attention call with that backend (runtime/README.md), and the task's
    // own nodes ("calls") where the backend refuses at run time.
    winner.sdpa_backend = std::string(codegen::SdpaBackendOf(template_name));
    absl::StatusOr<forge::v1::KernelTask> executed =
        codegen::AtenExecutedTask(results.task(), search::PointOf(candidate));
    if (executed.ok()) {
      winner.implementation = Implementation::kSdpa;
      winner.sdpa_group = executed->group();
    } else {
      winner.implementation = Implementation::kAten;
      winner.plan_note = absl::StrCat("the winner is ATen's ", winner.sdpa_backend,
                                      " attention backend, whose call this client cannot rebuild (",
                                      executed.status().message(),
                                      "): this step runs the task's nodes through ATen");
    }
  } else if (template_name == codegen::GemmLibraryFamily::kCublasLtTemplate ||
             template_name == codegen::GemmLibraryFamily::kCublasLtThenPointwiseTemplate) {
    winner.implementation = Implementation::kLibrary;
    absl::StatusOr<codegen::GemmLibraryCandidate> library =
        codegen::DescribeGemmLibrary(results.task(), search::PointOf(candidate));
    if (library.ok()) winner.library_call = codegen::DescribeCall(library->gemm);
    winner.library_algorithm = results.best().library_algorithm();
  } else {
    winner.implementation = Implementation::kKernel;
  }
  absl::StatusOr<codegen::GeneratedKernel> kernel =
      search::GenerateCandidate(results.task(), candidate);
  if (kernel.ok()) {
    winner.kernel = *std::move(kernel);
  } else {
    winner.generate_error = kernel.status().ToString();
  }
  // A host-launched winner (CUTLASS): the runtime builds its translation unit with nvcc and
  // calls its entry points; a cuDNN fused graph (cudnn_conv) it builds through the worker's
  // header from the call (runtime/README.md).
  if (winner.kernel.has_value() &&
      winner.kernel->hints.executor == codegen::Executor::kHostLaunched) {
    winner.implementation = Implementation::kHostLaunched;
  } else if (winner.kernel.has_value() &&
             winner.kernel->hints.executor == codegen::Executor::kCudnn) {
    absl::StatusOr<codegen::CudnnConvCall> call =
        codegen::DescribeCudnnConv(results.task(), search::PointOf(candidate));
    if (call.ok()) {
      // The runtime's op replays every call (runtime/extension/cudnn_conv_step.h): the batch
      // norm folds and channels-last copies with the kernels the worker ran around the graph,
      // which the bundle carries (kCudnnRunKernelsFile).
      winner.implementation = Implementation::kCudnnConv;
      winner.cudnn_conv = codegen::CudnnConvCallJson(*call, results.best().library_algorithm());
      winner.cudnn_run_kernels = !call->batch_norms.empty() || call->channels_last_inside;
    } else {
      winner.implementation = Implementation::kAten;
      winner.plan_note = absl::StrCat("the winner (", candidate.template_name(),
                                      ") is a cuDNN fused graph whose call this client cannot "
                                      "rebuild (", call.status().message(),
                                      "): this step runs its nodes through ATen");
    }
  }
  return winner;
}

// One task's row of the report.
struct TaskSummary {
  const TaskResults* results = nullptr;
  std::string name;  // its directory under tasks/
  std::string ops;
  std::string label;  // its name on the plots: ops, a short digest where two tasks share them
  bool has_winner = false;
  bool predicted = false;
  double eager_us = 0;
  double forge_us = 0;
  double floor_us = 0;
  double percent_of_floor = 0;
  double speedup_vs_eager = 0;
  std::optional<double> torch_compile_us;
  std::string hint;
  // The winner's own prediction and measurement, where the results hold both.
  std::optional<double> predicted_us;
  std::optional<double> measured_us;
};

// Directory names: 12 hex digits, or every digest whole when two share that prefix.
std::vector<std::string> TaskNames(const GetResultsResponse& results) {
  std::set<std::string> prefixes;
  for (const TaskResults& task : results.tasks()) {
    prefixes.insert(task.task().digest().substr(0, 12));
  }
  const bool unique = prefixes.size() == static_cast<size_t>(results.tasks_size());
  std::vector<std::string> names;
  for (const TaskResults& task : results.tasks()) {
    names.push_back(unique ? task.task().digest().substr(0, 12) : task.task().digest());
  }
  return names;
}

TaskSummary Summarize(const TaskResults& results, const GpuArch& gpu, std::string name) {
  TaskSummary summary;
  summary.results = &results;
  summary.name = std::move(name);
  summary.ops = OpSummary(results.task().group());
  if (!results.has_best()) return summary;
  const Measurement& best = results.best();
  summary.has_winner = true;
  summary.predicted = best.kind() == forge::v1::MEASUREMENT_KIND_PREDICTED;
  summary.eager_us = best.eager_median_us();
  summary.forge_us = best.median_us();
  summary.floor_us = best.roofline_floor_us();
  summary.percent_of_floor = best.percent_of_floor();
  summary.speedup_vs_eager = best.median_us() > 0 ? best.eager_median_us() / best.median_us() : 0;
  if (best.has_torch_compile_median_us()) summary.torch_compile_us = best.torch_compile_median_us();
  summary.hint = BottleneckHint(gpu, results.task(), best.median_us());
  for (const forge::v1::Result& result : results.results()) {
    if (!result.has_measurement() ||
        result.measurement().candidate_digest() != best.candidate_digest()) {
      continue;
    }
    std::optional<double>& slot =
        result.measurement().kind() == forge::v1::MEASUREMENT_KIND_PREDICTED ? summary.predicted_us
                                                                             : summary.measured_us;
    slot =
        std::min(slot.value_or(result.measurement().median_us()), result.measurement().median_us());
  }
  return summary;
}

// The GPU whose ceilings explain the times: the one the measurements name, if known.
absl::StatusOr<GpuArch> CeilingsGpu(const GetResultsResponse& results,
                                    const ResultsOptions& options) {
  for (const TaskResults& task : results.tasks()) {
    if (!task.has_best() || task.best().device_name().empty()) continue;
    absl::StatusOr<GpuArch> gpu = FindGpu(absl::StripPrefix(task.best().device_name(), "NVIDIA "));
    if (gpu.ok()) return gpu;
  }
  return FindGpu(options.gpu);
}

struct Totals {
  double eager_us = 0;
  double forge_us = 0;
  double floor_us = 0;
  int timed = 0;      // tasks with a winner
  int predicted = 0;  // of those, predicted
  int untimed = 0;    // tasks without one: no eager time known either

  std::string Kind() const {
    if (timed == 0) return "NONE (no task has a result yet)";
    if (predicted == 0) return "MEASURED";
    return predicted == timed ? "PREDICTED" : "MIXED (PREDICTED and MEASURED)";
  }
};

// Eager and Forge sums as the job's best_speedup states them (common/speedup), plus the floor.
Totals Sum(const std::vector<TaskSummary>& summaries) {
  Totals totals;
  ModelTimes times;
  for (const TaskSummary& summary : summaries) {
    AddTask(*summary.results, times);
    if (!summary.has_winner) continue;
    const int occurrences = std::max(summary.results->task().occurrences(), 1);
    totals.floor_us += occurrences * summary.floor_us;
    if (summary.predicted) ++totals.predicted;
  }
  totals.eager_us = times.eager_us;
  totals.forge_us = times.best_us;
  totals.timed = times.timed;
  totals.untimed = times.untimed;
  return totals;
}

std::string ModelName(const GetResultsResponse& results) {
  const auto& labels = results.job().options().labels();
  const auto model = labels.find("model");
  return model == labels.end() ? "" : model->second;
}

std::string RenderMarkdown(const GetResultsResponse& results, const GpuArch& gpu,
                           const std::vector<TaskSummary>& summaries, const Totals& totals,
                           absl::string_view plan_note) {
  const forge::v1::Job& job = results.job();
  std::string md =
      absl::StrCat("# Forge results: job ", job.id(),
                   ModelName(results).empty() ? "" : " (model " + ModelName(results) + ")", "\n\n");
  absl::StrAppend(
      &md, "- state: ", absl::StripPrefix(forge::v1::JobState_Name(job.state()), "JOB_STATE_"),
      "\n- target arch: ", job.options().target_arch().empty() ? "-" : job.options().target_arch(),
      "\n- model digest: `", job.model_digest(), "`",
      "\n- ceilings for bottlenecks and the roofline: ", gpu.name, "\n");
  if (totals.predicted > 0) {
    absl::StrAppend(&md, "\n**", totals.predicted, " of ", totals.timed,
                    " task times are PREDICTED** by the emulated backend's performance model (no "
                    "GPU ran them); they are marked PREDICTED everywhere and are not "
                    "measurements.\n");
  }

  absl::StrAppend(&md,
                  "\n## End to end\n\nSum over task occurrences of the kernel times (launch "
                  "gaps and CUDA-graph effects not included)");
  if (totals.untimed > 0) {
    absl::StrAppend(&md, "; ", totals.untimed, " task(s) without a result are left out");
  }
  absl::StrAppend(&md,
                  ".\n\n| tasks timed | eager us | forge us | floor us | speedup over eager | "
                  "% of floor | kind |\n|---|---|---|---|---|---|---|\n");
  if (totals.timed == 0) {
    absl::StrAppendFormat(&md, "| 0 of %d | - | - | - | - | - | %s |\n", totals.untimed,
                          totals.Kind());
  } else {
    absl::StrAppendFormat(&md, "| %d of %d | %.3f | %.3f | %.3f | %.2fx | %.0f%% | %s |\n",
                          totals.timed, totals.timed + totals.untimed, totals.eager_us,
                          totals.forge_us, totals.floor_us, totals.eager_us / totals.forge_us,
                          totals.floor_us / totals.forge_us * 100, totals.Kind());
  }

  absl::StrAppend(&md,
                  "\n## Tasks\n\nMost baseline time first; # numbers the bars of "
                  "speedup.png and the points of roofline.png.\n\n"
                  "| # | task | family | ops | occ | eager us | forge us | floor us | "
                  "x eager | x torch.compile | % floor | bottleneck | kind | implementation | "
                  "measured / failed | stop |\n"
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < summaries.size(); ++i) {
    const TaskSummary& s = summaries[i];
    const TaskResults& r = *s.results;
    const std::string counts = absl::StrCat(r.candidates_measured(), " / ", r.candidates_failed());
    if (!s.has_winner) {
      absl::StrAppendFormat(&md,
                            "| %d | `%s` | %s | %s | %d | - | - | - | - | - | - | - | - | "
                            "%s | %s | %s |\n",
                            i + 1, s.name, FamilyName(r.task().family()), s.ops,
                            r.task().occurrences(),
                            r.stop_reason() == forge::v1::TASK_STOP_REASON_UNSPECIFIED
                                ? "no result yet"
                                : "ATen calls (no candidate passed)",
                            counts, StopReasonName(r.stop_reason()));
      continue;
    }
    absl::StrAppendFormat(
        &md,
        "| %d | `%s` | %s | %s | %d | %.3f | %.3f | %.3f | %.2fx | %s | %.0f%% | %s | %s | %s | "
        "%s | %s |\n",
        i + 1, s.name, FamilyName(r.task().family()), s.ops, r.task().occurrences(), s.eager_us,
        s.forge_us, s.floor_us, s.speedup_vs_eager,
        s.torch_compile_us.has_value() ? absl::StrFormat("%.2fx", *s.torch_compile_us / s.forge_us)
                                       : "-",
        s.percent_of_floor, s.hint.empty() ? "-" : s.hint, KindName(s.predicted),
        r.best_candidate().template_name(), counts, StopReasonName(r.stop_reason()));
  }

  // What the partitioner left to ATen, and why (its notes on each ATen task).
  std::string why_aten;
  for (size_t i = 0; i < summaries.size(); ++i) {
    for (const std::string& note : summaries[i].results->task().notes()) {
      absl::StrAppend(&why_aten, "- #", i + 1, " `", summaries[i].name, "`: ", note, "\n");
    }
  }
  if (!why_aten.empty()) {
    absl::StrAppend(&md, "\n## What runs through ATen, and why\n\n", why_aten);
  }

  absl::StrAppend(&md, "\n## Predicted vs measured\n\n");
  bool compared = false;
  for (const TaskSummary& s : summaries) {
    if (!s.predicted_us.has_value() || !s.measured_us.has_value()) continue;
    if (!compared) {
      absl::StrAppend(&md,
                      "The winners that were both PREDICTED (emulated backend) and MEASURED "
                      "(GPU):\n\n| task | PREDICTED us | MEASURED us | predicted / measured "
                      "|\n|---|---|---|---|\n");
      compared = true;
    }
    absl::StrAppendFormat(&md, "| `%s` | %.3f | %.3f | %.2f |\n", s.name, *s.predicted_us,
                          *s.measured_us, *s.predicted_us / *s.measured_us);
  }
  if (!compared) {
    const bool every_result_fetched =
        std::any_of(results.tasks().begin(), results.tasks().end(),
                    [](const TaskResults& task) { return task.results_size() > 0; });
    absl::StrAppend(&md, "No winner has both a prediction and a measurement in these results",
                    every_result_fetched
                        ? ""
                        : " (only the best ones were fetched; `forge results --all` fetches every "
                          "result)",
                    ".\n");
  }

  absl::StrAppend(&md, "\n## Failures by stage\n\n");
  bool any_failures = false;
  for (const TaskSummary& s : summaries) {
    std::vector<std::string> stages;
    for (const forge::v1::FailureCount& failure : s.results->failures_by_stage()) {
      stages.push_back(absl::StrCat(StageName(failure.stage()), " ", failure.count()));
    }
    if (stages.empty()) continue;
    any_failures = true;
    absl::StrAppend(&md, "- `", s.name, "`: ", absl::StrJoin(stages, ", "), "\n");
  }
  if (!any_failures) absl::StrAppend(&md, "None.\n");

  absl::StrAppend(&md, "\n## Files\n\n- report.json: this report as data\n");
  absl::StrAppend(&md, plan_note.empty() ? "- plan.json: the model as kernel, library and ATen "
                                           "calls over named buffers\n"
                                         : absl::StrCat("- ", plan_note, "\n"));
  absl::StrAppend(&md,
                  "- tasks/<task>/kernel.cu and candidate.json: each winner's source "
                  "(regenerated from its candidate), schedule, launch, measurement and judge "
                  "evidence\n\n![speedup over eager](speedup.png)\n\n"
                  "![roofline](roofline.png)\n");
  return md;
}

std::string RenderJson(const GetResultsResponse& results, const GpuArch& gpu,
                       const std::vector<TaskSummary>& summaries,
                       const std::vector<Winner>& winners, const Totals& totals) {
  const forge::v1::Job& job = results.job();
  std::vector<std::string> tasks;
  for (size_t i = 0; i < summaries.size(); ++i) {
    const TaskSummary& s = summaries[i];
    const TaskResults& r = *s.results;
    std::vector<std::string> failures;
    for (const forge::v1::FailureCount& failure : r.failures_by_stage()) {
      failures.push_back(
          absl::StrCat(JsonString(StageName(failure.stage())), ": ", failure.count()));
    }
    std::string entry = absl::StrCat(
        "    {\"number\": ", i + 1, ", \"digest\": ", JsonString(r.task().digest()),
        ", \"directory\": ", JsonString(absl::StrCat("tasks/", s.name)),
        ", \"family\": ", JsonString(FamilyName(r.task().family())),
        ", \"ops\": ", JsonString(s.ops), ", \"occurrences\": ", r.task().occurrences(),
        ", \"flops\": ", r.task().flops(), ", \"min_bytes\": ", r.task().min_bytes(),
        ", \"stop_reason\": ", JsonString(StopReasonName(r.stop_reason())),
        ", \"candidates_measured\": ", r.candidates_measured(),
        ", \"candidates_failed\": ", r.candidates_failed(), ", \"failures_by_stage\": {",
        absl::StrJoin(failures, ", "), "}");
    if (s.has_winner) {
      absl::StrAppend(
          &entry, ", \"winner\": {\"candidate\": ", JsonString(r.best_candidate().digest()),
          ", \"template\": ", JsonString(r.best_candidate().template_name()),
          ", \"implementation\": ", JsonString(ImplementationName(winners[i].implementation)),
          ", \"kind\": ", JsonString(KindName(s.predicted)),
          ", \"device\": ", JsonString(r.best().device_name()),
          ", \"eager_us\": ", JsonNumber(s.eager_us), ", \"forge_us\": ", JsonNumber(s.forge_us),
          ", \"floor_us\": ", JsonNumber(s.floor_us), ", \"torch_compile_us\": ",
          s.torch_compile_us.has_value() ? JsonNumber(*s.torch_compile_us) : "null",
          ", \"speedup_vs_eager\": ", JsonNumber(s.speedup_vs_eager),
          ", \"speedup_vs_torch_compile\": ",
          s.torch_compile_us.has_value() ? JsonNumber(*s.torch_compile_us / s.forge_us) : "null",
          ", \"percent_of_floor\": ", JsonNumber(s.percent_of_floor),
          ", \"bottleneck\": ", JsonString(s.hint),
          ", \"predicted_us\": ", s.predicted_us.has_value() ? JsonNumber(*s.predicted_us) : "null",
          ", \"measured_us\": ", s.measured_us.has_value() ? JsonNumber(*s.measured_us) : "null",
          "}");
    } else {
      absl::StrAppend(&entry, ", \"winner\": null");
    }
    tasks.push_back(absl::StrCat(entry, "}"));
  }
  return absl::StrCat(
      "{\n  \"version\": ", JsonString(FullVersion()), ",\n  \"job\": {\"id\": ",
      JsonString(job.id()), ", \"state\": ",
      JsonString(absl::StripPrefix(forge::v1::JobState_Name(job.state()), "JOB_STATE_")),
      ", \"model\": ", JsonString(ModelName(results)),
      ", \"model_digest\": ", JsonString(job.model_digest()),
      ", \"target_arch\": ", JsonString(job.options().target_arch()), "},\n",
      "  \"ceilings_gpu\": ", JsonString(gpu.name), ",\n",
      "  \"end_to_end\": {\"eager_us\": ", JsonNumber(totals.eager_us),
      ", \"forge_us\": ", JsonNumber(totals.forge_us),
      ", \"floor_us\": ", JsonNumber(totals.floor_us), ", \"speedup_vs_eager\": ",
      totals.forge_us > 0 ? JsonNumber(totals.eager_us / totals.forge_us) : "null",
      ", \"percent_of_floor\": ",
      totals.forge_us > 0 ? JsonNumber(totals.floor_us / totals.forge_us * 100) : "null",
      ", \"kind\": ", JsonString(totals.Kind()), ", \"tasks_timed\": ", totals.timed,
      ", \"tasks_predicted\": ", totals.predicted, ", \"tasks_without_result\": ", totals.untimed,
      ", \"what\": ", JsonString("sum over task occurrences of kernel times"), "},\n",
      "  \"tasks\": [\n", absl::StrJoin(tasks, ",\n"), "\n  ]\n}\n");
}

std::string LaunchJson(const codegen::LaunchDims& launch) {
  return absl::StrCat("{\"grid\": [", absl::StrJoin(launch.grid, ", "), "], \"block\": [",
                      absl::StrJoin(launch.block, ", "),
                      "], \"dynamic_shared_bytes\": ", launch.dynamic_shared_bytes, "}");
}

std::string CandidateJson(const TaskResults& results, const Winner& winner, bool predicted) {
  const forge::v1::Candidate& candidate = results.best_candidate();
  const std::map<std::string, int64_t> parameters(candidate.parameters().begin(),
                                                  candidate.parameters().end());
  std::vector<std::string> parameter_entries;
  for (const auto& [name, value] : parameters) {
    parameter_entries.push_back(absl::StrCat(JsonString(name), ": ", value));
  }
  Measurement measurement = results.best();
  const forge::v1::JudgeEvidence judge = measurement.judge();
  measurement.clear_judge();
  std::string json = absl::StrCat(
      "{\n  \"task\": ", JsonString(results.task().digest()),
      ",\n  \"kind\": ", JsonString(KindName(predicted)),
      ",\n  \"implementation\": ", JsonString(ImplementationName(winner.implementation)),
      ",\n  \"candidate\": ", ProtoJson(candidate, /*pretty=*/false),
      ",\n  \"schedule\": {\"template\": ", JsonString(candidate.template_name()),
      ", \"parameters\": {", absl::StrJoin(parameter_entries, ", "), "}}");
  if (winner.kernel.has_value()) {
    absl::StrAppend(
        &json, ",\n  \"kernel_name\": ", JsonString(winner.kernel->kernel_name),
        ",\n  \"launch\": ", LaunchJson(winner.kernel->launch),
        ",\n  \"generator_version\": ", JsonString(winner.kernel->generator_version),
        ",\n  \"source_file\": ", winner.kernel->source.empty() ? "null" : JsonString(kKernelFile));
  } else {
    absl::StrAppend(&json, ",\n  \"source_file\": null,\n  \"source_error\": ",
                    JsonString(winner.generate_error));
  }
  if (!winner.library_call.empty()) {
    absl::StrAppend(&json, ",\n  \"library_call\": ", JsonString(winner.library_call));
  }
  if (!winner.library_algorithm.empty()) {
    absl::StrAppend(&json, ",\n  \"library_algorithm\": ", JsonString(winner.library_algorithm));
  }
  absl::StrAppend(&json, ",\n  \"measurement\": ", ProtoJson(measurement, /*pretty=*/false),
                  ",\n  \"judge\": ", ProtoJson(judge, /*pretty=*/false), "\n}\n");
  return json;
}

absl::Status WriteFile(const fs::path& path, absl::string_view contents) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  file.close();
  if (!file) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

std::vector<Winner> RegenerateAll(const GetResultsResponse& results) {
  std::vector<Winner> winners;
  for (const TaskResults& task : results.tasks()) winners.push_back(Regenerate(task));
  return winners;
}

std::vector<TaskSummary> SummarizeAll(const GetResultsResponse& results, const GpuArch& gpu) {
  const std::vector<std::string> names = TaskNames(results);
  std::vector<const KernelTask*> tasks;
  for (const TaskResults& task : results.tasks()) tasks.push_back(&task.task());
  const std::vector<std::string> labels = TaskLabels(tasks);
  std::vector<TaskSummary> summaries;
  for (int i = 0; i < results.tasks_size(); ++i) {
    summaries.push_back(Summarize(results.tasks(i), gpu, names[i]));
    summaries.back().label = labels[i];
  }
  return summaries;
}

absl::StatusOr<Image> SpeedupPlot(const std::vector<TaskSummary>& summaries,
                                  absl::string_view title) {
  std::vector<SpeedupBar> bars;
  for (size_t i = 0; i < summaries.size(); ++i) {
    if (!summaries[i].has_winner) continue;
    bars.push_back({.label = absl::StrCat("#", i + 1, " ", summaries[i].label),
                    .speedup = summaries[i].speedup_vs_eager,
                    .predicted = summaries[i].predicted});
  }
  return SpeedupChart(bars, title);
}

absl::StatusOr<Image> RooflinePlot(const std::vector<TaskSummary>& summaries,
                                   const GpuArch& gpu, absl::string_view title) {
  std::vector<RooflinePoint> points;
  std::set<MathMode> modes;
  for (size_t i = 0; i < summaries.size(); ++i) {
    const TaskSummary& s = summaries[i];
    const KernelTask& task = s.results->task();
    if (!s.has_winner || task.flops() <= 0 || task.min_bytes() <= 0 || s.forge_us <= 0) continue;
    modes.insert(graph::FloorMathMode(task));
    points.push_back({.label = absl::StrCat("#", i + 1),
                      .key = absl::StrCat("#", i + 1, " ", s.label),
                      .intensity = static_cast<double>(task.flops()) / task.min_bytes(),
                      .flops_per_second = task.flops() / (s.forge_us * 1e-6),
                      .predicted = s.predicted});
  }
  if (modes.empty()) modes.insert(MathMode::kFp32);
  std::vector<ComputeCeiling> ceilings;
  for (MathMode mode : modes) {
    ceilings.push_back({.label = absl::StrFormat("%s %.0f TFLOP/s", MathModeName(mode),
                                                 gpu.PeakFlops(mode) / 1e12),
                        .flops_per_second = gpu.PeakFlops(mode)});
  }
  return RooflineChart(gpu.dram_bytes_per_second, ceilings, points, title);
}

// The role of each graph input by value name.
std::map<std::string, const forge::v1::GraphInput*> InputsByValue(const forge::v1::Graph& model) {
  std::map<std::string, const forge::v1::GraphInput*> inputs;
  for (const forge::v1::GraphInput& input : model.inputs()) inputs[input.value_name()] = &input;
  return inputs;
}

std::string InputRole(forge::v1::InputKind kind) {
  switch (kind) {
    case forge::v1::INPUT_KIND_USER_INPUT:
      return "input";
    case forge::v1::INPUT_KIND_PARAMETER:
      return "parameter";
    case forge::v1::INPUT_KIND_BUFFER:
      return "buffer";
    default:
      return "constant";
  }
}

}  // namespace

absl::StatusOr<ResultsReport> RenderResultsReport(const GetResultsResponse& results,
                                                  const ResultsOptions& options,
                                                  absl::string_view plan_note) {
  FORGE_ASSIGN_OR_RETURN(const GpuArch gpu, CeilingsGpu(results, options));
  const std::vector<TaskSummary> summaries = SummarizeAll(results, gpu);
  const std::vector<Winner> winners = RegenerateAll(results);
  const Totals totals = Sum(summaries);
  return ResultsReport{.markdown = RenderMarkdown(results, gpu, summaries, totals, plan_note),
                       .json = RenderJson(results, gpu, summaries, winners, totals)};
}

absl::StatusOr<std::string> RenderPlan(const GetResultsResponse& results,
                                       const forge::v1::Graph& model) {
  const forge::v1::Job& job = results.job();
  if (!job.model_digest().empty() && graph::ModelDigest(model) != job.model_digest()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model given (digest ", graph::ModelDigest(model), ") is not the one job ",
                     job.id(), " was submitted with (", job.model_digest(), ")"));
  }
  FORGE_ASSIGN_OR_RETURN(const graph::PartitionResult partition, graph::Partition(model));
  const std::vector<std::string> names = TaskNames(results);
  const std::vector<Winner> winners = RegenerateAll(results);
  std::map<std::string, int> task_by_digest;
  for (int i = 0; i < results.tasks_size(); ++i) {
    task_by_digest[results.tasks(i).task().digest()] = i;
  }
  std::map<std::string, const forge::v1::Node*> nodes;
  for (const forge::v1::Node& node : model.nodes()) nodes[node.name()] = &node;

  std::vector<std::string> steps;
  std::vector<std::string> buffer_order;  // graph inputs first, then in step order
  std::set<std::string> listed;
  auto list_buffer = [&](const std::string& name) {
    if (listed.insert(name).second) buffer_order.push_back(name);
  };
  for (const forge::v1::GraphInput& input : model.inputs()) list_buffer(input.value_name());

  for (size_t s = 0; s < partition.instances.size(); ++s) {
    const graph::TaskInstance& instance = partition.instances[s];
    const auto found = task_by_digest.find(instance.task_digest);
    if (found == task_by_digest.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "task ", instance.task_digest, " of the model's partition is not among job ", job.id(),
          "'s tasks: this client partitions the model differently from the coordinator"));
    }
    const TaskResults& task = results.tasks(found->second);
    const Winner& winner = winners[found->second];
    for (const std::string& value : instance.input_values) list_buffer(value);
    for (const std::string& value : instance.output_values) list_buffer(value);
    std::string step =
        absl::StrCat("    {\"step\": ", s, ", \"task\": ", JsonString(instance.task_digest),
                     ", \"implementation\": ",
                     JsonString(ImplementationName(winner.implementation == Implementation::kNone
                                                       ? Implementation::kAten
                                                       : winner.implementation)),
                     ", \"nodes\": ", JsonStrings(instance.node_names),
                     ", \"inputs\": ", JsonStrings(instance.input_values),
                     ", \"outputs\": ", JsonStrings(instance.output_values));
    if (winner.implementation == Implementation::kNone ||
        winner.implementation == Implementation::kAten ||
        winner.implementation == Implementation::kSdpa ||
        winner.implementation == Implementation::kCudnnConv) {
      std::vector<std::string> calls;
      for (const std::string& node_name : instance.node_names) {
        const forge::v1::Node& node = *nodes.at(node_name);
        calls.push_back(absl::StrCat("{\"node\": ", JsonString(node.name()),
                                     ", \"op\": ", JsonString(node.op()),
                                     ", \"overload\": ", JsonString(node.overload()), "}"));
      }
      absl::StrAppend(&step, ", \"calls\": [", absl::StrJoin(calls, ", "), "]");
    }
    if (winner.implementation != Implementation::kNone) {
      absl::StrAppend(&step, ", \"candidate\": ", JsonString(task.best_candidate().digest()));
    }
    if (!winner.library_call.empty()) {
      absl::StrAppend(&step, ", \"library_call\": ", JsonString(winner.library_call));
    }
    if (!winner.library_algorithm.empty()) {
      absl::StrAppend(&step, ", \"library_algorithm\": ", JsonString(winner.library_algorithm));
    }
    if (!winner.plan_note.empty()) {
      absl::StrAppend(&step, ", \"note\": ", JsonString(winner.plan_note));
    }
    if (!winner.sdpa_backend.empty()) {
      absl::StrAppend(&step, ", \"sdpa_backend\": ", JsonString(winner.sdpa_backend));
    }
    if (!winner.cudnn_conv.empty()) {
      absl::StrAppend(&step, ", \"cudnn_conv\": ", winner.cudnn_conv);
    }
    if (winner.cudnn_run_kernels) {
      absl::StrAppend(&step, ", \"run_kernels\": ", JsonString(kCudnnRunKernelsFile));
    }
    if (winner.sdpa_group.has_value()) {
      absl::StrAppend(&step, ", \"sdpa_group\": ", ProtoJson(*winner.sdpa_group, false));
    }
    if (winner.kernel.has_value() && !winner.kernel->source.empty() &&
        winner.implementation != Implementation::kAten &&
        winner.implementation != Implementation::kCudnnConv) {
      absl::StrAppend(&step, ", \"kernel_name\": ", JsonString(winner.kernel->kernel_name),
                      ", \"source\": ",
                      JsonString(absl::StrCat("tasks/", names[found->second], "/", kKernelFile)));
      if (winner.implementation == Implementation::kHostLaunched) {
        absl::StrAppend(
            &step, ", \"nvcc_flags\": ",
            JsonStrings(compile::NvccFlags(job.options().target_arch())),
            ", \"compile_options\": ", JsonStrings(winner.kernel->compile_options),
            ", \"runtime_args\": [", absl::StrJoin(winner.kernel->runtime_args, ", "), "]",
            ", \"include\": ", JsonString(kIncludeDirectory));
      } else {
        absl::StrAppend(&step, ", \"launch\": ", LaunchJson(winner.kernel->launch));
      }
    }
    if (!winner.generate_error.empty()) {
      absl::StrAppend(&step, ", \"source_error\": ", JsonString(winner.generate_error));
    }
    steps.push_back(absl::StrCat(step, "}"));
  }

  std::map<std::string, const forge::v1::TensorSpec*> specs;
  for (const forge::v1::Value& value : model.values()) specs[value.name()] = &value.tensor();
  const auto inputs = InputsByValue(model);
  std::set<std::string> outputs;
  std::vector<std::string> output_names;
  for (const forge::v1::GraphOutput& output : model.outputs()) {
    outputs.insert(output.value_name());
    output_names.push_back(output.value_name());
  }
  std::vector<std::string> buffers;
  for (const std::string& name : buffer_order) {
    std::string buffer = absl::StrCat("    {\"name\": ", JsonString(name));
    if (auto spec = specs.find(name); spec != specs.end()) {
      absl::StrAppend(&buffer, ", \"dtype\": ", JsonString(DTypeName(spec->second->dtype())),
                      ", \"shape\": [", absl::StrJoin(spec->second->shape(), ", "), "]");
    }
    if (auto input = inputs.find(name); input != inputs.end()) {
      absl::StrAppend(&buffer, ", \"role\": ", JsonString(InputRole(input->second->kind())));
      const forge::v1::TensorData& data = input->second->data();
      if (!data.sha256().empty()) {
        absl::StrAppend(&buffer, ", \"sha256\": ", JsonString(data.sha256()),
                        ", \"inline\": ", data.inline_bytes().empty() ? "false" : "true");
      }
    } else {
      absl::StrAppend(&buffer, ", \"role\": \"intermediate\"");
    }
    absl::StrAppend(&buffer, ", \"output\": ", outputs.contains(name) ? "true" : "false", "}");
    buffers.push_back(std::move(buffer));
  }
  return absl::StrCat("{\n  \"format\": \"forge.plan.v1\",\n  \"job\": ", JsonString(job.id()),
                      ",\n  \"model\": ", JsonString(model.metadata().name()),
                      ",\n  \"model_digest\": ", JsonString(graph::ModelDigest(model)),
                      ",\n  \"target_arch\": ", JsonString(job.options().target_arch()),
                      ",\n  \"outputs\": ", JsonStrings(output_names), ",\n  \"buffers\": [\n",
                      absl::StrJoin(buffers, ",\n"), "\n  ],\n  \"steps\": [\n",
                      absl::StrJoin(steps, ",\n"), "\n  ]\n}\n");
}

absl::StatusOr<std::vector<std::string>> WriteResultsBundle(const GetResultsResponse& results,
                                                            const forge::v1::Graph* model,
                                                            const ResultsOptions& options,
                                                            absl::string_view directory) {
  FORGE_ASSIGN_OR_RETURN(const GpuArch gpu, CeilingsGpu(results, options));
  // The plan first: a model that is not the job's stops the bundle before any file is written.
  std::optional<std::string> plan;
  if (model != nullptr) {
    FORGE_ASSIGN_OR_RETURN(plan, RenderPlan(results, *model));
  }
  const fs::path root{std::string(directory)};
  std::error_code error;
  fs::create_directories(root / "tasks", error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", (root / "tasks").string(), ": ", error.message()));
  }
  std::vector<std::string> written;
  auto write = [&](const std::string& relative, absl::string_view contents) -> absl::Status {
    FORGE_RETURN_IF_ERROR(WriteFile(root / relative, contents));
    written.push_back(relative);
    return absl::OkStatus();
  };

  const std::vector<TaskSummary> summaries = SummarizeAll(results, gpu);
  const std::vector<Winner> winners = RegenerateAll(results);
  for (size_t i = 0; i < summaries.size(); ++i) {
    if (!summaries[i].has_winner) continue;
    const std::string task_directory = absl::StrCat("tasks/", summaries[i].name);
    fs::create_directories(root / task_directory, error);
    if (error) {
      return absl::InternalError(
          absl::StrCat("cannot create ", (root / task_directory).string(), ": ", error.message()));
    }
    if (winners[i].kernel.has_value() && !winners[i].kernel->source.empty()) {
      FORGE_RETURN_IF_ERROR(
          write(absl::StrCat(task_directory, "/", kKernelFile), winners[i].kernel->source));
    }
    FORGE_RETURN_IF_ERROR(
        write(absl::StrCat(task_directory, "/", kCandidateFile),
              CandidateJson(*summaries[i].results, winners[i], summaries[i].predicted)));
  }

  const bool host_launched =
      std::any_of(winners.begin(), winners.end(), [](const Winner& winner) {
        return winner.implementation == Implementation::kHostLaunched;
      });
  if (host_launched) {
    const fs::path header = fs::path(kIncludeDirectory) / compile::kHostLaunchAbiHeaderPath;
    fs::create_directories(root / header.parent_path(), error);
    if (error) {
      return absl::InternalError(absl::StrCat("cannot create ",
                                              (root / header.parent_path()).string(), ": ",
                                              error.message()));
    }
    FORGE_RETURN_IF_ERROR(write(header.string(), compile::kHostLaunchAbiHeader));
  }

  if (std::any_of(winners.begin(), winners.end(),
                  [](const Winner& winner) { return winner.cudnn_run_kernels; })) {
    FORGE_RETURN_IF_ERROR(
        write(kCudnnRunKernelsFile, std::string(codegen::RunKernelsSource())));
  }

  std::string plan_note;
  if (plan.has_value()) {
    FORGE_RETURN_IF_ERROR(write("plan.json", *plan));
  } else {
    plan_note =
        "plan.json: not written; it needs the job's model graph, which GetResults does not "
        "return: run `forge results JOB -o DIR --model PATH` with the submitted model";
  }
  const Totals totals = Sum(summaries);
  FORGE_RETURN_IF_ERROR(
      write("report.md", RenderMarkdown(results, gpu, summaries, totals, plan_note)));
  FORGE_RETURN_IF_ERROR(write("report.json", RenderJson(results, gpu, summaries, winners, totals)));

  const std::string title_suffix = totals.predicted > 0 ? " (PREDICTED times included)" : "";
  const std::string job_title = absl::StrCat(
      "Job ", results.job().id(),
      ModelName(results).empty() ? "" : absl::StrCat(" (", ModelName(results), ")"));
  FORGE_ASSIGN_OR_RETURN(
      const Image speedup,
      SpeedupPlot(summaries, absl::StrCat(job_title, ": speedup over eager", title_suffix)));
  FORGE_RETURN_IF_ERROR(WritePng(speedup, (root / "speedup.png").string()));
  written.push_back("speedup.png");
  FORGE_ASSIGN_OR_RETURN(
      const Image roofline,
      RooflinePlot(summaries, gpu,
                   absl::StrCat(job_title, ": roofline on ", gpu.name, title_suffix)));
  FORGE_RETURN_IF_ERROR(WritePng(roofline, (root / "roofline.png").string()));
  written.push_back("roofline.png");
  return written;
}

}  // namespace forge::client
