#include "server/cost_model_trainer.h"

#include <cctype>
#include <optional>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/redis/transaction.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/family.h"
#include "compiler/cost/learned/cost_predictor.h"
#include "compiler/cost/learned/features.h"
#include "compiler/cost/learned/held_out.h"
#include "compiler/cost/plan_prediction.h"
#include "compiler/search/candidate.h"
#include "server/redis_keys.h"

namespace forge::server {
namespace {

constexpr absl::string_view kPredictedSpacePrefix = "predicted:";

// Lower-case letters and digits only: "NVIDIA H200" -> "nvidiah200".
std::string Normalized(absl::string_view text) {
  std::string out;
  for (const char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

// The task's spec as the job store wrote it.
absl::StatusOr<std::optional<forge::v1::KernelTask>> TaskSpec(RedisClient& redis,
                                                             absl::string_view digest) {
  const absl::StatusOr<RedisReply> reply =
      redis.Command({"HGET", keys::Task(digest), std::string(keys::kTaskSpecField)});
  FORGE_RETURN_IF_ERROR(CheckReply("reading a task spec", reply));
  forge::v1::KernelTask task;
  if (reply->is_nil() || !task.ParseFromString(reply->str())) return std::nullopt;
  return task;
}

// The row of one measured result, or nullopt when none can be made (see the header).
std::optional<cost::TrainingRow> RowOf(const GpuArch& gpu, const forge::v1::KernelTask& task,
                                       const forge::v1::Candidate& candidate,
                                       const forge::v1::Measurement& measurement) {
  const codegen::KernelFamily* family = codegen::FindFamily(candidate.family());
  if (family == nullptr) return std::nullopt;
  const absl::StatusOr<codegen::LaunchPlan> plan = family->Plan(task, search::PointOf(candidate));
  if (!plan.ok() || plan->generator_version != candidate.generator_version()) return std::nullopt;
  std::optional<cost::KernelResources> resources;
  const forge::v1::KernelMetrics& metrics = measurement.metrics();
  if (metrics.resources_available()) {
    resources = cost::KernelResources{
        .registers_per_thread = metrics.registers_per_thread(),
        .static_shared_bytes = std::max<int64_t>(
            0, int64_t{metrics.shared_memory_bytes()} - plan->launch.dynamic_shared_bytes),
        .dynamic_shared_bytes = plan->launch.dynamic_shared_bytes,
        .spill_store_bytes = metrics.spill_store_bytes(),
        .spill_load_bytes = metrics.spill_load_bytes()};
  } else if (plan->hints.executor == codegen::Executor::kGeneratedKernel) {
    return std::nullopt;  // a generated kernel's analytic prediction needs its resources
  }
  const absl::StatusOr<cost::PlanPrediction> analytic =
      cost::PredictPlan(gpu, task, *plan, resources);
  if (!analytic.ok() || !(analytic->seconds > 0)) return std::nullopt;
  absl::StatusOr<std::vector<float>> features = cost::ExtractFeatures(
      {.gpu = &gpu, .task = &task, .plan = &*plan, .resources = resources,
       .analytic_seconds = analytic->seconds});
  if (!features.ok()) return std::nullopt;
  return cost::TrainingRow{.features = *std::move(features),
                           .measured_seconds = measurement.median_us() * 1e-6,
                           .analytic_seconds = analytic->seconds,
                           .group = task.digest()};
}

}  // namespace

absl::StatusOr<GpuArch> GpuOfSpace(absl::string_view space) {
  if (absl::StartsWith(space, kPredictedSpacePrefix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "space '", space, "' holds predictions: a performance model learns from measurements"));
  }
  // The longest table name inside the product name: "NVIDIA H200" is the H200.
  const std::string normalized = Normalized(space);
  const GpuArch* best = nullptr;
  for (const GpuArch& gpu : KnownGpus()) {
    const std::string name = Normalized(gpu.name);
    if (absl::StrContains(normalized, name) &&
        (best == nullptr || name.size() > Normalized(best->name).size())) {
      best = &gpu;
    }
  }
  if (best == nullptr) {
    return absl::NotFoundError(absl::StrCat("no GPU of the arch table in space '", space, "'"));
  }
  return *best;
}

absl::StatusOr<TrainingSet> CollectTrainingSet(RedisClient& redis, ResultCache& cache,
                                               absl::string_view space) {
  FORGE_ASSIGN_OR_RETURN(const GpuArch gpu, GpuOfSpace(space));
  const std::string prefix = keys::TaskResults(space, "");
  FORGE_ASSIGN_OR_RETURN(const std::vector<std::string> indexes,
                         ScanKeys(redis, absl::StrCat(prefix, "*")));
  TrainingSet set;
  for (const std::string& index : indexes) {
    const std::string task_digest = index.substr(prefix.size());
    // A space's name may hold ':'; a task digest does not.
    if (task_digest.find(':') != std::string::npos) continue;
    FORGE_ASSIGN_OR_RETURN(const std::vector<forge::v1::Result> results,
                           cache.ForTask(space, task_digest));
    FORGE_ASSIGN_OR_RETURN(const std::optional<forge::v1::KernelTask> task,
                           TaskSpec(redis, task_digest));
    for (const forge::v1::Result& result : results) {
      if (!result.has_measurement() ||
          result.measurement().kind() != forge::v1::MEASUREMENT_KIND_MEASURED ||
          !(result.measurement().median_us() > 0)) {
        continue;
      }
      ++set.results_seen;
      const absl::StatusOr<forge::v1::Candidate> candidate =
          cache.GetCandidate(result.measurement().candidate_digest());
      std::optional<cost::TrainingRow> row;
      if (task.has_value() && candidate.ok()) {
        row = RowOf(gpu, *task, *candidate, result.measurement());
      }
      if (row.has_value()) {
        set.rows.push_back(*std::move(row));
      } else {
        ++set.skipped;
      }
    }
  }
  return set;
}

absl::StatusOr<TrainOutcome> CostModelTrainer::MaybeTrain(absl::string_view space) {
  FORGE_ASSIGN_OR_RETURN(const std::optional<CostModelInfo> current, store_->Info(space));
  FORGE_ASSIGN_OR_RETURN(const TrainingSet set, CollectTrainingSet(*redis_, *cache_, space));
  TrainOutcome outcome;
  outcome.version = current.has_value() ? current->version : 0;
  outcome.rows = static_cast<int64_t>(set.rows.size());
  outcome.results_seen = set.results_seen;
  std::set<std::string> tasks;
  for (const cost::TrainingRow& row : set.rows) tasks.insert(row.group);
  outcome.tasks = static_cast<int64_t>(tasks.size());
  if (outcome.rows < cost::kMinTrainingRows || outcome.tasks < cost::kMinTrainingGroups) {
    outcome.reason = absl::StrCat("too little data: ", outcome.rows, " rows over ", outcome.tasks,
                                  " tasks (", set.skipped, " results skipped); the model needs ",
                                  cost::kMinTrainingRows, " over ", cost::kMinTrainingGroups);
    return outcome;
  }
  if (current.has_value() && set.results_seen - current->results_seen < options_.retrain_every) {
    outcome.reason =
        absl::StrCat(set.results_seen - current->results_seen, " new results since version ",
                     current->version, "; retraining at ", options_.retrain_every);
    return outcome;
  }
  // The error is measured first, by a model that never saw the held-back tasks; the stored model
  // then learns from every row.
  FORGE_ASSIGN_OR_RETURN(const std::optional<forge::v1::CostModelEvaluation> held_out,
                         cost::EvaluateHeldOut(set.rows, options_.train));
  FORGE_ASSIGN_OR_RETURN(const cost::LearnedModel model,
                         cost::LearnedModel::Train(set.rows, options_.train));
  FORGE_ASSIGN_OR_RETURN(outcome.version,
                         store_->Put(space, model, set.results_seen,
                                     held_out.value_or(forge::v1::CostModelEvaluation())));
  outcome.trained = true;
  outcome.reason = absl::StrCat("trained version ", outcome.version, " on ", outcome.rows,
                                " rows over ", outcome.tasks, " tasks");
  return outcome;
}

}  // namespace forge::server
