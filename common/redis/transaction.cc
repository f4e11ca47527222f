#include "common/redis/transaction.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace forge {

absl::Status Transaction(RedisClient& redis, absl::string_view operation,
                         std::vector<std::vector<std::string>> commands) {
  if (commands.empty()) return absl::OkStatus();
  commands.insert(commands.begin(), {"MULTI"});
  commands.push_back({"EXEC"});
  absl::StatusOr<std::vector<RedisReply>> replies = redis.Pipeline(commands);
  if (!replies.ok()) return Annotate(replies.status(), operation);
  const RedisReply& exec = replies->back();
  if (!exec.is_array()) {
    // EXECABORT: a command was refused while queued; its own reply says why.
    std::string reason = exec.DebugString();
    for (const RedisReply& reply : *replies) {
      if (reply.is_error() && &reply != &exec) {
        reason = absl::StrCat(reply.str(), " (", exec.str(), ")");
        break;
      }
    }
    return absl::InternalError(absl::StrCat(operation, ": transaction failed: ", reason));
  }
  for (const RedisReply& reply : exec.elements()) {
    if (reply.is_error()) return absl::InternalError(absl::StrCat(operation, ": ", reply.str()));
  }
  return absl::OkStatus();
}

absl::Status CheckReply(absl::string_view operation, const absl::StatusOr<RedisReply>& reply) {
  if (!reply.ok()) return Annotate(reply.status(), operation);
  if (reply->is_error()) return absl::InternalError(absl::StrCat(operation, ": ", reply->str()));
  return absl::OkStatus();
}

absl::flat_hash_map<std::string, std::string> HashFields(const RedisReply& reply) {
  absl::flat_hash_map<std::string, std::string> fields;
  const std::vector<RedisReply>& elements = reply.elements();
  for (size_t i = 0; i + 1 < elements.size(); i += 2) fields[elements[i].str()] = elements[i + 1].str();
  return fields;
}

absl::StatusOr<std::vector<std::string>> ScanKeys(RedisClient& redis, absl::string_view pattern) {
  const std::string operation = absl::StrCat("listing keys ", pattern);
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    absl::StatusOr<RedisReply> reply =
        redis.Command({"SCAN", cursor, "MATCH", std::string(pattern), "COUNT", "1000"});
    FORGE_RETURN_IF_ERROR(CheckReply(operation, reply));
    if (!reply->is_array() || reply->elements().size() != 2) {
      return absl::InternalError(
          absl::StrCat(operation, ": unexpected SCAN reply ", reply->DebugString()));
    }
    cursor = reply->elements()[0].str();
    for (const RedisReply& key : reply->elements()[1].elements()) keys.push_back(key.str());
  } while (cursor != "0");
  // SCAN may return a key more than once.
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

}  // namespace forge
