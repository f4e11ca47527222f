// The results cache: one Result per (space, candidate digest), shared by every job and every
// coordinator, never expiring. The first result stored for a candidate wins; a later one for the
// same candidate (a worker whose lease had expired, a retry) is refused, so no candidate is ever
// counted twice. A space is where a result is valid (redis_keys.h): a GPU model, or a prediction
// for one.
//
// Attributed only (a coordinator with authentication): a result without a worker identity
// (reported to a coordinator without authentication) is not served, as if absent, and a result of
// an authenticated worker for the same candidate replaces it; Purge still sees every result.
//
// EvictLeastRecentlyUsed bounds the cache's size for the sweeper (server/sweeper.h).
//
// Purge removes results again, by the worker identity that reported them (or the lack of one),
// by candidate or by task: the admin's answer to a worker that reported false numbers. Each
// result is removed with its entry in the task's index in one transaction; the caller restarts
// the searches of the tasks it names (their counts and bests came from the removed results).
#ifndef FORGE_SERVER_RESULT_CACHE_H_
#define FORGE_SERVER_RESULT_CACHE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/redis/redis_client.h"
#include "forge/v1/task.pb.h"

namespace forge::server {

// The candidate a result is about (its measurement's or its failure's).
const std::string& ResultCandidateDigest(const forge::v1::Result& result);

// Which results Purge removes: those matching every field set. Digests are SHA-256 hex (the
// caller checks; JobService does).
struct ResultFilter {
  std::string worker_identity;  // reported by this identity
  bool unattributed = false;    // reported with no identity (open authentication)
  std::string candidate_digest;
  std::string task_digest;

  bool empty() const {
    return worker_identity.empty() && !unattributed && candidate_digest.empty() &&
           task_digest.empty();
  }
  bool Matches(const forge::v1::Result& result) const;
};

// The results Purge removed from one (space, task).
struct PurgedTask {
  std::string space;
  std::string task_digest;
  int64_t results = 0;
};

class ResultCache {
 public:
  // `redis` must outlive the cache. With `attributed_only`, see above.
  explicit ResultCache(RedisClient* redis, bool attributed_only = false)
      : redis_(redis), attributed_only_(attributed_only) {}

  // The results known for `candidate_digests` of `space`, in order; nullopt where none is (or
  // only an unattributed one, when attributed only).
  absl::StatusOr<std::vector<std::optional<forge::v1::Result>>> GetMany(
      absl::string_view space, absl::Span<const std::string> candidate_digests);

  // Stores `result` for `candidate` unless one is stored already, lists the candidate under its
  // task and counts the result in the progress of job `job_id` (candidates_completed or _failed),
  // all in one script: a coordinator killed midway leaves either all of it or nothing. True when
  // this call stored the result (attributed only: also when it replaced an unattributed one).
  absl::StatusOr<bool> PutIfAbsent(absl::string_view space, const forge::v1::Candidate& candidate,
                                   const forge::v1::Result& result, absl::string_view job_id);

  // A candidate as the scheduler kept it (forge:candidate:{digest}, written in the transaction
  // that leases it, so that the report, even to a restarted coordinator, stores the whole
  // candidate with its result); NotFound for one never leased.
  absl::StatusOr<forge::v1::Candidate> GetCandidate(absl::string_view candidate_digest);

  // Every result stored for a task on `space` (candidate digests sorted).
  absl::StatusOr<std::vector<forge::v1::Result>> ForTask(absl::string_view space,
                                                         absl::string_view task_digest);

  // Removes every result matching `filter` (InvalidArgument when it is empty) from every space,
  // with its task index entry; the (space, task)s that lost results, in key order. A result
  // stored while this runs may survive it.
  absl::StatusOr<std::vector<PurgedTask>> Purge(const ResultFilter& filter);

  // Keeps the cache at `max_results` results at most: removes the ones read least recently
  // (Redis's idle time of the key, which every lookup resets) with their task index entries.
  // Returns how many went. A bound, not a purge: loaded searches keep what they counted.
  absl::StatusOr<int64_t> EvictLeastRecentlyUsed(int64_t max_results);

 private:
  // GetMany without the attribution filter.
  absl::StatusOr<std::vector<std::optional<forge::v1::Result>>> ReadMany(
      absl::string_view space, absl::Span<const std::string> candidate_digests);

  RedisClient* const redis_;
  const bool attributed_only_;
};

}  // namespace forge::server

#endif  // FORGE_SERVER_RESULT_CACHE_H_
