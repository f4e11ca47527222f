// Small helpers over RedisClient for callers that keep records in Redis: a MULTI/EXEC transaction
// sent as one pipeline, a check that a reply is not an error, a hash reply as a map, and the keys
// matching a pattern (SCAN, which does not block the server as KEYS does).
//
// Transaction(redis, operation, commands) sends MULTI, the commands and EXEC in one write. On the
// server the commands run atomically; on the client no other caller's command can land inside the
// transaction although the connection is shared (RedisClient serializes whole pipelines). It
// fails, with `operation` at the front of the message, when the transport fails (Unavailable,
// DeadlineExceeded: the transaction may or may not have run), when EXEC does not answer with an
// array (a command was refused while queued, so nothing ran: Internal), or when any command
// answered an error inside EXEC (Internal; Redis has run the others, since it has no rollback).
#ifndef FORGE_COMMON_REDIS_TRANSACTION_H_
#define FORGE_COMMON_REDIS_TRANSACTION_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/redis/redis_client.h"

namespace forge {

// Runs `commands` as one MULTI/EXEC transaction (see above). No commands: OK, nothing is sent.
absl::Status Transaction(RedisClient& redis, absl::string_view operation,
                         std::vector<std::vector<std::string>> commands);

// OK when `reply` holds a reply that is not an error; otherwise the status (or the error reply,
// as Internal) with `operation` at the front of its message.
absl::Status CheckReply(absl::string_view operation, const absl::StatusOr<RedisReply>& reply);

// The field -> value pairs of an HGETALL reply; empty for a nil or non-array reply.
absl::flat_hash_map<std::string, std::string> HashFields(const RedisReply& reply);

// Every key matching the glob `pattern`, sorted and without repeats, read by SCAN in batches:
// a key that exists throughout is listed; one created or deleted meanwhile may or may not be.
absl::StatusOr<std::vector<std::string>> ScanKeys(RedisClient& redis, absl::string_view pattern);

}  // namespace forge

#endif  // FORGE_COMMON_REDIS_TRANSACTION_H_
