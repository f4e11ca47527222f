#include "server/revocation/revocation.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status/status_macros.h"
#include "server/redis_keys.h"

namespace forge::server {
namespace {


absl::Status CheckName(absl::string_view what, absl::string_view name) {
  if (name.empty() || std::any_of(name.begin(), name.end(), [](char c) {
        return absl::ascii_isspace(static_cast<unsigned char>(c));
      })) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", name, "\" is empty or has whitespace"));
  }
  return absl::OkStatus();
}

absl::Status CheckReply(const RedisReply& reply) {
  if (reply.is_error()) return absl::FailedPreconditionError(reply.str());
  return absl::OkStatus();
}

}  // namespace

Revocations::Revocations(RedisClient* redis, absl::Duration cache_for)
    : redis_(redis), cache_for_(cache_for) {}

absl::Status Revocations::Add(absl::string_view what, absl::string_view key,
                              absl::string_view name, std::string value,
                              absl::flat_hash_set<std::string>& cache) {
  FORGE_RETURN_IF_ERROR(CheckName(what, name));
  FORGE_RETURN_IF_ERROR(
      redis_->Command({"HSET", std::string(key), std::string(name), std::move(value)}).status());
  absl::MutexLock lock(&mutex_);
  cache.insert(std::string(name));
  return absl::OkStatus();
}

absl::Status Revocations::Remove(absl::string_view what, absl::string_view key,
                                 absl::string_view name, absl::flat_hash_set<std::string>& cache) {
  FORGE_RETURN_IF_ERROR(CheckName(what, name));
  FORGE_RETURN_IF_ERROR(redis_->Command({"HDEL", std::string(key), std::string(name)}).status());
  absl::MutexLock lock(&mutex_);
  cache.erase(std::string(name));
  return absl::OkStatus();
}

absl::Status Revocations::RevokeToken(absl::string_view token_id, absl::Time expires,
                                      absl::string_view by) {
  const int64_t until = expires == absl::InfiniteFuture() ? 0 : absl::ToUnixSeconds(expires);
  return Add("token id", keys::kRevokedTokens, token_id, absl::StrCat(until, " ", by), tokens_);
}

absl::Status Revocations::RevokeIdentity(absl::string_view identity, absl::string_view by) {
  return Add("worker identity", keys::kRevokedIdentities, identity,
             absl::StrCat(absl::ToUnixSeconds(absl::Now()), " ", by), identities_);
}

absl::Status Revocations::RestoreToken(absl::string_view token_id) {
  return Remove("token id", keys::kRevokedTokens, token_id, tokens_);
}

absl::Status Revocations::RestoreIdentity(absl::string_view identity) {
  return Remove("worker identity", keys::kRevokedIdentities, identity, identities_);
}

absl::Status Revocations::RefreshLocked(absl::Time now) {
  if (now - loaded_ < cache_for_) return absl::OkStatus();
  absl::StatusOr<std::vector<RedisReply>> replies =
      redis_->Pipeline({{"HGETALL", std::string(keys::kRevokedTokens)}, {"HGETALL", std::string(keys::kRevokedIdentities)}});
  if (!replies.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot read the revoked tokens: ", replies.status().message()));
  }
  for (const RedisReply& reply : *replies) FORGE_RETURN_IF_ERROR(CheckReply(reply));
  absl::flat_hash_set<std::string> tokens, identities;
  std::vector<std::string> expired = {"HDEL", std::string(keys::kRevokedTokens)};
  const std::vector<RedisReply>& token_fields = (*replies)[0].elements();
  for (size_t i = 0; i + 1 < token_fields.size(); i += 2) {
    int64_t until = 0;
    const std::vector<absl::string_view> value = absl::StrSplit(token_fields[i + 1].str(), ' ');
    if (absl::SimpleAtoi(value[0], &until) && until != 0 && absl::FromUnixSeconds(until) <= now) {
      expired.push_back(token_fields[i].str());
      continue;
    }
    tokens.insert(token_fields[i].str());
  }
  const std::vector<RedisReply>& identity_fields = (*replies)[1].elements();
  for (size_t i = 0; i + 1 < identity_fields.size(); i += 2) {
    identities.insert(identity_fields[i].str());
  }
  // The token expired by itself: its entry has no more use. Best effort; the next read retries.
  if (expired.size() > 2) redis_->Command(expired).IgnoreError();
  tokens_ = std::move(tokens);
  identities_ = std::move(identities);
  loaded_ = now;
  return absl::OkStatus();
}

absl::Status Revocations::Check(absl::string_view token_id, absl::string_view worker_identity) {
  absl::MutexLock lock(&mutex_);
  FORGE_RETURN_IF_ERROR(RefreshLocked(absl::Now()));
  if (tokens_.contains(token_id)) {
    return absl::UnauthenticatedError(absl::StrCat("token ", token_id, " was revoked"));
  }
  if (!worker_identity.empty() && identities_.contains(worker_identity)) {
    return absl::UnauthenticatedError(absl::StrCat(
        "worker identity \"", worker_identity,
        "\" was revoked (forge admin revoke-token --identity NAME --restore lets it back)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Revocations::Counts> Revocations::Count() {
  FORGE_ASSIGN_OR_RETURN(std::vector<RedisReply> replies,
                         redis_->Pipeline({{"HLEN", std::string(keys::kRevokedTokens)}, {"HLEN", std::string(keys::kRevokedIdentities)}}));
  for (const RedisReply& reply : replies) FORGE_RETURN_IF_ERROR(CheckReply(reply));
  return Counts{.tokens = replies[0].integer(), .identities = replies[1].integer()};
}

}  // namespace forge::server
