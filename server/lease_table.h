// The leases out with workers: which candidates each holds, for which job and task, in which
// space, until when.
//
// Contract. A lease belongs to one worker and one space and holds candidates by digest, each for a
// (job, task). A candidate of a space is held by at most one lease: IsLeased answers from an index
// kept with the table (Add indexes a lease's candidates, Remove and Drop unindex them; Drop only
// unindexes candidates still indexed to the dropped lease, so a candidate leased again elsewhere
// stays held). Heartbeats renew the leases they name (Renew refuses a lease of another worker);
// a lease past its deadline is Expired. Leases dropped because their job was cancelled are noted
// per worker until its next heartbeat tells it (NoteCancelled, TakeCancelled).
//
// The table says nothing about the searches: whoever drops a lease puts its candidates back.
// In memory only: SchedulerStore persists the leases, and Add puts them back after a restart.
// Not thread-safe: the Scheduler's mutex guards it.
#ifndef FORGE_SERVER_LEASE_TABLE_H_
#define FORGE_SERVER_LEASE_TABLE_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace forge::server {

struct LeaseEntry {
  std::string job_id;
  std::string task_digest;
  // An expensive compile (search::IsExpensive: nvcc), counted by the scheduler's cheap-first rule.
  bool expensive = false;
};

struct LeaseRecord {
  std::string worker_id;
  std::string space;
  absl::Time deadline;
  std::map<std::string, LeaseEntry> candidates;  // by candidate digest
};

class LeaseTable {
 public:
  // Adds (or replaces) the lease and indexes its candidates.
  void Add(const std::string& lease_id, LeaseRecord lease);
  // nullptr when there is no such lease (expired, reported in full, or never handed out).
  LeaseRecord* Find(absl::string_view lease_id);
  // Removes one candidate from the lease and the index (reported or returned); false when the
  // lease does not hold it.
  bool Remove(const std::string& lease_id, const std::string& candidate_digest);
  // Removes the lease; its candidates are no longer held.
  void Drop(const std::string& lease_id);

  // Moves the lease's deadline when `worker_id` holds it; false otherwise (expired, or another
  // worker's).
  bool Renew(const std::string& lease_id, absl::string_view worker_id, absl::Time deadline);

  bool IsLeased(absl::string_view space, absl::string_view candidate_digest) const;
  // Leases whose deadline is before `now`, by id.
  std::vector<std::string> Expired(absl::Time now) const;
  // True when some lease holds a candidate for the job.
  bool HoldsWorkOf(absl::string_view job_id) const;
  // Leases whose every candidate is for the job (a lease without candidates included), by id.
  std::vector<std::string> OnlyFor(absl::string_view job_id) const;
  // Candidates held per worker id.
  std::map<std::string, int> CandidatesPerWorker() const;
  // Expensive candidates (LeaseEntry::expensive) the worker's leases hold.
  int ExpensiveHeldBy(absl::string_view worker_id) const;

  void NoteCancelled(const std::string& worker_id, const std::string& lease_id);
  // The leases noted cancelled for the worker since the last call, which forgets them.
  std::vector<std::string> TakeCancelled(const std::string& worker_id);

  const std::map<std::string, LeaseRecord>& leases() const { return leases_; }
  size_t leased_candidates() const { return leased_.size(); }

 private:
  static std::string IndexKey(absl::string_view space, absl::string_view candidate_digest);

  std::map<std::string, LeaseRecord> leases_;  // by lease id
  // (space, candidate digest) -> lease id, for every leased candidate.
  std::map<std::string, std::string> leased_;
  std::map<std::string, std::vector<std::string>> cancelled_;  // by worker id
};

}  // namespace forge::server

#endif  // FORGE_SERVER_LEASE_TABLE_H_
