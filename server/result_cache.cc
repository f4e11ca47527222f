#include "server/result_cache.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/redis/transaction.h"
#include "common/status/status_macros.h"
#include "server/redis_keys.h"

namespace forge::server {
namespace {

// Sets the result unless present, indexes it under its task and counts it in the job's progress.
// KEYS: result key, task index, job hash. ARGV: result bytes, candidate digest, progress field to
// increment. Returns 1 when stored, 0 when a result was there.
constexpr char kPutScript[] = R"lua(
if redis.call('SETNX', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SADD', KEYS[2], ARGV[2])
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('HINCRBY', KEYS[3], ARGV[3], 1) end
return 1
)lua";

// Replaces the stored result when it is still `expected` (an unattributed result an attributed one
// replaces), indexes and counts like kPutScript. KEYS: result key, task index, job hash. ARGV:
// expected bytes, result bytes, candidate digest, progress field. Returns 1 when replaced.
constexpr char kReplaceScript[] = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('HINCRBY', KEYS[3], ARGV[4], 1) end
return 1
)lua";

absl::StatusOr<forge::v1::Result> ParseResult(const std::string& key, const RedisReply& reply) {
  forge::v1::Result result;
  if (!reply.is_bulk_string() || !result.ParseFromString(reply.str())) {
    return absl::DataLossError(absl::StrCat(key, ": not a forge.v1.Result"));
  }
  return result;
}

}  // namespace

bool ResultFilter::Matches(const forge::v1::Result& result) const {
  if (!worker_identity.empty() && result.worker_identity() != worker_identity) return false;
  if (unattributed && !result.worker_identity().empty()) return false;
  return candidate_digest.empty() || ResultCandidateDigest(result) == candidate_digest;
}

const std::string& ResultCandidateDigest(const forge::v1::Result& result) {
  return result.has_measurement() ? result.measurement().candidate_digest()
                                  : result.failure().candidate_digest();
}

absl::StatusOr<std::vector<std::optional<forge::v1::Result>>> ResultCache::GetMany(
    absl::string_view space, absl::Span<const std::string> candidate_digests) {
  FORGE_ASSIGN_OR_RETURN(std::vector<std::optional<forge::v1::Result>> results,
                         ReadMany(space, candidate_digests));
  if (attributed_only_) {
    for (std::optional<forge::v1::Result>& result : results) {
      if (result.has_value() && result->worker_identity().empty()) result.reset();
    }
  }
  return results;
}

absl::StatusOr<std::vector<std::optional<forge::v1::Result>>> ResultCache::ReadMany(
    absl::string_view space, absl::Span<const std::string> candidate_digests) {
  std::vector<std::optional<forge::v1::Result>> results(candidate_digests.size());
  if (candidate_digests.empty()) return results;
  std::vector<std::string> command = {"MGET"};
  for (const std::string& digest : candidate_digests) {
    command.push_back(keys::Result(space, digest));
  }
  absl::StatusOr<RedisReply> reply = redis_->Command(command);
  if (!reply.ok()) return Annotate(reply.status(), "reading the results cache");
  if (!reply->is_array() || reply->elements().size() != candidate_digests.size()) {
    return absl::InternalError(
        absl::StrCat("reading the results cache: unexpected reply ", reply->DebugString()));
  }
  for (size_t i = 0; i < results.size(); ++i) {
    const RedisReply& element = reply->elements()[i];
    if (element.is_nil()) continue;
    FORGE_ASSIGN_OR_RETURN(results[i],
                           ParseResult(keys::Result(space, candidate_digests[i]), element));
  }
  return results;
}

