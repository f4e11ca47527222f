// Private to compiler/search: the valid points of one task's search space with their candidates
// and priors, and the bookkeeping both searchers share (pending / recorded points, the best
// outcome, the saved state).
#ifndef FORGE_COMPILER_SEARCH_SEARCH_SPACE_H_
#define FORGE_COMPILER_SEARCH_SEARCH_SPACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/search/prior.h"
#include "compiler/search/search_state.pb.h"
#include "compiler/search/searcher.h"
#include "forge/v1/task.pb.h"

namespace forge::search {

// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014):
// its whole state is one word, which a saved search stores as one number.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t state) : state_(state) {}

  std::uint64_t Next();
  // Uniform in [0, n) for n >= 1, by multiply-shift (bias below n / 2^64).
  std::uint64_t Below(std::uint64_t n);

  std::uint64_t state() const { return state_; }
  void set_state(std::uint64_t state) { state_ = state; }

 private:
  std::uint64_t state_;
};

struct SpacePoint {
  forge::v1::Candidate candidate;
  int template_index = 0;  // templates counted across families, in order
  // For each parameter of the template, in its order: the position of the point's value in the
  // parameter's list of values.
  std::vector<int> value_indices;
  // The prior's predicted seconds: 0 for every point when the prior is off, +infinity for a point
  // it could not predict (ranked last).
  double prior_seconds = 0;
};

class SearchSpace {
 public:
  // Every point of every template of the generated families that apply to `task` (the ATen
  // fallback is the baseline, not a point) that passes the family's Validate, in family,
  // template and EnumeratePoints order; `prior` (may be null) ranks them from each point's
  // LaunchPlan (KernelFamily::Plan: no CUDA source is written). InvalidArgument for a task
  // without a digest or an empty arch.
  static absl::StatusOr<SearchSpace> Build(const forge::v1::KernelTask& task,
                                           absl::string_view target_arch,
                                           const CostModelPrior* prior);

  // Templates of the applicable families (some may have no valid point).
  int template_count() const { return template_count_; }
  const std::vector<SpacePoint>& points() const { return points_; }
  // The point whose candidate has `candidate_digest`.
  std::optional<int> Find(absl::string_view candidate_digest) const;
  // SHA-256 over the points' candidate digests in order: a saved state's point indices mean the
  // same points only in a space of the same digest (same generators, templates and validity).
  const std::string& digest() const { return digest_; }

 private:
  int template_count_ = 0;
  std::vector<SpacePoint> points_;
  absl::flat_hash_map<std::string, int> index_by_digest_;
  std::string digest_;
};

// What a searcher starts from: its space (ranked by the options' prior), its seed (the saved
// state's when restoring, so the restored searcher is the one that was saved) and the state.
struct SearchStart {
  SearchSpace space;
  std::uint64_t seed = 0;
  std::optional<SearchState> state;
};

// Checks the options (InvalidArgument naming the field), builds the space ranked by the options'
// prior (NotFound for an unknown prior_gpu), then parses and checks `saved_state` (empty: start
// afresh) against the searcher `kind`, the task, the arch and the space: InvalidArgument for a
// malformed state or one of another kind, task, arch or space.
absl::StatusOr<SearchStart> PrepareSearch(absl::string_view kind,
                                          const forge::v1::KernelTask& task,
                                          absl::string_view target_arch,
                                          const SearchOptions& options,
                                          absl::string_view saved_state);

// The bookkeeping of a searcher over a SearchSpace: which points are open, pending or recorded,
// the outcomes in recording order, the best one, and the state that Serialize saves. Subclasses
// choose the next open point and hear of every change of a point's status.
class SpaceSearcher : public Searcher {
 public:
  using Searcher::Propose;
  std::vector<forge::v1::Candidate> Propose(int max_candidates, Proposals which) final;
  absl::Status Record(absl::string_view candidate_digest, std::optional<double> speedup) final;
  absl::Status Release(absl::string_view candidate_digest) final;
  bool Exhausted() const final;
  std::vector<std::string> PendingDigests() const final;
  int64_t recorded() const final { return static_cast<int64_t>(outcomes_.size()); }
  int64_t pending() const final { return pending_count_; }
  int64_t cheap_points() const final { return cheap_points_; }
  int64_t cheap_recorded() const final { return cheap_recorded_; }
  int64_t cheap_open() const final { return cheap_open_; }
  std::optional<std::pair<std::string, double>> best() const final;
  std::string Serialize() const final;

  // Replays a state PrepareSearch checked: its outcomes in order, then its pending points, then
  // its random generator. InvalidArgument for an index out of range, a point listed twice or a
  // speedup that is not finite and positive.
  absl::Status Restore(const SearchState& state);

 protected:
  SpaceSearcher(std::string kind, const forge::v1::KernelTask& task, absl::string_view target_arch,
                SearchSpace space, std::uint64_t seed);

  // An open point that `which` admits to propose next; nullopt when there is none.
  virtual std::optional<int> Choose(Proposals which) = 0;
  // `point` became pending (proposed).
  virtual void OnPending(int /*point*/) {}
  // Pending `point` got its outcome: a speedup, or nullopt for a failure.
  virtual void OnRecorded(int /*point*/, std::optional<double> /*speedup*/) {}
  // Pending `point` was released: open again.
  virtual void OnReleased(int /*point*/) {}

  const SearchSpace& space() const { return space_; }
  SplitMix64& random() { return random_; }
  bool IsOpen(int point) const { return status_[point] == PointStatus::kOpen; }
  // Whether the point's candidate is cheap to compile (Proposals::kCheapOnly admits it).
  bool IsCheap(int point) const { return cheap_[point]; }
  int64_t open_points() const;
  // The best speedup recorded so far; 0 before the first success.
  double best_speedup() const { return best_point_ < 0 ? 0 : best_speedup_; }

 private:
  enum class PointStatus : std::uint8_t { kOpen, kPending, kRecorded };

  void MarkPending(int point);
  void RecordPoint(int point, std::optional<double> speedup);
  // The index of the pending point with `candidate_digest`; NotFound otherwise.
  absl::StatusOr<int> FindPending(absl::string_view candidate_digest) const;

  const std::string kind_;
  const std::string task_digest_;
  const std::string target_arch_;
  const std::uint64_t seed_;
  const SearchSpace space_;
  SplitMix64 random_;
  std::vector<PointStatus> status_;
  std::vector<bool> cheap_;  // by point: IsCheap
  int64_t pending_count_ = 0;
  int64_t cheap_points_ = 0;
  int64_t cheap_recorded_ = 0;
  int64_t cheap_open_ = 0;
  std::vector<std::pair<int, std::optional<double>>> outcomes_;  // in recording order
  int best_point_ = -1;
  double best_speedup_ = 0;
};

}  // namespace forge::search

#endif  // FORGE_COMPILER_SEARCH_SEARCH_SPACE_H_
