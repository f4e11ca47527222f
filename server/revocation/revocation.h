// Revoked credentials, shared by every coordinator of a Redis: single tokens (by token id,
// common/signed_token's TokenId) and whole worker identities. The Authenticator consults it on
// every authenticated call (server/auth/auth.h); `forge admin revoke-token` (JobService's
// RevokeToken) and the purge of a worker's results (PurgeResults) write it.
//
// Redis (server/redis_keys.h): forge:revoked:tokens, token id -> expiry (an entry past it is
// dropped: the token has expired anyway), and forge:revoked:identities: a revoked identity's
// tokens (any of role worker naming it, from the token file or signed) are refused until an admin
// restores it.
//
// Cache: Check reads both hashes at most once per `cache_for` (default 1 s) and answers from the
// copy in between, so a revocation made through another coordinator takes effect within that
// time; one made through this one (Revoke*, Restore*) at once. When Redis cannot be read and the
// copy is older than `cache_for`, Check fails with Unavailable (fail closed: a revoked token
// never passes because Redis was down).
//
// Errors: Check says Unauthenticated "token ID was revoked" / "worker identity NAME was revoked";
// InvalidArgument for an empty id or identity (or one with whitespace); Unavailable from Redis.
// Thread-safe.
#ifndef FORGE_SERVER_REVOCATION_REVOCATION_H_
#define FORGE_SERVER_REVOCATION_REVOCATION_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/redis/redis_client.h"

namespace forge::server {

class Revocations {
 public:
  // `redis` must outlive this.
  explicit Revocations(RedisClient* redis, absl::Duration cache_for = absl::Seconds(1));

  // Refuses token `token_id` until `expires` (absl::InfiniteFuture(): for good); `by` names the
  // admin, for the record.
  absl::Status RevokeToken(absl::string_view token_id, absl::Time expires, absl::string_view by);
  // Refuses every worker token of `identity` until RestoreIdentity.
  absl::Status RevokeIdentity(absl::string_view identity, absl::string_view by);
  absl::Status RestoreToken(absl::string_view token_id);
  absl::Status RestoreIdentity(absl::string_view identity);

  // OK unless token `token_id` or worker identity `worker_identity` is revoked; an empty
  // `worker_identity` (a client's token) checks the token only.
  absl::Status Check(absl::string_view token_id, absl::string_view worker_identity);

  // How many tokens and identities are revoked now (from Redis, not the cache).
  struct Counts {
    int64_t tokens = 0;
    int64_t identities = 0;
  };
  absl::StatusOr<Counts> Count();

 private:
  // Writes name -> value into the hash `key` and `cache` (`what` names it in errors); Remove
  // takes it out of both.
  absl::Status Add(absl::string_view what, absl::string_view key, absl::string_view name,
                   std::string value, absl::flat_hash_set<std::string>& cache);
  absl::Status Remove(absl::string_view what, absl::string_view key, absl::string_view name,
                      absl::flat_hash_set<std::string>& cache);
  // Reads both hashes into the cache when it is older than cache_for_.
  absl::Status RefreshLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  RedisClient* const redis_;
  const absl::Duration cache_for_;
  absl::Mutex mutex_;
  absl::Time loaded_ ABSL_GUARDED_BY(mutex_) = absl::InfinitePast();
  absl::flat_hash_set<std::string> tokens_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_set<std::string> identities_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace forge::server

#endif  // FORGE_SERVER_REVOCATION_REVOCATION_H_