absl::StatusOr<bool> ResultCache::PutIfAbsent(absl::string_view space,
                                              const forge::v1::Candidate& candidate,
                                              const forge::v1::Result& result,
                                              absl::string_view job_id) {
  const std::string key = keys::Result(space, candidate.digest());
  const std::string index = keys::TaskResults(space, candidate.task_digest());
  const std::string bytes = result.SerializeAsString();
  const std::string counter(result.has_measurement() ? keys::job_field::kCandidatesCompleted
                                                     : keys::job_field::kCandidatesFailed);
  auto run = [&](std::vector<std::string> command) -> absl::StatusOr<bool> {
    absl::StatusOr<RedisReply> reply = redis_->Command(command);
    if (!reply.ok()) return Annotate(reply.status(), absl::StrCat("storing ", key));
    if (!reply->is_integer()) {
      return absl::InternalError(absl::StrCat("storing ", key, ": unexpected reply ",
                                              reply->DebugString()));
    }
    return reply->integer() == 1;
  };
  FORGE_ASSIGN_OR_RETURN(const bool stored,
                         run({"EVAL", kPutScript, "3", key, index, keys::Job(job_id), bytes,
                              candidate.digest(), counter}));
  if (stored || !attributed_only_ || result.worker_identity().empty()) return stored;
  // An attributed result replaces an unattributed one (which GetMany does not serve), if that is
  // still what is stored when the script runs.
  absl::StatusOr<RedisReply> stored_bytes = redis_->Command({"GET", key});
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("reading ", key), stored_bytes));
  if (!stored_bytes->is_bulk_string()) return false;
  FORGE_ASSIGN_OR_RETURN(const forge::v1::Result old, ParseResult(key, *stored_bytes));
  if (!old.worker_identity().empty()) return false;
  return run({"EVAL", kReplaceScript, "3", key, index, keys::Job(job_id), stored_bytes->str(),
              bytes, candidate.digest(), counter});
}

absl::StatusOr<std::vector<forge::v1::Result>> ResultCache::ForTask(absl::string_view space,
                                                                    absl::string_view task_digest) {
  const std::string index = keys::TaskResults(space, task_digest);
  absl::StatusOr<RedisReply> members = redis_->Command({"SMEMBERS", index});
  if (!members.ok()) return Annotate(members.status(), absl::StrCat("reading ", index));
  std::vector<std::string> digests;
  for (const RedisReply& member : members->elements()) digests.push_back(member.str());
  std::sort(digests.begin(), digests.end());
  FORGE_ASSIGN_OR_RETURN(std::vector<std::optional<forge::v1::Result>> found,
                         GetMany(space, digests));
  std::vector<forge::v1::Result> results;
  for (std::optional<forge::v1::Result>& result : found) {
    if (result.has_value()) results.push_back(*std::move(result));
  }
  return results;
}

absl::StatusOr<std::vector<PurgedTask>> ResultCache::Purge(const ResultFilter& filter) {
  if (filter.empty()) {
    return absl::InvalidArgumentError(
        "purging results: name a worker identity, unattributed results, a candidate or a task");
  }
  std::string task = filter.task_digest;
  if (task.empty() && !filter.candidate_digest.empty()) {
    // A candidate's results are indexed under its task, which its leased record names.
    absl::StatusOr<forge::v1::Candidate> candidate = GetCandidate(filter.candidate_digest);
    if (absl::IsNotFound(candidate.status())) return std::vector<PurgedTask>{};
    FORGE_RETURN_IF_ERROR(candidate.status());
    task = candidate->task_digest();
  }
  // forge:task_results:{space}:{task}: the space may hold ':' ("predicted:H200"), a digest not.
  FORGE_ASSIGN_OR_RETURN(
      const std::vector<std::string> indexes,
      ScanKeys(*redis_, absl::StrCat(keys::kTaskResultsPrefix, "*:", task.empty() ? "*" : task)));
  std::vector<PurgedTask> purged;
  for (const std::string& index : indexes) {
    const absl::string_view rest = absl::string_view(index).substr(keys::kTaskResultsPrefix.size());
    const size_t colon = rest.rfind(':');
    if (colon == absl::string_view::npos) continue;
    PurgedTask touched{.space = std::string(rest.substr(0, colon)),
                       .task_digest = std::string(rest.substr(colon + 1)),
                       .results = 0};
    std::vector<std::string> digests;
    if (filter.candidate_digest.empty()) {
      absl::StatusOr<RedisReply> members = redis_->Command({"SMEMBERS", index});
      FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("reading ", index), members));
      for (const RedisReply& member : members->elements()) digests.push_back(member.str());
    } else {
      digests.push_back(filter.candidate_digest);
    }
    FORGE_ASSIGN_OR_RETURN(const std::vector<std::optional<forge::v1::Result>> results,
                           ReadMany(touched.space, digests));
    std::vector<std::string> remove = {"DEL"};
    std::vector<std::string> unindex = {"SREM", index};
    for (size_t i = 0; i < digests.size(); ++i) {
      if (!results[i].has_value() || !filter.Matches(*results[i])) continue;
      remove.push_back(keys::Result(touched.space, digests[i]));
      unindex.push_back(digests[i]);
    }
    touched.results = static_cast<int64_t>(unindex.size()) - 2;
    if (touched.results == 0) continue;
    FORGE_RETURN_IF_ERROR(Transaction(*redis_, absl::StrCat("purging results of ", index),
                                      {std::move(remove), std::move(unindex)}));
    purged.push_back(std::move(touched));
  }
  return purged;
}

