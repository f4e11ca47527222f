#include "server/lease_table.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace forge::server {

std::string LeaseTable::IndexKey(absl::string_view space, absl::string_view candidate_digest) {
  return absl::StrCat(space, "\n", candidate_digest);
}

void LeaseTable::Add(const std::string& lease_id, LeaseRecord lease) {
  for (const auto& [digest, entry] : lease.candidates) {
    leased_[IndexKey(lease.space, digest)] = lease_id;
  }
  leases_[lease_id] = std::move(lease);
}

LeaseRecord* LeaseTable::Find(absl::string_view lease_id) {
  auto it = leases_.find(std::string(lease_id));
  return it == leases_.end() ? nullptr : &it->second;
}

bool LeaseTable::Remove(const std::string& lease_id, const std::string& candidate_digest) {
  LeaseRecord* lease = Find(lease_id);
  if (lease == nullptr || lease->candidates.erase(candidate_digest) == 0) return false;
  auto indexed = leased_.find(IndexKey(lease->space, candidate_digest));
  if (indexed != leased_.end() && indexed->second == lease_id) leased_.erase(indexed);
  return true;
}

void LeaseTable::Drop(const std::string& lease_id) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  for (const auto& [digest, entry] : it->second.candidates) {
    auto indexed = leased_.find(IndexKey(it->second.space, digest));
    if (indexed != leased_.end() && indexed->second == lease_id) leased_.erase(indexed);
  }
  leases_.erase(it);
}

bool LeaseTable::Renew(const std::string& lease_id, absl::string_view worker_id,
                       absl::Time deadline) {
  LeaseRecord* lease = Find(lease_id);
  if (lease == nullptr || lease->worker_id != worker_id) return false;
  lease->deadline = deadline;
  return true;
}

bool LeaseTable::IsLeased(absl::string_view space, absl::string_view candidate_digest) const {
  return leased_.contains(IndexKey(space, candidate_digest));
}

std::vector<std::string> LeaseTable::Expired(absl::Time now) const {
  std::vector<std::string> expired;
  for (const auto& [id, lease] : leases_) {
    if (lease.deadline < now) expired.push_back(id);
  }
  return expired;
}

bool LeaseTable::HoldsWorkOf(absl::string_view job_id) const {
  for (const auto& [id, lease] : leases_) {
    for (const auto& [digest, entry] : lease.candidates) {
      if (entry.job_id == job_id) return true;
    }
  }
  return false;
}

std::vector<std::string> LeaseTable::OnlyFor(absl::string_view job_id) const {
  std::vector<std::string> ids;
  for (const auto& [id, lease] : leases_) {
    bool others = false;
    for (const auto& [digest, entry] : lease.candidates) others |= entry.job_id != job_id;
    if (!others) ids.push_back(id);
  }
  return ids;
}

int LeaseTable::ExpensiveHeldBy(absl::string_view worker_id) const {
  int held = 0;
  for (const auto& [id, lease] : leases_) {
    if (lease.worker_id != worker_id) continue;
    for (const auto& [digest, entry] : lease.candidates) held += entry.expensive ? 1 : 0;
  }
  return held;
}

std::map<std::string, int> LeaseTable::CandidatesPerWorker() const {
  std::map<std::string, int> per_worker;
  for (const auto& [id, lease] : leases_) {
    per_worker[lease.worker_id] += static_cast<int>(lease.candidates.size());
  }
  return per_worker;
}

void LeaseTable::NoteCancelled(const std::string& worker_id, const std::string& lease_id) {
  cancelled_[worker_id].push_back(lease_id);
}

std::vector<std::string> LeaseTable::TakeCancelled(const std::string& worker_id) {
  auto it = cancelled_.find(worker_id);
  if (it == cancelled_.end()) return {};
  std::vector<std::string> ids = std::move(it->second);
  cancelled_.erase(it);
  return ids;
}

}  // namespace forge::server
