#include "client/forge/predict.h"

#include <algorithm>
#include <cmath>
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
#include "compiler/cost/learned/transfer.h"
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
  std::string predicted_by;  // "analytic" or "learned vN"
  std::string explanation;   // with --explain: what drove the prediction
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

std::string FamilyName(forge::v1::KernelFamily family) {
  return std::string(absl::StripPrefix(forge::v1::KernelFamily_Name(family), "KERNEL_FAMILY_"));
}

// What drove a prediction: the learned model's largest contributions as factors on the time, or
// the analytic model's own account.
std::string Explanation(const PredictOptions& options, const GpuArch& gpu, const KernelTask& task,
                        const codegen::GeneratedKernel& kernel,
                        const emulated::EmulatedResult& predicted) {
  if (predicted.prediction.source != cost::PredictionSource::kLearned ||
      options.learned == nullptr) {
    return absl::StrCat("analytic model: ", predicted.explanation);
  }
  const absl::StatusOr<cost::LearnedModel::Contributions> contributions =
      options.learned->Explain({.gpu = &gpu,
                                .task = &task,
                                .plan = &kernel,
                                .resources = predicted.resources,
                                .analytic_seconds = predicted.prediction.analytic_seconds});
  if (!contributions.ok()) {
    return absl::StrCat("learned model: no contributions (", contributions.status().message(),
                        ")");
  }
  constexpr size_t kShown = 6;
  std::vector<std::string> parts;
  for (size_t i = 0; i < std::min(kShown, contributions->features.size()); ++i) {
    parts.push_back(absl::StrFormat("%s x%.3g", contributions->features[i].first,
                                    std::exp(contributions->features[i].second)));
  }
  const bool ratio =
      options.learned->model() != nullptr &&
      options.learned->model()->model.target() == cost::Target::kLogRatioToAnalytic;
  return absl::StrFormat(
      "%s: analytic %.3f us; %s x%.3g, then by feature (SHAP, largest first): %s",
      cost::PredictedBy(predicted.prediction), predicted.prediction.analytic_seconds * 1e6,
      ratio ? "the model's base ratio" : "the model's base time (us) e^bias",
      ratio ? std::exp(contributions->bias) : std::exp(contributions->bias) * 1e6,
      parts.empty() ? "none" : absl::StrJoin(parts, ", "));
}

// With --transfer-from: the GPU whose learned model predicts, and its backend.
struct TransferSource {
  GpuArch gpu;
  const emulated::EmulatedBackend* backend = nullptr;
};

// The learned model's prediction of `kernel` on the transfer source, carried to `gpu` by the
// ceilings' ratio (cost/learned/transfer.h) into `row`; false when the learned model does not
// serve the candidate there (the caller keeps the target's analytic prediction).
absl::StatusOr<bool> TransferLearned(const KernelTask& task, const codegen::GeneratedKernel& kernel,
                                     const GpuArch& gpu, const TransferSource& source,
                                     const PredictOptions& options, CandidateRow& row) {
  FORGE_ASSIGN_OR_RETURN(const emulated::EmulatedResult on_source,
                         source.backend->Predict(task, kernel, source.gpu.name, ""));
  if (!on_source.result.has_measurement() ||
      on_source.prediction.source != cost::PredictionSource::kLearned) {
    return false;
  }
  FORGE_ASSIGN_OR_RETURN(const cost::Transfer transfer,
                         cost::TransferSeconds(on_source.prediction.seconds, task, source.gpu,
                                               gpu));
  forge::v1::Measurement& measurement = *row.measurement;
  const double micros = transfer.seconds * 1e6;
  measurement.set_median_us(micros);
  measurement.set_min_us(micros);
  measurement.set_max_us(micros);
  measurement.set_percent_of_floor(measurement.roofline_floor_us() / micros * 100);
  row.predicted_by = absl::StrFormat("%s on %s x%.3g (%s)", cost::PredictedBy(on_source.prediction),
                                     source.gpu.name, transfer.ratio,
                                     cost::BottleneckName(transfer.bottleneck));
  if (options.explain) {
    row.explanation = absl::StrCat(
        "transferred from ", source.gpu.name, " by the ratio of the arch table's ",
        cost::BottleneckName(transfer.bottleneck), " ceilings; there: ",
        Explanation(options, source.gpu, task, kernel, on_source));
  }
  return true;
}

