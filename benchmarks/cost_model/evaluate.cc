// Held-out evaluation of the learned performance model against the analytic one on measured GPU
// times (README.md beside this file).
//
//   cost_model_evaluate GPU PROBLEMS_DIR RESULTS.jsonl...
//
// PROBLEMS_DIR holds the problems exported by benchmarks/gpu/problems.py export (full shapes).
// Each RESULTS file is JSON lines of the generator benchmark (benchmarks/gpu): per line a
// "problem", its task "family" and measured "points" ("parameters", "median_us", "nvrtc_log").
// Points measured in several runs become one row, at the median of their medians. For each row
// the task is partitioned from the problem's graph, the candidate's family and template are the
// ones whose parameters the point names (parameters added since, AddedLater, at the value that
// reproduces the older kernels), the plan is the family's Plan, ptxas' figures come from
// the point's compile log, the analytic prediction from cost::PredictPlan.
//
// Two splits, both by whole tasks, so that no task has rows on both sides:
//  - leave one task out: every task predicted by models trained on all the other tasks;
//  - leave one family out (transfer): every family predicted by models trained on the others.
// Printed as markdown: per family the analytic model's and the learned model's (both targets)
// mean and median absolute percentage error over the family's rows, and Spearman's rank
// correlation within each task (what the search ranks), averaged over the family's tasks.
#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "benchmarks/common/measured_inputs.h"
#include "common/arch/arch.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/family.h"
#include "compiler/cost/learned/cost_predictor.h"
#include "compiler/cost/learned/evaluation.h"
#include "compiler/cost/learned/features.h"
#include "compiler/cost/learned/learned_model.h"
#include "compiler/cost/plan_prediction.h"
#include "google/protobuf/struct.pb.h"
#include "worker/compile/ptxas_report.h"

