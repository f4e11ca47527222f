#include "server/cost_model_store.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/redis/transaction.h"
#include "common/status/status_macros.h"
#include "server/redis_keys.h"

namespace forge::server {
namespace {

// KEYS[1] the model's hash; ARGV: model bytes, target, rows, tasks, results seen, trained ms.
// The version is numbered and the bytes stored in one step.
constexpr char kPutScript[] = R"lua(
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[1], 'model', ARGV[1], 'target', ARGV[2], 'rows', ARGV[3],
           'tasks', ARGV[4], 'results_seen', ARGV[5], 'trained_ms', ARGV[6])
return version
)lua";

// A number field of an HMGET reply; 0 when absent or not a number.
int64_t Int(const RedisReply& field) {
  int64_t value = 0;
  if (field.is_bulk_string()) (void)absl::SimpleAtoi(field.str(), &value);
  return value;
}

}  // namespace

absl::StatusOr<int64_t> CostModelStore::Put(absl::string_view space,
                                            const cost::LearnedModel& model,
                                            int64_t results_seen) {
  FORGE_ASSIGN_OR_RETURN(std::string bytes, model.Serialize());
  const absl::StatusOr<RedisReply> reply = redis_->Command(
      {"EVAL", kPutScript, "1", keys::CostModel(space), std::move(bytes),
       std::string(cost::TargetName(model.target())), absl::StrCat(model.training_rows()),
       absl::StrCat(model.training_groups()), absl::StrCat(results_seen),
       absl::StrCat(absl::ToUnixMillis(absl::Now()))});
  FORGE_RETURN_IF_ERROR(CheckReply("storing the performance model", reply));
  if (!reply->is_integer()) return absl::InternalError("storing the performance model: no version");
  return reply->integer();
}

absl::StatusOr<int64_t> CostModelStore::Version(absl::string_view space) {
  const absl::StatusOr<RedisReply> reply =
      redis_->Command({"HGET", keys::CostModel(space), "version"});
  FORGE_RETURN_IF_ERROR(CheckReply("reading the performance model's version", reply));
  if (reply->is_nil()) return 0;
  int64_t version = 0;
  if (!absl::SimpleAtoi(reply->str(), &version)) {
    return absl::DataLossError(absl::StrCat("the performance model version of ", space,
                                            " is not a number: '", reply->str(), "'"));
  }
  return version;
}

absl::StatusOr<std::optional<CostModelInfo>> CostModelStore::Info(absl::string_view space) {
  const absl::StatusOr<RedisReply> reply = redis_->Command(
      {"HMGET", keys::CostModel(space), "version", "target", "rows", "tasks", "results_seen",
       "trained_ms"});
  FORGE_RETURN_IF_ERROR(CheckReply("reading the performance model", reply));
  if (!reply->is_array() || reply->elements().size() != 6 || reply->elements()[0].is_nil()) {
    return std::nullopt;
  }
  const std::vector<RedisReply>& fields = reply->elements();
  return CostModelInfo{.version = Int(fields[0]),
                       .rows = Int(fields[2]),
                       .tasks = Int(fields[3]),
                       .results_seen = Int(fields[4]),
                       .trained_ms = Int(fields[5]),
                       .target = fields[1].str()};
}

absl::StatusOr<std::optional<cost::VersionedModel>> CostModelStore::Get(absl::string_view space) {
  const absl::StatusOr<RedisReply> reply =
      redis_->Command({"HMGET", keys::CostModel(space), "version", "model"});
  FORGE_RETURN_IF_ERROR(CheckReply("reading the performance model", reply));
  if (!reply->is_array() || reply->elements().size() != 2 || reply->elements()[0].is_nil() ||
      reply->elements()[1].is_nil()) {
    return std::nullopt;
  }
  int64_t version = 0;
  if (!absl::SimpleAtoi(reply->elements()[0].str(), &version)) {
    return absl::DataLossError(absl::StrCat("the performance model version of ", space,
                                            " is not a number"));
  }
  absl::StatusOr<cost::LearnedModel> model =
      cost::LearnedModel::Deserialize(reply->elements()[1].str());
  if (!model.ok()) {
    return absl::DataLossError(absl::StrCat("the stored performance model of ", space,
                                            " (version ", version,
                                            "): ", model.status().message()));
  }
  return cost::VersionedModel{.version = version, .model = *std::move(model)};
}

}  // namespace forge::server