absl::StatusOr<std::vector<CandidateRow>> PredictDefaults(
    const KernelTask& task, const emulated::EmulatedBackend& backend, const GpuArch& gpu,
    const PredictOptions& options, const std::optional<TransferSource>& transfer) {
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
        row.predicted_by = cost::PredictedBy(predicted.prediction);
        bool transferred = false;
        if (transfer.has_value()) {
          FORGE_ASSIGN_OR_RETURN(transferred,
                                 TransferLearned(task, *kernel, gpu, *transfer, options, row));
        }
        if (options.explain && !transferred) {
          row.explanation = Explanation(options, gpu, task, *kernel, predicted);
        }
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

// The performance model in use and its measured error on held-back results, per task family.
std::string ModelText(const PredictOptions& options) {
  const std::shared_ptr<const cost::VersionedModel> model =
      options.learned != nullptr ? options.learned->model() : nullptr;
  if (model == nullptr) {
    return absl::StrCat(
        "\nPerformance model: analytic (worker/emulated)",
        options.learned != nullptr ? absl::StrCat("; ", options.learned_origin,
                                                  " has no learned model for this GPU")
                                   : "; --learned fetches the coordinator's learned model",
        ". Its error: no measured error here (benchmarks/results has the H200 comparisons).\n");
  }
  std::string out = absl::StrFormat(
      "\nPerformance model: learned v%d (%s; %d rows over %d tasks, target %s) over the analytic "
      "one; a row says which predicted it (the learned model serves task families it saw %d "
      "rows of).\n",
      model->version, options.learned_origin, model->model.training_rows(),
      model->model.training_groups(), cost::TargetName(model->model.target()),
      cost::kMinFamilyRows);
  if (!options.transfer_from.empty()) {
    const absl::StatusOr<GpuArch> source = FindGpu(options.transfer_from);
    const std::string source_name = source.ok() ? source->name : options.transfer_from;
    absl::StrAppendFormat(
        &out,
        "TRANSFERRED: the learned rows were predicted on %s and carried to this GPU by the ratio "
        "of the arch table's ceilings on each candidate's bottleneck (DRAM, FFMA, tensor core; "
        "launch-bound: unchanged). Expected error on this GPU: no measured error (no transfer "
        "check between two measured GPU kinds exists). The errors below are %s's.\n",
        source_name, source_name);
  }
  const forge::v1::CostModelEvaluation& held_out = model->held_out;
  if (held_out.errors().empty()) {
    absl::StrAppend(&out, "Measured error: no measured error (the version was stored without a "
                          "held-out evaluation).\n");
    return out;
  }
  absl::StrAppendFormat(&out, "Measured error on results held back from training (%s; %d rows):\n",
                        held_out.method(), held_out.test_rows());
  absl::StrAppendFormat(&out, "  %-11s  %5s  %5s  %-8s  %10s  %9s  %8s  %15s\n", "family", "rows",
                        "tasks", "source", "median err", "mean err", "Spearman",
                        "analytic median");
  for (const forge::v1::CostModelError& error : held_out.errors()) {
    absl::StrAppendFormat(
        &out, "  %-11s  %5d  %5d  %-8s  %9.1f%%  %8.1f%%  %8s  %14.1f%%\n",
        error.family() == forge::v1::KERNEL_FAMILY_UNSPECIFIED ? "all" : FamilyName(error.family()),
        error.rows(), error.tasks(), error.source(), error.median_percent_error(),
        error.mean_percent_error(),
        error.has_spearman() ? absl::StrFormat("%.2f", error.spearman()) : "-",
        error.analytic_median_percent_error());
  }
  return out;
}

std::string ModelJson(const PredictOptions& options) {
  const std::shared_ptr<const cost::VersionedModel> model =
      options.learned != nullptr ? options.learned->model() : nullptr;
  if (model == nullptr) return "{\"source\": \"analytic\", \"held_out\": null}";
  std::vector<std::string> errors;
  for (const forge::v1::CostModelError& error : model->held_out.errors()) {
    errors.push_back(absl::StrCat(
        "{\"family\": ",
        JsonString(error.family() == forge::v1::KERNEL_FAMILY_UNSPECIFIED
                       ? "all"
                       : FamilyName(error.family())),
        ", \"rows\": ", error.rows(), ", \"tasks\": ", error.tasks(),
        ", \"source\": ", JsonString(error.source()),
        ", \"median_percent_error\": ", absl::StrFormat("%.4g", error.median_percent_error()),
        ", \"mean_percent_error\": ", absl::StrFormat("%.4g", error.mean_percent_error()),
        ", \"spearman\": ",
        error.has_spearman() ? absl::StrFormat("%.4g", error.spearman()) : "null",
        ", \"analytic_median_percent_error\": ",
        absl::StrFormat("%.4g", error.analytic_median_percent_error()), "}"));
  }
  return absl::StrCat(
      "{\"source\": \"learned\", \"version\": ", model->version, ", \"transferred_from\": ",
      options.transfer_from.empty() ? std::string("null") : JsonString(options.transfer_from),
      ", \"transferred_error\": ",
      options.transfer_from.empty() ? "null" : "\"no measured error\"",
      ", \"origin\": ", JsonString(options.learned_origin),
      ", \"training_rows\": ", model->model.training_rows(),
      ", \"training_tasks\": ", model->model.training_groups(), ", \"held_out\": ",
      model->held_out.errors().empty()
          ? std::string("null")
          : absl::StrCat("{\"method\": ", JsonString(model->held_out.method()),
                         ", \"errors\": [", absl::StrJoin(errors, ", "), "]}"),
      "}");
}

std::string RenderText(const GpuArch& gpu, const std::vector<TaskRows>& tasks,
                       const PredictOptions& options) {
  std::string out = absl::StrFormat(
      "PREDICTED kernel times on %s (no GPU was used; emulated backend: NVRTC for %s + "
      "performance model), default schedule point of each template\n",
      gpu.name, gpu.arch);
  absl::StrAppendFormat(&out, "%-12s  %-9s  %-9s  %-38s  %-28s  %9s  %9s  %7s  %-9s  %3s  %s\n",
                        "task", "family", "kind", "family/template", "ops", "pred us",
                        "floor us", "% floor", "regs/spill", "occ", "model");
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
          &out, "%-12s  %-9s  %-9s  %-38s  %-28s  %9.3f  %9.3f  %6.1f%%  %-9s  %3d  %s\n",
          task.short_digest, task.family, "PREDICTED", row.family_template, task.ops,
          row.measurement->median_us(), task.floor_us, row.measurement->percent_of_floor(),
          Resources(*row.measurement), task.task->occurrences(), row.predicted_by);
      if (!row.explanation.empty()) absl::StrAppend(&out, "    why: ", row.explanation, "\n");
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
  absl::StrAppend(&out, ModelText(options));
  return out;
}

