// Uniform random sampling without replacement: each proposal is the k-th open point (that the
// proposal admits) in space order, k uniform over those points. The generator's state is all the randomness there is,
// so a restored searcher draws what the saved one would have.
#include <memory>
#include <utility>

#include "common/status/status_macros.h"
#include "compiler/search/search_space.h"
#include "compiler/search/searcher.h"

namespace forge::search {
namespace {

constexpr char kRandomKind[] = "random";

class RandomSearcher final : public SpaceSearcher {
 public:
  RandomSearcher(const forge::v1::KernelTask& task, absl::string_view target_arch,
                 SearchStart start)
      : SpaceSearcher(kRandomKind, task, target_arch, std::move(start.space), start.seed) {}

 private:
  std::optional<int> Choose(Proposals which) override {
    const bool cheap_only = which == Proposals::kCheapOnly;
    const int64_t open = cheap_only ? cheap_open() : open_points();
    if (open == 0) return std::nullopt;
    int64_t skip = static_cast<int64_t>(random().Below(static_cast<std::uint64_t>(open)));
    for (int point = 0;; ++point) {
      if (IsOpen(point) && (!cheap_only || IsCheap(point)) && skip-- == 0) return point;
    }
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Searcher>> CreateRandomSearcher(const forge::v1::KernelTask& task,
                                                               absl::string_view target_arch,
                                                               const SearchOptions& options,
                                                               absl::string_view saved_state) {
  // Uniform sampling ignores the prior: skip generating every point to rank it.
  SearchOptions unranked = options;
  unranked.use_cost_model_prior = false;
  FORGE_ASSIGN_OR_RETURN(SearchStart start,
                         PrepareSearch(kRandomKind, task, target_arch, unranked, saved_state));
  std::optional<SearchState> state = std::move(start.state);
  auto searcher = std::make_unique<RandomSearcher>(task, target_arch, std::move(start));
  if (state.has_value()) FORGE_RETURN_IF_ERROR(searcher->Restore(*state));
  return searcher;
}

}  // namespace forge::search
