#include "server/task_search.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging/logging.h"
#include "common/status/status_macros.h"
#include "compiler/search/candidate.h"

namespace forge::server {

using ::forge::v1::Candidate;
using ::forge::v1::Result;

bool MadeByThisBuild(const Candidate& candidate) {
  const codegen::KernelFamily* family = codegen::FindFamily(candidate.family());
  return family != nullptr && candidate.generator_version() == family->generator_version();
}

bool TaskSearch::WouldImprove(const std::string& candidate_digest, const Result& result) const {
  return candidate_digest != baseline.digest() && !counted.contains(candidate_digest) &&
         result.has_measurement() &&
         (!best.has_value() || result.measurement().median_us() < best->median_us());
}

TaskSearch::Applied TaskSearch::Apply(const std::string& candidate_digest, const Result& result,
                                      bool may_be_best) {
  Applied applied;
  if (candidate_digest == baseline.digest()) {
    baseline_leased = false;
    if (result.has_measurement()) {
      eager = result.measurement();
    } else {
      baseline_failure = result.failure();
    }
    return applied;
  }
  if (result.has_measurement() && eager.has_value() && result.measurement().median_us() > 0) {
    applied.speedup = eager->median_us() / result.measurement().median_us();
  }
  if (searcher->Record(candidate_digest, applied.speedup).ok()) dirty = true;
  if (!counted.insert(candidate_digest).second) return applied;
  if (result.has_measurement()) {
    ++measured;
  } else {
    ++failed;
    ++failures[result.failure().stage()];
  }
  applied.improved = may_be_best && result.has_measurement() &&
                     (!best.has_value() || result.measurement().median_us() < best->median_us());
  if (applied.improved) best = result.measurement();
  return applied;
}

void TaskSearch::Release(const std::string& candidate_digest) {
  if (candidate_digest == baseline.digest()) {
    baseline_leased = false;
    return;
  }
  if (searcher->Release(candidate_digest).ok()) dirty = true;
}

void TaskSearch::ReleaseReady() {
  for (const Candidate& candidate : ready) (void)searcher->Release(candidate.digest());
  if (!ready.empty()) dirty = true;
  ready.clear();
}

TaskProgress TaskSearch::Progress() const {
  TaskProgress progress;
  progress.baseline_in = eager.has_value() || baseline_failure.has_value();
  progress.baseline_failed = baseline_failure.has_value();
  if (eager.has_value()) progress.eager_us = eager->median_us();
  if (best.has_value()) progress.best_percent_of_floor = best->percent_of_floor();
  progress.exhausted = searcher->Exhausted();
  progress.recorded = searcher->recorded();
  progress.in_flight = in_flight();
  return progress;
}

void TaskSearch::Summarize(forge::v1::TaskResults& out) const {
  out.set_candidates_measured(static_cast<int32_t>(measured));
  out.set_candidates_failed(static_cast<int32_t>(failed));
  for (const auto& [stage, count] : failures) {
    forge::v1::FailureCount* counted_failures = out.add_failures_by_stage();
    counted_failures->set_stage(stage);
    counted_failures->set_count(count);
  }
  const bool baseline_wins =
      eager.has_value() && (!best.has_value() || best->median_us() >= eager->median_us());
  if (baseline_wins) {
    *out.mutable_best_candidate() = baseline;
    *out.mutable_best() = *eager;
  } else if (best.has_value()) {
    *out.mutable_best_candidate() = best_candidate;
    *out.mutable_best() = *best;
  }
  if (out.has_best() && eager.has_value()) out.mutable_best()->set_eager_median_us(eager->median_us());
}

std::string TaskSearches::Key(absl::string_view space, absl::string_view task_digest) {
  return absl::StrCat(space, "\n", task_digest);
}

TaskSearch* TaskSearches::Find(absl::string_view space, absl::string_view task_digest) {
  auto it = searches_.find(Key(space, task_digest));
  return it == searches_.end() ? nullptr : &it->second;
}

absl::Status TaskSearches::Forget(absl::string_view space, absl::string_view task_digest) {
  FORGE_RETURN_IF_ERROR(store_->DropSearchState(space, task_digest));
  searches_.erase(Key(space, task_digest));
  return absl::OkStatus();
}

absl::StatusOr<TaskSearch*> TaskSearches::Get(const std::string& space, const std::string& arch,
                                              const forge::v1::KernelTask& task,
                                              const LeaseTable& leases, ApplyFn apply) {
  const std::string key = Key(space, task.digest());
  if (auto it = searches_.find(key); it != searches_.end()) return &it->second;

  TaskSearch search;
  search.space = space;
  search.spec = task;
  search.spec.clear_occurrences();
  search.spec.clear_baseline_share();
  FORGE_ASSIGN_OR_RETURN(const std::string snapshot, store_->LoadSearchState(space, task.digest()));
  FORGE_ASSIGN_OR_RETURN(search.baseline, search::BaselineCandidate(task, arch));
  absl::StatusOr<std::unique_ptr<search::Searcher>> searcher =
      search::CreateMctsSearcher(task, arch, options_, snapshot);
  if (absl::IsInvalidArgument(searcher.status()) && !snapshot.empty()) {
    // A snapshot of another search space (the generators changed since it was saved) or one that
    // does not parse: it only held the search's progress, and the results below restore its
    // counts and bests, so the search starts over rather than the job (or the coordinator) fail.
    LogWithFields(*GetLogger("scheduler"), spdlog::level::warn,
                  "saved search state dropped, the search starts over",
                  {{"task", task.digest()}, {"reason", std::string(searcher.status().message())}});
    FORGE_RETURN_IF_ERROR(store_->DropSearchState(space, task.digest()));
    searcher = search::CreateMctsSearcher(task, arch, options_, "");
  }
  FORGE_ASSIGN_OR_RETURN(search.searcher, std::move(searcher));

  FORGE_ASSIGN_OR_RETURN(std::vector<Result> known, results_->ForTask(space, task.digest()));
  TaskSearch& stored = searches_[key] = std::move(search);
  // The baseline first: every other result's speedup is relative to it.
  std::stable_partition(known.begin(), known.end(), [&](const Result& result) {
    return ResultCandidateDigest(result) == stored.baseline.digest();
  });
  for (const Result& result : known) {
    FORGE_RETURN_IF_ERROR(apply(stored, ResultCandidateDigest(result), result));
  }
  // Pending in the snapshot but held by no lease: proposed or leased before the restart.
  for (const std::string& digest : stored.searcher->PendingDigests()) {
    if (leases.IsLeased(space, digest)) continue;
    (void)stored.searcher->Release(digest);
    stored.dirty = true;
  }
  return &stored;
}

void TaskSearches::ReleaseStranded(const LeaseTable& leases) {
  for (auto& [key, task] : searches_) {
    std::set<std::string> ready;
    for (const Candidate& candidate : task.ready) ready.insert(candidate.digest());
    for (const std::string& digest : task.searcher->PendingDigests()) {
      if (ready.contains(digest) || leases.IsLeased(task.space, digest)) continue;
      GetLogger("scheduler")->warn("releasing stranded candidate {} of task {}", digest,
                                   task.spec.digest());
      (void)task.searcher->Release(digest);
      task.dirty = true;
    }
    if (task.baseline_leased && !leases.IsLeased(task.space, task.baseline.digest())) {
      task.baseline_leased = false;
    }
  }
}

absl::Status TaskSearches::Snapshot(bool all) {
  std::vector<SchedulerStore::SearchState> states;
  std::vector<TaskSearch*> written;
  for (auto& [key, task] : searches_) {
    if (!all && !task.dirty) continue;
    states.push_back({task.space, task.spec.digest(), task.searcher->Serialize()});
    written.push_back(&task);
  }
  if (states.empty()) return absl::OkStatus();
  FORGE_RETURN_IF_ERROR(store_->SaveSearchStates(states));
  for (TaskSearch* task : written) task->dirty = false;
  return absl::OkStatus();
}

size_t TaskSearches::frontier() const {
  size_t frontier = 0;
  for (const auto& [key, task] : searches_) frontier += task.ready.size();
  return frontier;
}

}  // namespace forge::server