std::string RenderJson(const GpuArch& gpu, const std::vector<TaskRows>& tasks,
                       const PredictOptions& options) {
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
          ", \"resources\": ", resources, ", \"predicted_by\": ", JsonString(row.predicted_by),
          row.explanation.empty() ? ""
                                  : absl::StrCat(", \"explain\": ", JsonString(row.explanation)),
          "}"));
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
      ",\n  \"kind\": \"predicted\",\n  \"backend\": \"emulated\",\n  \"model\": ",
      ModelJson(options), ",\n  \"tasks\": [\n",
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
  // Transferring: the target's own predictions are the analytic model's; the learned model
  // predicts on the source GPU.
  const emulated::EmulatedBackend backend(
      pool.get(), options.transfer_from.empty() ? options.learned : nullptr);
  const emulated::EmulatedBackend source_backend(pool.get(), options.learned);
  std::optional<TransferSource> transfer;
  if (!options.transfer_from.empty()) {
    FORGE_ASSIGN_OR_RETURN(const GpuArch source, FindGpu(options.transfer_from));
    transfer = TransferSource{.gpu = source, .backend = &source_backend};
  }

  std::vector<TaskRows> tasks;
  for (const KernelTask& task : partition.tasks) {
    FORGE_ASSIGN_OR_RETURN(const Roofline floor,
                           RooflineFloor(gpu, static_cast<double>(task.flops()),
                                         static_cast<double>(task.min_bytes()),
                                         graph::FloorMathMode(task)));
    TaskRows rows{.task = &task,
                  .short_digest = task.digest().substr(0, 12),
                  .family = FamilyName(task.family()),
                  .ops = OpSummary(task.group()),
                  .floor_us = floor.seconds * 1e6,
                  .candidates = {},
                  .best_us = std::nullopt};
    FORGE_ASSIGN_OR_RETURN(rows.candidates, PredictDefaults(task, backend, gpu, options, transfer));
    for (const CandidateRow& row : rows.candidates) {
      if (!row.measurement.has_value()) continue;
      const double us = row.measurement->median_us();
      if (!rows.best_us.has_value() || us < *rows.best_us) rows.best_us = us;
    }
    tasks.push_back(std::move(rows));
  }
  return options.json ? RenderJson(gpu, tasks, options) : RenderText(gpu, tasks, options);
}

}  // namespace forge::client
