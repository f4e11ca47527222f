#include "client/forge/predict.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "client/forge/inspect.h"
#include "common/arch/arch.h"
#include "common/status/status_macros.h"
#include "common/text/json.h"
#include "common/version/version.h"
#include "compiler/codegen/family.h"
#include "compiler/graph/cost.h"
#include "compiler/graph/partition.h"
#include "worker/compile/compile_pool.h"
#include "worker/emulated/emulated_backend.h"

namespace forge::client {
namespace {

using ::forge::v1::KernelTask;

// One default-point candidate of a task: a prediction or why there is none.
struct CandidateRow {
  std::string family_template;  // "reduction/row_reduce"
  std::optional<forge::v1::Measurement> measurement;
  std::string failure;  // set when there is no measurement
  // The family's Validate refused its own default point for this task (e.g. an SDPA backend that
  // cannot run these shapes): not a failure, the template does not serve the task.
  bool declined = false;
};

struct TaskRows {
  const KernelTask* task;
  std::string short_digest;
  std::string family;  // "GEMM"
  std::string ops;
  double floor_us = 0;
  std::vector<CandidateRow> candidates;  // empty: only ATen runs the task
  std::optional<double> best_us;
};

absl::StatusOr<std::vector<CandidateRow>> PredictDefaults(
    const KernelTask& task, const emulated::EmulatedBackend& backend, const GpuArch& gpu) {
  std::vector<CandidateRow> rows;
  for (const codegen::KernelFamily* family : codegen::ApplicableFamilies(task)) {
    if (family->kind() == forge::v1::KERNEL_FAMILY_ATEN) continue;
    FORGE_ASSIGN_OR_RETURN(const std::vector<codegen::TemplateSpace> spaces,
                           family->ScheduleSpace(task));
    for (const codegen::TemplateSpace& space : spaces) {
      CandidateRow row;
      row.family_template = absl::StrCat(family->name(), "/", space.template_name);
      if (absl::Status valid = family->Validate(task, codegen::DefaultPoint(space)); !valid.ok()) {
        row.failure = std::string(valid.message());
        row.declined = true;
        rows.push_back(std::move(row));
        continue;
      }
      absl::StatusOr<codegen::GeneratedKernel> kernel =
          family->Generate(task, codegen::DefaultPoint(space));
      if (!kernel.ok()) {
        row.failure = absl::StrCat("generate: ", kernel.status().message());
        rows.push_back(std::move(row));
        continue;
      }
      // Default points are not candidates of a search, so they carry no candidate digest.
      FORGE_ASSIGN_OR_RETURN(emulated::EmulatedResult predicted,
                             backend.Predict(task, *kernel, gpu.name, /*candidate_digest=*/""));
      if (predicted.result.has_measurement()) {
        row.measurement = predicted.result.measurement();
      } else {
        row.failure = predicted.result.failure().detail();
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::string Resources(const forge::v1::Measurement& measurement) {
  const forge::v1::KernelMetrics& metrics = measurement.metrics();
  if (!metrics.resources_available()) return "library";
  return absl::StrCat(metrics.registers_per_thread(), "/",
                      metrics.spill_store_bytes() + metrics.spill_load_bytes());
}

struct Totals {
  int predicted_occurrences = 0;
  int aten_occurrences = 0;
  double best_us = 0;
  double floor_us = 0;
};

Totals Sum(const std::vector<TaskRows>& tasks) {
  Totals totals;
  for (const TaskRows& task : tasks) {
    const int occurrences = task.task->occurrences();
    if (!task.best_us.has_value()) {
      totals.aten_occurrences += occurrences;
      continue;
    }
    totals.predicted_occurrences += occurrences;
    totals.best_us += *task.best_us * occurrences;
    totals.floor_us += task.floor_us * occurrences;
  }
  return totals;
}

std::string RenderText(const GpuArch& gpu, const std::vector<TaskRows>& tasks) {
  std::string out = absl::StrFormat(
      "PREDICTED kernel times on %s (no GPU was used; emulated backend: NVRTC for %s + "
      "performance model), default schedule point of each template\n",
      gpu.name, gpu.arch);
  absl::StrAppendFormat(&out, "%-12s  %-9s  %-9s  %-38s  %-28s  %9s  %9s  %7s  %-9s  %3s\n",
                        "task", "family", "kind", "family/template", "ops", "pred us",
                        "floor us", "% floor", "regs/spill", "occ");
  for (const TaskRows& task : tasks) {
    if (task.candidates.empty()) {
      absl::StrAppendFormat(&out, "%-12s  %-9s  %-9s  %-38s  %-28s  %9s  %9.3f  %7s  %-9s  %3d\n",
                            task.short_digest, task.family, "-", "ATen (not predicted)",
                            task.ops, "-", task.floor_us, "-", "-", task.task->occurrences());
      continue;
    }
    for (const CandidateRow& row : task.candidates) {
      if (!row.measurement.has_value()) {
        absl::StrAppendFormat(&out, "%-12s  %-9s  %-9s  %-38s  %-28s  %s: %s\n",
                              task.short_digest, task.family, row.declined ? "declined" : "failed",
                              row.family_template, task.ops,
                              row.declined ? "DECLINED" : "FAILED", row.failure);
        continue;
      }
      absl::StrAppendFormat(
          &out, "%-12s  %-9s  %-9s  %-38s  %-28s  %9.3f  %9.3f  %6.1f%%  %-9s  %3d\n",
          task.short_digest, task.family, "PREDICTED", row.family_template, task.ops,
          row.measurement->median_us(), task.floor_us, row.measurement->percent_of_floor(),
          Resources(*row.measurement), task.task->occurrences());
    }
  }
  const Totals totals = Sum(tasks);
  absl::StrAppendFormat(
      &out,
      "\nPREDICTED total on %s over %d task occurrences: best default kernels %.3f us, roofline "
      "floor %.3f us (%.1f%% of floor)\n",
      gpu.name, totals.predicted_occurrences, totals.best_us, totals.floor_us,
      totals.best_us > 0 ? totals.floor_us / totals.best_us * 100 : 0.0);
  if (totals.aten_occurrences > 0) {
    absl::StrAppendFormat(&out, "%d task occurrences run through ATen and are not predicted\n",
                          totals.aten_occurrences);
  }
  return out;
}

std::string RenderJson(const GpuArch& gpu, const std::vector<TaskRows>& tasks) {
  std::vector<std::string> task_items;
  for (const TaskRows& task : tasks) {
    std::vector<std::string> candidates;
    for (const CandidateRow& row : task.candidates) {
      if (!row.measurement.has_value()) {
        candidates.push_back(absl::StrCat(
            "{\"template\": ", JsonString(row.family_template), ", \"kind\": ",
            row.declined ? "\"declined\", \"reason\": " : "\"failed\", \"failure\": ",
            JsonString(row.failure), "}"));
        continue;
      }
      const forge::v1::KernelMetrics& metrics = row.measurement->metrics();
      std::string resources = "null";
      if (metrics.resources_available()) {
        resources = absl::StrCat("{\"registers\": ", metrics.registers_per_thread(),
                                 ", \"spill_bytes\": ",
                                 metrics.spill_store_bytes() + metrics.spill_load_bytes(), "}");
      }
      candidates.push_back(absl::StrCat(
          "{\"template\": ", JsonString(row.family_template), ", \"kind\": \"predicted\"",
          ", \"predicted_us\": ", absl::StrFormat("%.6g", row.measurement->median_us()),
          ", \"percent_of_floor\": ", absl::StrFormat("%.4g", row.measurement->percent_of_floor()),
          ", \"resources\": ", resources, "}"));
    }
    task_items.push_back(absl::StrCat(
        "    {\"digest\": ", JsonString(task.task->digest()), ", \"family\": ",
        JsonString(task.family), ", \"ops\": ", JsonString(task.ops),
        ", \"floor_us\": ", absl::StrFormat("%.6g", task.floor_us),
        ", \"occurrences\": ", task.task->occurrences(), ", \"predicted\": ",
        task.candidates.empty() ? "false" : "true", ", \"best_predicted_us\": ",
        task.best_us.has_value() ? absl::StrFormat("%.6g", *task.best_us) : "null",
        ", \"candidates\": [", absl::StrJoin(candidates, ", "), "]}"));
  }
  const Totals totals = Sum(tasks);
  return absl::StrCat(
      "{\n  \"version\": ", JsonString(FullVersion()), ",\n  \"gpu\": ", JsonString(gpu.name),
      ",\n  \"arch\": ", JsonString(gpu.arch),
      ",\n  \"kind\": \"predicted\",\n  \"backend\": \"emulated\",\n  \"tasks\": [\n",
      absl::StrJoin(task_items, ",\n"), "\n  ],\n  \"totals\": {\"predicted_occurrences\": ",
      totals.predicted_occurrences, ", \"aten_occurrences\": ", totals.aten_occurrences,
      ", \"best_predicted_us\": ", absl::StrFormat("%.6g", totals.best_us),
      ", \"floor_us\": ", absl::StrFormat("%.6g", totals.floor_us), "}\n}\n");
}

}  // namespace

absl::StatusOr<std::string> PredictGraph(const forge::v1::Graph& graph,
                                         const PredictOptions& options) {
  FORGE_ASSIGN_OR_RETURN(const GpuArch gpu, FindGpu(options.gpu));
  FORGE_ASSIGN_OR_RETURN(const graph::PartitionResult partition, graph::Partition(graph));
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<compile::CompilePool> pool,
                         compile::CompilePool::Create(compile::CompilePoolOptions{}));
  const emulated::EmulatedBackend backend(pool.get());

  std::vector<TaskRows> tasks;
  for (const KernelTask& task : partition.tasks) {
    FORGE_ASSIGN_OR_RETURN(const Roofline floor,
                           RooflineFloor(gpu, static_cast<double>(task.flops()),
                                         static_cast<double>(task.min_bytes()),
                                         graph::FloorMathMode(task)));
    TaskRows rows{.task = &task,
                  .short_digest = task.digest().substr(0, 12),
                  .family = std::string(absl::StripPrefix(
                      forge::v1::KernelFamily_Name(task.family()), "KERNEL_FAMILY_")),
                  .ops = OpSummary(task.group()),
                  .floor_us = floor.seconds * 1e6,
                  .candidates = {},
                  .best_us = std::nullopt};
    FORGE_ASSIGN_OR_RETURN(rows.candidates, PredictDefaults(task, backend, gpu));
    for (const CandidateRow& row : rows.candidates) {
      if (!row.measurement.has_value()) continue;
      const double us = row.measurement->median_us();
      if (!rows.best_us.has_value() || us < *rows.best_us) rows.best_us = us;
    }
    tasks.push_back(std::move(rows));
  }
  return options.json ? RenderJson(gpu, tasks) : RenderText(gpu, tasks);
}

}  // namespace forge::client
