// Monte Carlo Tree Search over a task's valid points.
//
// The tree: the root's children are the templates (with their family); below a template, one
// level per schedule parameter in the template's order, one child per value that still leads to
// a valid point; the leaves are the points. Subtrees without valid points do not exist, so every
// descent ends at a proposable point.
//
// Each node keeps the outcomes recorded below it (count and summed speedup, failures adding 0),
// its pending candidates, its open (proposable) leaves, and its prior: the best predicted time
// among its leaves. Children are ranked by prior, ties by a seeded random key.
//
// One proposal is one descent. A proposal of cheap points only (Proposals::kCheapOnly) descends the
// same way, counting as open only the leaves it admits. At a node with n visits (recorded outcomes plus virtual_loss per
// pending candidate), progressive widening admits the first ceil(widening_constant *
// n ^ widening_exponent) children in rank order; children without open leaves are skipped, and
// when none of the admitted ones is open, the first open child beyond them is admitted. The
// admitted open child with the highest
//   value + exploration * sqrt(ln(n + 1) / (n_child + 1))
// is taken, the earlier in rank order on a tie (so with nothing recorded the prior decides).
// A value is a mean speedup normalized to [0, 1] between the worst and the best outcome recorded
// so far (pending candidates count as visits with reward 0), so the exploration constant means
// the same on every task whatever its speedups. A child's value blends its own mean with the
// mean of every outcome whose point has the child's parameter value, wherever in the tree
// (RAVE: Gelly and Silver, "Combining online and offline knowledge in UCT", 2007): schedule
// parameters act mostly independently of one another, so a value that paid off under one
// subtree predicts how it does under its siblings long before each sibling has outcomes of its
// own. The blend weighs the shared mean by sqrt(k / (3 n_child + k)); an unvisited child without
// shared outcomes takes the mean of its nearest ancestor with outcomes (first-play value).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include "common/status/status_macros.h"
#include "compiler/search/search_space.h"
#include "compiler/search/searcher.h"

namespace forge::search {
namespace {

constexpr char kMctsKind[] = "mcts";
// RAVE's equivalence parameter k: the child visits at which its own mean and the shared one
// weigh about equally (k / 3 visits give the shared mean weight 1/sqrt(2)).
constexpr double kSharedValueEquivalence = 10;

// Outcomes recorded for a set of points.
struct Outcomes {
  int64_t count = 0;
  double speedup_sum = 0;
};

struct Node {
  int parent = -1;
  int point = -1;             // the leaf's point; -1 for inner nodes
  int parameter_value = -1;   // index into parameter_values_; -1 for the root and templates
  std::vector<int> children;  // in rank order
  double prior_seconds = std::numeric_limits<double>::infinity();  // best among the leaves below
  std::uint64_t tie_key = 0;
  int64_t open = 0;     // leaves below that may be proposed
  int64_t open_cheap = 0;  // of them, those Proposals::kCheapOnly admits
  int64_t pending = 0;  // candidates pending below
  Outcomes outcomes;    // recorded below
};

class MctsSearcher final : public SpaceSearcher {
 public:
  MctsSearcher(const forge::v1::KernelTask& task, absl::string_view target_arch,
               const SearchOptions& options, SearchStart start)
      : SpaceSearcher(kMctsKind, task, target_arch, std::move(start.space), start.seed),
        options_(options) {
    BuildTree();
  }

 private:
  int NewNode(int parent) {
    Node node;
    node.parent = parent;
    node.tie_key = random().Next();
    nodes_.push_back(std::move(node));
    return static_cast<int>(nodes_.size()) - 1;
  }

