// The learned performance models in Redis (redis_keys.h: forge:cost_model:{space}), one current
// model per space (a GPU kind, "NVIDIA H200"; a model never learns from predictions, so
// "predicted:..." spaces have none). Each Put makes a new version, 1, 2, ..., numbered in the
// same script that stores the bytes, so versions are never reused and a reader never sees a
// version with another version's bytes. Fetchers poll Version (one HGET) and Get only when it
// changed. Only the latest model is kept: older versions are superseded, not archived.
#ifndef FORGE_SERVER_COST_MODEL_STORE_H_
#define FORGE_SERVER_COST_MODEL_STORE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/redis/redis_client.h"
#include "compiler/cost/learned/cost_predictor.h"
#include "compiler/cost/learned/learned_model.h"
#include "forge/v1/service.pb.h"

namespace forge::server {

// What a stored model was trained on, besides the model's own counts.
struct CostModelInfo {
  int64_t version = 0;
  int64_t rows = 0;
  int64_t tasks = 0;
  int64_t results_seen = 0;  // measured results of the space when it was trained
  int64_t trained_ms = 0;    // ms since the epoch
  std::string target;
  // The model's measured error on results held back from its training (empty: none held back).
  forge::v1::CostModelEvaluation held_out;
};

// The current model of a space as stored: what CostModelService sends.
struct StoredCostModel {
  CostModelInfo info;
  std::string bytes;  // the model (LearnedModel::Serialize)
};

class CostModelStore {
 public:
  // `redis` must outlive the store.
  explicit CostModelStore(RedisClient* redis) : redis_(redis) {}

  // Stores `model` as the next version of `space`, with its held-out error; returns the version.
  absl::StatusOr<int64_t> Put(absl::string_view space, const cost::LearnedModel& model,
                              int64_t results_seen,
                              const forge::v1::CostModelEvaluation& held_out = {});

  // The current version of `space` (0: none stored).
  absl::StatusOr<int64_t> Version(absl::string_view space);

  // What the current model of `space` was trained on; nullopt when none is stored.
  absl::StatusOr<std::optional<CostModelInfo>> Info(absl::string_view space);

  // The current model of `space` as stored, unparsed; nullopt when none is stored.
  absl::StatusOr<std::optional<StoredCostModel>> GetStored(absl::string_view space);

  // The current model of `space` with its version; nullopt when none is stored. DataLoss when the
  // stored bytes are not a model this build can use (another feature schema: retrain).
  absl::StatusOr<std::optional<cost::VersionedModel>> Get(absl::string_view space);

 private:
  absl::StatusOr<std::optional<StoredCostModel>> Read(absl::string_view space, bool with_bytes);

  RedisClient* const redis_;
};

}  // namespace forge::server

#endif  // FORGE_SERVER_COST_MODEL_STORE_H_
