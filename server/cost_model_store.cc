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

// KEYS[1] the model's hash; ARGV: model bytes, target, rows, tasks, results seen, trained ms,
// held-out evaluation (forge.v1.CostModelEvaluation). The version is numbered and the bytes stored
// in one step.
constexpr char kPutScript[] = R"lua(
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[1], 'model', ARGV[1], 'target', ARGV[2], 'rows', ARGV[3],
           'tasks', ARGV[4], 'results_seen', ARGV[5], 'trained_ms', ARGV[6], 'held_out', ARGV[7])
return version
)lua";

// The fields Info reads, in order; GetStored reads them and the model.
constexpr const char* kInfoFields[] = {"version", "target", "rows", "tasks",
                                       "results_seen", "trained_ms", "held_out"};
constexpr size_t kInfoFieldCount = sizeof(kInfoFields) / sizeof(kInfoFields[0]);

// A number field of an HMGET reply; 0 when absent or not a number.
int64_t Int(const RedisReply& field) {
  int64_t value = 0;
  if (field.is_bulk_string()) (void)absl::SimpleAtoi(field.str(), &value);
  return value;
}

}  // namespace

absl::StatusOr<int64_t> CostModelStore::Put(absl::string_view space,
                                            const cost::LearnedModel& model,
                                            int64_t results_seen,
                                            const forge::v1::CostModelEvaluation& held_out) {
  FORGE_ASSIGN_OR_RETURN(std::string bytes, model.Serialize());
  const absl::StatusOr<RedisReply> reply = redis_->Command(
      {"EVAL", kPutScript, "1", keys::CostModel(space), std::move(bytes),
       std::string(cost::TargetName(model.target())), absl::StrCat(model.training_rows()),
       absl::StrCat(model.training_groups()), absl::StrCat(results_seen),
       absl::StrCat(absl::ToUnixMillis(absl::Now())), held_out.SerializeAsString()});
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

absl::StatusOr<std::optional<StoredCostModel>> CostModelStore::Read(absl::string_view space,
                                                                    bool with_bytes) {
  std::vector<std::string> command = {"HMGET", keys::CostModel(space)};
  command.insert(command.end(), std::begin(kInfoFields), std::end(kInfoFields));
  if (with_bytes) command.push_back("model");
  const absl::StatusOr<RedisReply> reply = redis_->Command(command);
  FORGE_RETURN_IF_ERROR(CheckReply("reading the performance model", reply));
  if (!reply->is_array() || reply->elements().size() != command.size() - 2 ||
      reply->elements()[0].is_nil() || (with_bytes && reply->elements().back().is_nil())) {
    return std::nullopt;
  }
  const std::vector<RedisReply>& fields = reply->elements();
  int64_t version = 0;
  if (!absl::SimpleAtoi(fields[0].str(), &version)) {
    return absl::DataLossError(absl::StrCat("the performance model version of ", space,
                                            " is not a number: '", fields[0].str(), "'"));
  }
  StoredCostModel stored{.info = {.version = version,
                                  .rows = Int(fields[2]),
                                  .tasks = Int(fields[3]),
                                  .results_seen = Int(fields[4]),
                                  .trained_ms = Int(fields[5]),
                                  .target = fields[1].is_bulk_string() ? fields[1].str() : ""},
                         .bytes = with_bytes ? fields.back().str() : ""};
  // A model stored before held-out errors were has none.
  if (fields[6].is_bulk_string() && !stored.info.held_out.ParseFromString(fields[6].str())) {
    return absl::DataLossError(absl::StrCat("the held-out error of performance model ", space,
                                            " version ", version, " is malformed"));
  }
  return stored;
}

absl::StatusOr<std::optional<CostModelInfo>> CostModelStore::Info(absl::string_view space) {
  FORGE_ASSIGN_OR_RETURN(std::optional<StoredCostModel> stored, Read(space, /*with_bytes=*/false));
  if (!stored.has_value()) return std::nullopt;
  return std::move(stored->info);
}

absl::StatusOr<std::optional<StoredCostModel>> CostModelStore::GetStored(absl::string_view space) {
  return Read(space, /*with_bytes=*/true);
}

absl::StatusOr<std::optional<cost::VersionedModel>> CostModelStore::Get(absl::string_view space) {
  FORGE_ASSIGN_OR_RETURN(std::optional<StoredCostModel> stored, Read(space, /*with_bytes=*/true));
  if (!stored.has_value()) return std::nullopt;
  const int64_t version = stored->info.version;
  absl::StatusOr<cost::LearnedModel> model = cost::LearnedModel::Deserialize(stored->bytes);
  if (!model.ok()) {
    return absl::DataLossError(absl::StrCat("the stored performance model of ", space,
                                            " (version ", version,
                                            "): ", model.status().message()));
  }
  return cost::VersionedModel{.version = version,
                              .model = *std::move(model),
                              .held_out = std::move(stored->info.held_out)};
}

}  // namespace forge::server