  void BuildTree() {
    NewNode(-1);  // the root
    const std::vector<SpacePoint>& points = space().points();
    std::vector<int> template_nodes(space().template_count(), -1);
    std::map<std::pair<int, int>, int> child_of;  // (node, value index) -> child
    // (template, parameter position, value index) -> index into parameter_values_
    std::map<std::tuple<int, int, int>, int> parameter_value_of;
    leaf_of_point_.resize(points.size());
    for (size_t p = 0; p < points.size(); ++p) {
      const int template_index = points[p].template_index;
      int& template_node = template_nodes[template_index];
      if (template_node < 0) template_node = NewNode(0);
      int node = template_node;
      for (int position = 0; position < static_cast<int>(points[p].value_indices.size());
           ++position) {
        const int value_index = points[p].value_indices[position];
        auto [child, added] = child_of.try_emplace({node, value_index}, 0);
        if (added) {
          child->second = NewNode(node);
          auto [shared, new_value] = parameter_value_of.try_emplace(
              {template_index, position, value_index}, static_cast<int>(parameter_values_.size()));
          if (new_value) parameter_values_.emplace_back();
          nodes_[child->second].parameter_value = shared->second;
        }
        node = child->second;
      }
      nodes_[node].point = static_cast<int>(p);
      nodes_[node].prior_seconds = points[p].prior_seconds;
      nodes_[node].open = 1;
      nodes_[node].open_cheap = IsCheap(static_cast<int>(p)) ? 1 : 0;
      leaf_of_point_[p] = node;
    }
    // Children always come after their parent, so one backward pass sums the subtrees.
    for (int n = static_cast<int>(nodes_.size()) - 1; n > 0; --n) {
      Node& parent = nodes_[nodes_[n].parent];
      parent.children.push_back(n);
      parent.open += nodes_[n].open;
      parent.open_cheap += nodes_[n].open_cheap;
      parent.prior_seconds = std::min(parent.prior_seconds, nodes_[n].prior_seconds);
    }
    for (Node& node : nodes_) {
      std::sort(node.children.begin(), node.children.end(), [this](int a, int b) {
        return std::tie(nodes_[a].prior_seconds, nodes_[a].tie_key) <
               std::tie(nodes_[b].prior_seconds, nodes_[b].tie_key);
      });
    }
  }

  double EffectiveVisits(const Node& node) const {
    return static_cast<double>(node.outcomes.count) +
           options_.virtual_loss * static_cast<double>(node.pending);
  }

  // A mean speedup mapped onto [0, 1] between the worst and the best outcome so far.
  double Normalize(double mean_speedup) const {
    const double best = best_speedup();
    if (best > worst_speedup_) {
      return std::clamp((mean_speedup - worst_speedup_) / (best - worst_speedup_), 0.0, 1.0);
    }
    return best > 0 ? std::min(mean_speedup / best, 1.0) : 0;
  }

  // The node's own normalized mean; nullopt without visits.
  std::optional<double> OwnValue(const Node& node) const {
    const double visits = EffectiveVisits(node);
    if (visits == 0) return std::nullopt;
    return Normalize(node.outcomes.speedup_sum / visits);
  }

  // What an unvisited child without shared outcomes is worth: the recorded mean of the nearest
  // node on the way up that has outcomes (the root has them all once anything is recorded).
  double FirstPlayValue(const Node& node) const {
    for (const Node* ancestor = &node;; ancestor = &nodes_[ancestor->parent]) {
      if (ancestor->outcomes.count > 0) {
        return Normalize(ancestor->outcomes.speedup_sum /
                         static_cast<double>(ancestor->outcomes.count));
      }
      if (ancestor->parent < 0) return 0;
    }
  }

  double Value(const Node& child, double first_play_value) const {
    const std::optional<double> own = OwnValue(child);
    std::optional<double> shared;
    if (child.parameter_value >= 0) {
      const Outcomes& outcomes = parameter_values_[child.parameter_value];
      if (outcomes.count > 0) {
        shared = Normalize(outcomes.speedup_sum / static_cast<double>(outcomes.count));
      }
    }
    if (!own.has_value()) return shared.value_or(first_play_value);
    if (!shared.has_value()) return *own;
    const double weight = std::sqrt(kSharedValueEquivalence /
                                    (3 * EffectiveVisits(child) + kSharedValueEquivalence));
    return weight * *shared + (1 - weight) * *own;
  }

