// Trains the learned performance model (compiler/cost/learned) of a space from the MEASURED
// results in the results cache, and stores each new model as the next version
// (cost_model_store.h). It runs in the coordinator, on its own thread (coordinator_main's
// `cost-model.*` settings): the coordinator already owns the results cache, the task specs and
// the candidates a row is made from, and training on a few thousand rows takes seconds of one
// core, so a separate process would add a deployment, credentials for Redis and a second reader
// of the same keys for nothing.
//
// A row is one measured result: its candidate (forge:candidate) and task spec (forge:task) give
// the family's plan (KernelFamily::Plan, no source), the measurement's ptxas figures (when
// resources_available) the resources, cost::PredictPlan the analytic prediction, and
// cost::ExtractFeatures the features; the label is the measured median. Results of candidates made
// by another generator version are skipped (this build's plan of their point may differ), and so
// are failures and predictions: a model never learns from the emulated backend.
//
// Incremental: MaybeTrain trains only when the space's measured results grew by `retrain_every`
// since the stored model (its results_seen), and only over the threshold of cost_predictor.h
// (kMinTrainingRows rows over kMinTrainingGroups tasks); below it the analytic model stays in use.
// Each training uses every row (XGBoost retrains from scratch in seconds; no warm start), after a
// model trained without every fifth task measured its error on them (compiler/cost/learned/
// held_out.h); that error is stored with the version, never the training error.
#ifndef FORGE_SERVER_COST_MODEL_TRAINER_H_
#define FORGE_SERVER_COST_MODEL_TRAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/arch/arch.h"
#include "common/redis/redis_client.h"
#include "compiler/cost/learned/learned_model.h"
#include "server/cost_model_store.h"
#include "server/result_cache.h"

namespace forge::server {

// The arch table's GPU a space's results belong to ("NVIDIA H200" -> H200). InvalidArgument for
// a space of predictions ("predicted:..."), NotFound for a GPU the table lacks.
absl::StatusOr<GpuArch> GpuOfSpace(absl::string_view space);

struct TrainingSet {
  std::vector<cost::TrainingRow> rows;
  int64_t results_seen = 0;  // measured results of the space
  int64_t skipped = 0;       // of those, results no row could be made of (see above)
};

// The rows of every measured result of `space`.
absl::StatusOr<TrainingSet> CollectTrainingSet(RedisClient& redis, ResultCache& cache,
                                               absl::string_view space);

struct CostModelTrainerOptions {
  int64_t retrain_every = 50;
  cost::TrainOptions train;
};

struct TrainOutcome {
  bool trained = false;
  int64_t version = 0;  // the stored (new, or current when not trained) version; 0: none
  int64_t rows = 0;
  int64_t tasks = 0;
  int64_t results_seen = 0;
  std::string reason;  // why not trained, or what was trained
};

class CostModelTrainer {
 public:
  // Everything must outlive the trainer.
  CostModelTrainer(RedisClient* redis, ResultCache* cache, CostModelStore* store,
                   CostModelTrainerOptions options)
      : redis_(redis), cache_(cache), store_(store), options_(std::move(options)) {}

  // Trains and stores a new version of `space`'s model when due (see above).
  absl::StatusOr<TrainOutcome> MaybeTrain(absl::string_view space);

 private:
  RedisClient* const redis_;
  ResultCache* const cache_;
  CostModelStore* const store_;
  const CostModelTrainerOptions options_;
};

}  // namespace forge::server

#endif  // FORGE_SERVER_COST_MODEL_TRAINER_H_
