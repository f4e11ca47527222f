#include "common/redis/transaction.h"

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

}  // namespace forge