absl::StatusOr<int64_t> ResultCache::EvictLeastRecentlyUsed(int64_t max_results) {
  FORGE_ASSIGN_OR_RETURN(std::vector<std::string> stored,
                         ScanKeys(*redis_, absl::StrCat(keys::kResultPrefix, "*")));
  const int64_t excess = static_cast<int64_t>(stored.size()) - max_results;
  if (max_results <= 0 || excess <= 0) return 0;
  std::vector<std::vector<std::string>> idle;
  for (const std::string& key : stored) idle.push_back({"OBJECT", "IDLETIME", key});
  absl::StatusOr<std::vector<RedisReply>> seconds = redis_->Pipeline(idle);
  if (!seconds.ok()) return Annotate(seconds.status(), "reading the results' idle times");
  std::vector<std::pair<int64_t, std::string>> by_idle;  // most idle first
  for (size_t i = 0; i < stored.size(); ++i) {
    by_idle.emplace_back((*seconds)[i].integer(), std::move(stored[i]));
  }
  std::sort(by_idle.begin(), by_idle.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  int64_t evicted = 0;
  for (int64_t i = 0; i < excess; ++i) {
    // forge:result:{space}:{candidate}: the candidate record names its task.
    const std::string& key = by_idle[i].second;
    const size_t colon = key.rfind(':');
    const size_t start = keys::kResultPrefix.size();
    const std::string space = key.substr(start, colon - start);
    const std::string digest = key.substr(colon + 1);
    std::vector<std::vector<std::string>> commands = {{"DEL", key}};
    if (absl::StatusOr<forge::v1::Candidate> candidate = GetCandidate(digest); candidate.ok()) {
      commands.push_back({"SREM", keys::TaskResults(space, candidate->task_digest()), digest});
    }
    FORGE_RETURN_IF_ERROR(
        Transaction(*redis_, absl::StrCat("evicting ", key), std::move(commands)));
    ++evicted;
  }
  return evicted;
}

absl::StatusOr<forge::v1::Candidate> ResultCache::GetCandidate(absl::string_view candidate_digest) {
  const std::string key = keys::Candidate(candidate_digest);
  absl::StatusOr<RedisReply> reply = redis_->Command({"GET", key});
  if (!reply.ok()) return Annotate(reply.status(), absl::StrCat("reading ", key));
  if (reply->is_nil()) return absl::NotFoundError(absl::StrCat(key, " not found"));
  forge::v1::Candidate candidate;
  if (!candidate.ParseFromString(reply->str())) {
    return absl::DataLossError(absl::StrCat(key, ": not a forge.v1.Candidate"));
  }
  return candidate;
}

}  // namespace forge::server
