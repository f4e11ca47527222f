// Task searches: the search strategy of one (space, task), shared by every job that contains the
// task, and the set of them with their snapshots.
//
// A TaskSearch holds the task's searcher (compiler/search MCTS), its baseline (the ATen fallback
// candidate, timed first: every reward is eager time / candidate time), the counts and best of
// the results taken in, and the ready queue: candidates proposed and not yet leased.
//
// Contract of TaskSearch::Apply. A result of the baseline sets the eager time (or the baseline
// failure). Any other result is recorded in the searcher (a candidate the searcher no longer
// holds pending, released after an expired lease or restored from an older snapshot, is skipped
// there: the cache keeps the result and the search records it when it proposes the candidate
// again) and counted once per candidate; a measurement faster than the best so far becomes the
// best (the caller fetches its whole candidate). Apply returns whether the best improved and the
// speedup over eager, when both times are known.
//
// Contract of TaskSearches. Get loads a search on first use: the searcher from its snapshot in the
// SchedulerStore (a snapshot that no longer fits, saved by other generators or damaged, is dropped
// with a warning and the search starts over), then every result the cache holds for the task,
// baseline first, through the caller's `apply` (counts and bests come from the results, so a
// snapshot older than the last results loses nothing), then the pending candidates no lease holds
// are released. Snapshot writes the searchers changed since the last snapshot (or all).
//
// Not thread-safe: the Scheduler's mutex guards them.
#ifndef FORGE_SERVER_TASK_SEARCH_H_
#define FORGE_SERVER_TASK_SEARCH_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/search/searcher.h"
#include "forge/v1/service.pb.h"
#include "forge/v1/task.pb.h"
#include "server/job_budget.h"
#include "server/lease_table.h"
#include "server/result_cache.h"
#include "server/scheduler_store.h"

namespace forge::server {

// Whether this build's generators made `candidate` (its family exists here at the same generator
// version), so that the kernel can be generated again from it.
bool MadeByThisBuild(const forge::v1::Candidate& candidate);

struct TaskSearch {
  struct Applied {
    bool improved = false;          // the result is the task's new best
    std::optional<double> speedup;  // eager time / its time, when both are known
  };

  // Takes a result into the counts and the searcher. It becomes the task's best only when it is
  // the fastest measurement so far and `may_be_best`: the caller checked that this build can
  // regenerate its candidate (MadeByThisBuild; the results cache spans generator versions).
  Applied Apply(const std::string& candidate_digest, const forge::v1::Result& result,
                bool may_be_best);
  // Whether Apply would make the result the new best if it may be: the caller looks the
  // candidate up only then.
  bool WouldImprove(const std::string& candidate_digest, const forge::v1::Result& result) const;
  // Puts back a candidate that was leased and not evaluated: the search may propose it again.
  void Release(const std::string& candidate_digest);
  // Puts every ready candidate back into the searcher.
  void ReleaseReady();
  // Proposed candidates out with workers: pending in the searcher, not waiting in `ready`.
  int64_t in_flight() const {
    return searcher->pending() - static_cast<int64_t>(ready.size());
  }
  // What the job budgets read.
  TaskProgress Progress() const;
  // Sets the counts and the best of `out`. The ATen baseline is a candidate too: where nothing
  // generated beats it, it is the best, so a plan never runs a task slower than eager does.
  void Summarize(forge::v1::TaskResults& out) const;

  std::string space;
  forge::v1::KernelTask spec;  // without the per-model fields
  std::unique_ptr<search::Searcher> searcher;
  forge::v1::Candidate baseline;
  bool baseline_leased = false;
  std::optional<forge::v1::Measurement> eager;
  std::optional<forge::v1::Failure> baseline_failure;
  std::optional<forge::v1::Measurement> best;
  forge::v1::Candidate best_candidate;
  std::set<std::string> counted;  // candidates whose results the counts below include
  int64_t measured = 0;
  int64_t failed = 0;
  std::map<forge::v1::FailureStage, int> failures;
  std::deque<forge::v1::Candidate> ready;  // proposed, not yet leased
  bool dirty = false;                      // searcher changed since the last snapshot
};

class TaskSearches {
 public:
  // Takes a known result into a search being loaded (the Scheduler's result path).
  using ApplyFn = absl::FunctionRef<absl::Status(TaskSearch& task, const std::string& digest,
                                                 const forge::v1::Result& result)>;

  // The store and the cache must outlive this.
  TaskSearches(SchedulerStore* store, ResultCache* results, search::SearchOptions options)
      : store_(store), results_(results), options_(std::move(options)) {}

  // The search of (space, task), loaded on first use (see above) for target `arch`.
  absl::StatusOr<TaskSearch*> Get(const std::string& space, const std::string& arch,
                                  const forge::v1::KernelTask& task, const LeaseTable& leases,
                                  ApplyFn apply);
  // The search if it is loaded; nullptr otherwise.
  TaskSearch* Find(absl::string_view space, absl::string_view task_digest);
  // Drops the search and its snapshot: the next Get starts it over from the results the cache
  // holds then (after results were purged). Its ready queue goes with it; candidates out on
  // leases may still be reported (Apply takes results of candidates the searcher does not hold).
  absl::Status Forget(absl::string_view space, absl::string_view task_digest);

  // Drops every search from memory (not their snapshots): the next Get loads each again from
  // Redis, as after a restart (the Scheduler's reconciliation after a Redis rollback).
  void Clear() { searches_.clear(); }

  // Releases pending candidates that are neither ready nor leased: what a call that failed
  // midway (Redis down) had proposed or picked; they would otherwise hold their task open forever.
  void ReleaseStranded(const LeaseTable& leases);
  // Writes the searchers changed since their last snapshot, or every one when `all`.
  absl::Status Snapshot(bool all);

  std::map<std::string, TaskSearch>& all() { return searches_; }
  size_t size() const { return searches_.size(); }
  // Candidates waiting in ready queues.
  size_t frontier() const;

 private:
  static std::string Key(absl::string_view space, absl::string_view task_digest);

  SchedulerStore* const store_;
  ResultCache* const results_;
  const search::SearchOptions options_;
  std::map<std::string, TaskSearch> searches_;  // by Key
};

}  // namespace forge::server

#endif  // FORGE_SERVER_TASK_SEARCH_H_
