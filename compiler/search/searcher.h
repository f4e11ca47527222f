// The search over one kernel task's candidates: which (family, template, schedule point) to try
// next, given the speedups measured so far.
//
// A Searcher proposes candidates it has not proposed before; each stays pending (carrying a
// virtual loss, so one batch can feed many workers without proposing near-duplicates) until its
// outcome is recorded or it is released (its lease expired unevaluated), after which it may be
// proposed again. Rewards are speedups over the task's ATen baseline; a failed candidate records
// no speedup. The whole state, pending set included, serializes to bytes, so a restarted
// coordinator continues the search where the old one stopped.
//
// The ATen fallback is not part of the search space: it is the baseline every task times first
// (BaselineCandidate in candidate.h).
#ifndef FORGE_COMPILER_SEARCH_SEARCHER_H_
#define FORGE_COMPILER_SEARCH_SEARCHER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/cost/learned/cost_predictor.h"
#include "forge/v1/task.pb.h"

namespace forge::search {

struct SearchOptions {
  // Seeds every random choice: the same options, task and sequence of calls give the same
  // proposals.
  uint64_t seed = 1;
  // UCT exploration constant. Rewards are speedups; MCTS weighs this against mean speedups
  // normalized to [0, 1] between the worst and the best outcome so far.
  double exploration = 1.0;
  // Progressive widening: a node with n visits may have at most ceil(widening_constant * n ^
  // widening_exponent) children.
  double widening_constant = 2.0;
  double widening_exponent = 0.5;
  // Each pending candidate counts as this many visits with reward 0 on its path.
  double virtual_loss = 1.0;
  // GPU (common/arch name, e.g. "H200") whose figures the cost-model prior uses.
  std::string prior_gpu = "H200";
  // False: no cost-model prior; every point ranks equal and expansion follows the seeded tie
  // order alone (the benchmark's ablation of the prior).
  bool use_cost_model_prior = true;
  // The learned performance model over the analytic prior (compiler/cost/learned/
  // cost_predictor.h; it falls back to the analytic prediction without a usable model); null:
  // the analytic prior alone. Must outlive the searches. Read when a search space is built.
  const cost::CostPredictor* learned_prior = nullptr;
};

// Which open points a proposal may take.
enum class Proposals {
  kAny,        // every open point
  kCheapOnly,  // open points whose candidate is cheap to compile (not IsExpensive: candidate.h)
};

class Searcher {
 public:
  virtual ~Searcher() = default;

  // Up to `max_candidates` distinct candidates among the points `which` admits, none proposed
  // before (unless released), each now pending, chosen as the searcher chooses among those points
  // alone. Fewer, or none, when no such unproposed valid point is left.
  virtual std::vector<forge::v1::Candidate> Propose(int max_candidates, Proposals which) = 0;
  std::vector<forge::v1::Candidate> Propose(int max_candidates) {
    return Propose(max_candidates, Proposals::kAny);
  }

  // The outcome of a pending candidate: its speedup over the baseline (> 0), or nullopt when it
  // failed. NotFound for a digest that is not pending.
  virtual absl::Status Record(absl::string_view candidate_digest,
                              std::optional<double> speedup) = 0;

  // A pending candidate that was not evaluated: it may be proposed again. NotFound when not
  // pending.
  virtual absl::Status Release(absl::string_view candidate_digest) = 0;

  // True when every valid point has been proposed and recorded (nothing left to try).
  virtual bool Exhausted() const = 0;

  // The pending candidates' digests, sorted: after a restart the coordinator releases those no
  // live lease holds and records those the results cache already answers.
  virtual std::vector<std::string> PendingDigests() const = 0;

  virtual int64_t recorded() const = 0;  // outcomes recorded
  virtual int64_t pending() const = 0;   // proposed, not yet recorded or released
  // The cheap points (Proposals::kCheapOnly's): in the space, with an outcome recorded, and open
  // (neither pending nor recorded). What the scheduler's cheap-first rule reads.
  virtual int64_t cheap_points() const = 0;
  virtual int64_t cheap_recorded() const = 0;
  virtual int64_t cheap_open() const = 0;
  // The best speedup recorded so far and its candidate digest; nullopt before the first success.
  virtual std::optional<std::pair<std::string, double>> best() const = 0;

  // The whole state; Restore* with the same task and target arch continues from it.
  virtual std::string Serialize() const = 0;
};

// Monte Carlo Tree Search over the decision sequence (family and template, then each schedule
// parameter in the template's order), with progressive widening, the cost model's prediction as
// the prior that orders expansion, and virtual loss for pending candidates. `saved_state` is a
// Serialize() of an earlier MCTS searcher of the same task and arch, or empty to start afresh.
// InvalidArgument for a malformed state or one of another task/arch.
absl::StatusOr<std::unique_ptr<Searcher>> CreateMctsSearcher(const forge::v1::KernelTask& task,
                                                             absl::string_view target_arch,
                                                             const SearchOptions& options,
                                                             absl::string_view saved_state = "");

// Uniform random sampling without replacement over the same valid points: the baseline MCTS is
// compared against at equal budget (benchmarks/search).
absl::StatusOr<std::unique_ptr<Searcher>> CreateRandomSearcher(const forge::v1::KernelTask& task,
                                                               absl::string_view target_arch,
                                                               const SearchOptions& options,
                                                               absl::string_view saved_state = "");

}  // namespace forge::search

#endif  // FORGE_COMPILER_SEARCH_SEARCHER_H_