  // The open leaves below `node` that `which` admits.
  static int64_t Open(const Node& node, Proposals which) {
    return which == Proposals::kCheapOnly ? node.open_cheap : node.open;
  }

  int SelectChild(const Node& node, Proposals which) const {
    const double visits = EffectiveVisits(node);
    const size_t admitted = static_cast<size_t>(std::ceil(
        options_.widening_constant * std::pow(std::max(visits, 1.0), options_.widening_exponent)));
    const double log_visits = std::log(visits + 1);
    const double first_play_value = FirstPlayValue(node);
    int chosen = -1;
    double chosen_score = 0;
    for (size_t i = 0; i < node.children.size(); ++i) {
      if (i >= admitted && chosen >= 0) break;
      const Node& child = nodes_[node.children[i]];
      if (Open(child, which) == 0) continue;
      const double score =
          Value(child, first_play_value) +
          options_.exploration * std::sqrt(log_visits / (EffectiveVisits(child) + 1));
      if (chosen < 0 || score > chosen_score) {
        chosen = node.children[i];
        chosen_score = score;
      }
    }
    return chosen;
  }

  std::optional<int> Choose(Proposals which) override {
    if (Open(nodes_[0], which) == 0) return std::nullopt;
    int node = 0;
    while (nodes_[node].point < 0) node = SelectChild(nodes_[node], which);
    return nodes_[node].point;
  }

  // Applies `update` to the leaf of `point` and every node above it.
  template <typename Update>
  void UpdatePath(int point, Update update) {
    for (int node = leaf_of_point_[point]; node >= 0; node = nodes_[node].parent) {
      update(nodes_[node]);
    }
  }

  void OnPending(int point) override {
    const int64_t cheap = IsCheap(point) ? 1 : 0;
    UpdatePath(point, [cheap](Node& node) {
      ++node.pending;
      --node.open;
      node.open_cheap -= cheap;
    });
  }

  void OnRecorded(int point, std::optional<double> speedup) override {
    const double reward = speedup.value_or(0);
    worst_speedup_ = std::min(worst_speedup_, reward);
    UpdatePath(point, [this, reward](Node& node) {
      --node.pending;
      ++node.outcomes.count;
      node.outcomes.speedup_sum += reward;
      if (node.parameter_value >= 0) {
        Outcomes& shared = parameter_values_[node.parameter_value];
        ++shared.count;
        shared.speedup_sum += reward;
      }
    });
  }

  void OnReleased(int point) override {
    const int64_t cheap = IsCheap(point) ? 1 : 0;
    UpdatePath(point, [cheap](Node& node) {
      --node.pending;
      ++node.open;
      node.open_cheap += cheap;
    });
  }

  const SearchOptions options_;
  std::vector<Node> nodes_;
  std::vector<int> leaf_of_point_;
  // Outcomes by (template, parameter, value), shared by every node that sets that value.
  std::vector<Outcomes> parameter_values_;
  double worst_speedup_ = std::numeric_limits<double>::infinity();  // failures count as 0
};

}  // namespace

absl::StatusOr<std::unique_ptr<Searcher>> CreateMctsSearcher(const forge::v1::KernelTask& task,
                                                             absl::string_view target_arch,
                                                             const SearchOptions& options,
                                                             absl::string_view saved_state) {
  FORGE_ASSIGN_OR_RETURN(SearchStart start,
                         PrepareSearch(kMctsKind, task, target_arch, options, saved_state));
  std::optional<SearchState> state = std::move(start.state);
  auto searcher = std::make_unique<MctsSearcher>(task, target_arch, options, std::move(start));
  if (state.has_value()) FORGE_RETURN_IF_ERROR(searcher->Restore(*state));
  return searcher;
}

}  // namespace forge::search