namespace forge::cost {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

// One schedule point of one problem, over every run that measured it.
struct MeasuredPoint {
  std::string problem;
  forge::v1::KernelFamily task_family = forge::v1::KERNEL_FAMILY_UNSPECIFIED;
  std::map<std::string, int64_t> parameters;
  std::vector<double> medians_us;
  std::string nvrtc_log;
};

struct Row {
  std::string task;        // the problem: one task each
  std::string family;      // the candidate's family
  forge::v1::KernelFamily task_family = forge::v1::KERNEL_FAMILY_UNSPECIFIED;
  TrainingRow training;
};

// Every measured point of `paths`, keyed by problem and parameters.
absl::StatusOr<std::vector<MeasuredPoint>> ReadPoints(const std::vector<std::string>& paths) {
  std::map<std::string, MeasuredPoint> points;
  for (const std::string& path : paths) {
    FORGE_ASSIGN_OR_RETURN(const std::vector<Struct> records, benchmarks::ReadRecords(path));
    for (const Struct& record : records) {
      const auto& fields = record.fields();
      if (!fields.contains("problem") || !fields.contains("points") || !fields.contains("family")) {
        continue;
      }
      forge::v1::KernelFamily family;
      if (!forge::v1::KernelFamily_Parse(fields.at("family").string_value(), &family)) continue;
      for (const Value& value : fields.at("points").list_value().values()) {
        const auto& point = value.struct_value().fields();
        if (!point.contains("median_us") || point.at("median_us").number_value() <= 0 ||
            (point.contains("error") && !point.at("error").string_value().empty())) {
          continue;
        }
        MeasuredPoint measured;
        measured.problem = fields.at("problem").string_value();
        measured.task_family = family;
        for (const auto& [name, parameter] : point.at("parameters").struct_value().fields()) {
          measured.parameters[name] = static_cast<int64_t>(parameter.number_value());
        }
        std::vector<std::string> key = {measured.problem};
        for (const auto& [name, parameter] : measured.parameters) {
          key.push_back(absl::StrCat(name, "=", parameter));
        }
        MeasuredPoint& entry = points.try_emplace(absl::StrJoin(key, " "), measured).first->second;
        entry.medians_us.push_back(point.at("median_us").number_value());
        if (entry.nvrtc_log.empty() && point.contains("nvrtc_log")) {
          entry.nvrtc_log = point.at("nvrtc_log").string_value();
        }
      }
    }
  }
  std::vector<MeasuredPoint> out;
  for (auto& [key, point] : points) out.push_back(std::move(point));
  return out;
}

// Parameters templates gained after older runs were measured, with the value that reproduces
// the kernels those runs timed (no register cap, no thread block cluster).
const std::map<std::string, int64_t>& AddedLater() {
  static const auto* const added =
      new std::map<std::string, int64_t>{{"max_registers", 0}, {"cluster_blocks", 1}};
  return *added;
}

// The family and template whose parameters are the point's (plus parameters added later, at
// their old value), with the completed parameters.
struct Match {
  const codegen::KernelFamily* family = nullptr;
  codegen::SchedulePoint point;
};
std::optional<Match> TemplateOf(const forge::v1::KernelTask& task,
                                const std::map<std::string, int64_t>& parameters) {
  for (const codegen::KernelFamily* family : codegen::ApplicableFamilies(task)) {
    const absl::StatusOr<std::vector<codegen::TemplateSpace>> spaces = family->ScheduleSpace(task);
    if (!spaces.ok()) continue;
    for (const codegen::TemplateSpace& space : *spaces) {
      Match match{.family = family, .point = {.template_name = space.template_name,
                                              .parameters = parameters}};
      bool fits = true;
      for (const codegen::ScheduleParameter& parameter : space.parameters) {
        if (match.point.parameters.contains(parameter.name)) continue;
        const auto added = AddedLater().find(parameter.name);
        if (added == AddedLater().end()) {
          fits = false;
          break;
        }
        match.point.parameters[parameter.name] = added->second;
      }
      if (fits && match.point.parameters.size() == space.parameters.size()) return match;
    }
  }
  return std::nullopt;
}

// ptxas' figures of the plan's kernel from the point's compile log.
std::optional<KernelResources> ResourcesOf(const std::string& log, const codegen::LaunchPlan& plan) {
  const compile::PtxasReport report = compile::ParsePtxasReport(log);
  const compile::PtxasFunctionReport* function = report.Find(plan.kernel_name);
  if (function == nullptr && report.functions.size() == 1) {
    function = &report.functions.begin()->second;
  }
  if (function == nullptr) return std::nullopt;
  return KernelResources{.registers_per_thread = function->registers,
                         .static_shared_bytes = function->shared_memory_bytes,
                         .dynamic_shared_bytes = plan.launch.dynamic_shared_bytes,
                         .spill_store_bytes = function->spill_store_bytes,
                         .spill_load_bytes = function->spill_load_bytes};
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// The rows of every point a plan, resources and analytic prediction can be made for; what was
// dropped goes to `skipped` with the reason.
absl::StatusOr<std::vector<Row>> MakeRows(const GpuArch& gpu, const std::string& problems_dir,
                                          const std::vector<MeasuredPoint>& points,
                                          std::map<std::string, int>& skipped) {
  std::map<std::string, forge::v1::KernelTask> tasks;
  std::vector<Row> rows;
  for (const MeasuredPoint& point : points) {
    auto task_it = tasks.find(point.problem);
    if (task_it == tasks.end()) {
      FORGE_ASSIGN_OR_RETURN(
          forge::v1::KernelTask task,
          benchmarks::ProblemTask(problems_dir, point.problem, point.task_family));
      task_it = tasks.emplace(point.problem, std::move(task)).first;
    }
    const forge::v1::KernelTask& task = task_it->second;
    const auto found = TemplateOf(task, point.parameters);
    if (!found.has_value()) {
      ++skipped["no template of this build has the point's parameters"];
      continue;
    }
    const absl::StatusOr<codegen::LaunchPlan> plan = found->family->Plan(task, found->point);
    if (!plan.ok()) {
      ++skipped[absl::StrCat("this build's Plan refuses the point: ", plan.status().code())];
      continue;
    }
    std::optional<KernelResources> resources;
    if (plan->hints.executor == codegen::Executor::kGeneratedKernel) {
      resources = ResourcesOf(point.nvrtc_log, *plan);
      if (!resources.has_value()) {
        ++skipped["no ptxas figures in the point's compile log"];
        continue;
      }
    }
    const absl::StatusOr<PlanPrediction> analytic = PredictPlan(gpu, task, *plan, resources);
    if (!analytic.ok()) {
      ++skipped["no analytic prediction"];
      continue;
    }
    FORGE_ASSIGN_OR_RETURN(std::vector<float> features,
                           ExtractFeatures({.gpu = &gpu, .task = &task, .plan = &*plan,
                                            .resources = resources,
                                            .analytic_seconds = analytic->seconds}));
    rows.push_back(Row{.task = point.problem,
                       .family = std::string(found->family->name()),
                       .task_family = point.task_family,
                       .training = {.features = std::move(features),
                                    .measured_seconds = Median(point.medians_us) * 1e-6,
                                    .analytic_seconds = analytic->seconds,
                                    .group = point.problem}});
  }
  return rows;
}

// Predictions for every row, each by a model trained without the rows of its fold (rows whose
// `fold_of` is equal). With `family_fallback`, as CostPredictor uses the model: the analytic
// prediction for a row of a task family the fold's model saw fewer than kMinFamilyRows rows of.
absl::StatusOr<std::vector<double>> HeldOutPredictions(
    const std::vector<Row>& rows, Target target,
    const std::function<std::string(const Row&)>& fold_of, bool family_fallback = false) {
  std::set<std::string> folds;
  for (const Row& row : rows) folds.insert(fold_of(row));
  std::vector<double> predicted(rows.size(), 0);
  for (const std::string& fold : folds) {
    std::vector<TrainingRow> train;
    std::vector<size_t> test;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (fold_of(rows[i]) == fold) {
        test.push_back(i);
      } else {
        train.push_back(rows[i].training);
      }
    }
    FORGE_ASSIGN_OR_RETURN(const LearnedModel model,
                           LearnedModel::Train(train, {.target = target}));
    std::vector<std::vector<float>> features;
    std::vector<double> analytic;
    for (const size_t i : test) {
      features.push_back(rows[i].training.features);
      analytic.push_back(rows[i].training.analytic_seconds);
    }
    FORGE_ASSIGN_OR_RETURN(const std::vector<double> seconds,
                           model.PredictSeconds(features, analytic));
    for (size_t k = 0; k < test.size(); ++k) {
      const Row& row = rows[test[k]];
      const bool thin = model.family_rows(static_cast<int>(row.task_family)) < kMinFamilyRows;
      predicted[test[k]] = family_fallback && thin ? row.training.analytic_seconds : seconds[k];
    }
  }
  return predicted;
}

// Scores of `predicted` over the rows `selected`.
GroupedScores Score(const std::vector<Row>& rows, const std::vector<double>& predicted,
                    const std::vector<size_t>& selected) {
  std::vector<double> p, m;
  std::vector<std::string> tasks;
  for (const size_t i : selected) {
    p.push_back(predicted[i]);
    m.push_back(rows[i].training.measured_seconds);
    tasks.push_back(rows[i].task);
  }
  return ScoreByTask(p, m, tasks);
}

std::string Cell(const GroupedScores& s) {
  return absl::StrFormat("%.1f%% / %.1f%% / %.2f (%.2f)", s.mean_ape, s.median_ape, s.spearman,
                         s.worst_spearman);
}

absl::Status PrintSplit(const std::string& title, const std::vector<Row>& rows,
                        const std::function<std::string(const Row&)>& fold_of) {
  std::vector<double> analytic;
  for (const Row& row : rows) analytic.push_back(row.training.analytic_seconds);
  FORGE_ASSIGN_OR_RETURN(const std::vector<double> log_seconds,
                         HeldOutPredictions(rows, Target::kLogSeconds, fold_of));
  FORGE_ASSIGN_OR_RETURN(const std::vector<double> log_ratio,
                         HeldOutPredictions(rows, Target::kLogRatioToAnalytic, fold_of));
  FORGE_ASSIGN_OR_RETURN(
      const std::vector<double> with_fallback,
      HeldOutPredictions(rows, Target::kLogRatioToAnalytic, fold_of, /*family_fallback=*/true));
  std::map<std::string, std::vector<size_t>> by_family;
  std::set<std::string> all_tasks;
  std::vector<size_t> all;
  for (size_t i = 0; i < rows.size(); ++i) {
    by_family[rows[i].family].push_back(i);
    all.push_back(i);
  }
  std::cout << "### " << title << "\n\n"
            << "Each cell: MAPE / median APE / mean Spearman within a task (worst task).\n\n"
            << "| family | rows | tasks | analytic | learned, log time | learned, log ratio to "
               "analytic | log ratio, analytic for thin families (CostPredictor) |\n"
               "|---|---|---|---|---|---|---|\n";
  by_family["all"] = all;
  for (const auto& [family, selected] : by_family) {
    std::set<std::string> tasks;
    for (const size_t i : selected) tasks.insert(rows[i].task);
    std::cout << "| " << family << " | " << selected.size() << " | " << tasks.size() << " | "
              << Cell(Score(rows, analytic, selected)) << " | "
              << Cell(Score(rows, log_seconds, selected)) << " | "
              << Cell(Score(rows, log_ratio, selected)) << " | "
              << Cell(Score(rows, with_fallback, selected)) << " |\n";
  }
  std::cout << "\n";
  return absl::OkStatus();
}

// args: GPU, PROBLEMS_DIR, then the result files.
absl::Status Run(const std::vector<std::string>& args) {
  const std::string& gpu_name = args[0];
  const std::string& problems_dir = args[1];
  const std::vector<std::string> paths(args.begin() + 2, args.end());
  FORGE_ASSIGN_OR_RETURN(const GpuArch gpu, FindGpu(gpu_name));
  FORGE_ASSIGN_OR_RETURN(const std::vector<MeasuredPoint> points, ReadPoints(paths));
  std::map<std::string, int> skipped;
  FORGE_ASSIGN_OR_RETURN(const std::vector<Row> rows,
                         MakeRows(gpu, problems_dir, points, skipped));
  std::set<std::string> tasks;
  for (const Row& row : rows) tasks.insert(row.task);
  std::cout << "## Held-out evaluation on " << gpu.name << "\n\n"
            << points.size() << " measured points (repeats across runs merged at their median), "
            << rows.size() << " rows over " << tasks.size() << " tasks; skipped:";
  if (skipped.empty()) std::cout << " none";
  for (const auto& [reason, count] : skipped) std::cout << " " << count << " (" << reason << ");";
  std::cout << "\n\n";
  FORGE_RETURN_IF_ERROR(PrintSplit("Leave one task out", rows, [](const Row& row) { return row.task; }));
  FORGE_RETURN_IF_ERROR(
      PrintSplit("Leave one family out (transfer to a family never trained on)", rows,
                 [](const Row& row) { return row.family; }));
  // The features that drive the model trained on everything.
  std::vector<TrainingRow> all;
  for (const Row& row : rows) all.push_back(row.training);
  FORGE_ASSIGN_OR_RETURN(const LearnedModel model, LearnedModel::Train(all, {}));
  FORGE_ASSIGN_OR_RETURN(const auto importance, model.Importance());
  std::cout << "### Features by total gain (log ratio model on every row)\n\n";
  for (size_t i = 0; i < std::min<size_t>(importance.size(), 12); ++i) {
    std::cout << absl::StrFormat("%zu. %s (%.3g)\n", i + 1, importance[i].first,
                                 importance[i].second);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace forge::cost

int main(int argc, char** argv) {
  return forge::benchmarks::ToolMain(argc, argv, 3, "cost_model_evaluate GPU PROBLEMS_DIR RESULTS.jsonl...", forge::cost::Run);
}
