#include "compiler/search/search_space.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/digest/sha256.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/family.h"
#include "compiler/search/candidate.h"

namespace forge::search {
namespace {

int ValueIndex(const codegen::ScheduleParameter& parameter, std::int64_t value) {
  return static_cast<int>(std::find(parameter.values.begin(), parameter.values.end(), value) -
                          parameter.values.begin());
}

bool ValidSpeedup(double speedup) { return std::isfinite(speedup) && speedup > 0; }

// SearchOptions' numbers; InvalidArgument naming the field.
absl::Status ValidateOptions(const SearchOptions& options) {
  if (!(options.exploration >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SearchOptions.exploration must be >= 0, got ", options.exploration));
  }
  if (!(options.widening_constant > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SearchOptions.widening_constant must be > 0, got ", options.widening_constant));
  }
  if (!(options.widening_exponent >= 0 && options.widening_exponent <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SearchOptions.widening_exponent must be in [0, 1], got ", options.widening_exponent));
  }
  if (!(options.virtual_loss >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SearchOptions.virtual_loss must be >= 0, got ", options.virtual_loss));
  }
  return absl::OkStatus();
}

}  // namespace

std::uint64_t SplitMix64::Next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t SplitMix64::Below(std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
}

absl::StatusOr<SearchSpace> SearchSpace::Build(const forge::v1::KernelTask& task,
                                               absl::string_view target_arch,
                                               const CostModelPrior* prior) {
  // MakeCandidate would reject every point for these; say so instead of searching nothing.
  if (task.digest().empty()) {
    return absl::InvalidArgumentError("search of a task without a digest (KernelTask.digest)");
  }
  if (target_arch.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("search of task ", task.digest(), " without a target arch"));
  }
  SearchSpace space;
  Sha256 space_digest;
  for (const codegen::KernelFamily* family : codegen::ApplicableFamilies(task)) {
    if (family->kind() == forge::v1::KERNEL_FAMILY_ATEN) continue;
    FORGE_ASSIGN_OR_RETURN(const std::vector<codegen::TemplateSpace> templates,
                           family->ScheduleSpace(task));
    for (const codegen::TemplateSpace& template_space : templates) {
      const int template_index = space.template_count_++;
      for (const codegen::SchedulePoint& point : codegen::EnumeratePoints(template_space)) {
        // Validate's verdict prunes the point: the searchers never see an invalid one.
        absl::StatusOr<forge::v1::Candidate> candidate =
            MakeCandidate(task, *family, point, target_arch);
        if (!candidate.ok()) continue;
        SpacePoint space_point;
        space_point.template_index = template_index;
        for (const codegen::ScheduleParameter& parameter : template_space.parameters) {
          space_point.value_indices.push_back(
              ValueIndex(parameter, point.parameters.at(parameter.name)));
        }
        // The plan only: the coordinator writes no CUDA source.
        absl::StatusOr<codegen::LaunchPlan> plan = family->Plan(task, point);
        if (plan.ok()) candidate->set_compile_cost(codegen::CompileCostOf(*plan));
        if (prior != nullptr) {
          absl::StatusOr<double> seconds =
              plan.ok() ? prior->PredictSeconds(task, *plan) : plan.status();
          space_point.prior_seconds =
              seconds.ok() ? *seconds : std::numeric_limits<double>::infinity();
        }
        space_digest.Update(candidate->digest());
        space.index_by_digest_.emplace(candidate->digest(),
                                       static_cast<int>(space.points_.size()));
        space_point.candidate = *std::move(candidate);
        space.points_.push_back(std::move(space_point));
      }
    }
  }
  space.digest_ = space_digest.Finish().ToHex();
  return space;
}

std::optional<int> SearchSpace::Find(absl::string_view candidate_digest) const {
  const auto it = index_by_digest_.find(candidate_digest);
  if (it == index_by_digest_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<SearchStart> PrepareSearch(absl::string_view kind,
                                          const forge::v1::KernelTask& task,
                                          absl::string_view target_arch,
                                          const SearchOptions& options,
                                          absl::string_view saved_state) {
  FORGE_RETURN_IF_ERROR(ValidateOptions(options));
  std::optional<CostModelPrior> prior;
  if (options.use_cost_model_prior) {
    FORGE_ASSIGN_OR_RETURN(prior, CostModelPrior::ForGpu(options.prior_gpu, options.learned_prior));
  }
  FORGE_ASSIGN_OR_RETURN(SearchSpace space, SearchSpace::Build(task, target_arch,
                                                               prior ? &*prior : nullptr));
  SearchStart start{std::move(space), options.seed, std::nullopt};
  if (saved_state.empty()) return start;

  SearchState state;
  if (!state.ParseFromArray(saved_state.data(), static_cast<int>(saved_state.size()))) {
    return absl::InvalidArgumentError(absl::StrCat("saved search state of task ", task.digest(),
                                                   " (", saved_state.size(),
                                                   " bytes) does not parse"));
  }
  const auto mismatch = [&](absl::string_view what, absl::string_view saved,
                            absl::string_view expected) {
    return absl::InvalidArgumentError(absl::StrCat("saved search state is of ", what, " '", saved,
                                                   "', not '", expected, "'"));
  };
  if (state.searcher() != kind) return mismatch("searcher", state.searcher(), kind);
  if (state.task_digest() != task.digest()) {
    return mismatch("task", state.task_digest(), task.digest());
  }
  if (state.target_arch() != target_arch) {
    return mismatch("target arch", state.target_arch(), target_arch);
  }
  if (state.space_digest() != start.space.digest()) {
    return mismatch("search space (generators or their valid points changed)",
                    state.space_digest(), start.space.digest());
  }
  start.seed = state.seed();
  start.state = std::move(state);
  return start;
}

SpaceSearcher::SpaceSearcher(std::string kind, const forge::v1::KernelTask& task,
                             absl::string_view target_arch, SearchSpace space,
                             std::uint64_t seed)
    : kind_(std::move(kind)),
      task_digest_(task.digest()),
      target_arch_(target_arch),
      seed_(seed),
      space_(std::move(space)),
      random_(seed),
      status_(space_.points().size(), PointStatus::kOpen) {
  for (const SpacePoint& point : space_.points()) cheap_.push_back(!IsExpensive(point.candidate));
  cheap_points_ = std::count(cheap_.begin(), cheap_.end(), true);
  cheap_open_ = cheap_points_;
}

std::vector<forge::v1::Candidate> SpaceSearcher::Propose(int max_candidates, Proposals which) {
  std::vector<forge::v1::Candidate> proposed;
  while (static_cast<int>(proposed.size()) < max_candidates) {
    if (which == Proposals::kCheapOnly && cheap_open_ == 0) break;
    const std::optional<int> point = Choose(which);
    if (!point.has_value()) break;
    MarkPending(*point);
    proposed.push_back(space_.points()[*point].candidate);
  }
  return proposed;
}

absl::StatusOr<int> SpaceSearcher::FindPending(absl::string_view candidate_digest) const {
  const std::optional<int> point = space_.Find(candidate_digest);
  if (!point.has_value() || status_[*point] != PointStatus::kPending) {
    return absl::NotFoundError(absl::StrCat("candidate ", candidate_digest,
                                            " is not pending in the search of task ",
                                            task_digest_));
  }
  return *point;
}

absl::Status SpaceSearcher::Record(absl::string_view candidate_digest,
                                   std::optional<double> speedup) {
  FORGE_ASSIGN_OR_RETURN(const int point, FindPending(candidate_digest));
  if (speedup.has_value() && !ValidSpeedup(*speedup)) {
    return absl::InvalidArgumentError(absl::StrCat("speedup of candidate ", candidate_digest,
                                                   " must be finite and > 0, got ", *speedup));
  }
  RecordPoint(point, speedup);
  return absl::OkStatus();
}

absl::Status SpaceSearcher::Release(absl::string_view candidate_digest) {
  FORGE_ASSIGN_OR_RETURN(const int point, FindPending(candidate_digest));
  status_[point] = PointStatus::kOpen;
  --pending_count_;
  if (cheap_[point]) ++cheap_open_;
  OnReleased(point);
  return absl::OkStatus();
}

bool SpaceSearcher::Exhausted() const { return outcomes_.size() == status_.size(); }

std::vector<std::string> SpaceSearcher::PendingDigests() const {
  std::vector<std::string> digests;
  for (size_t point = 0; point < status_.size(); ++point) {
    if (status_[point] == PointStatus::kPending) {
      digests.push_back(space_.points()[point].candidate.digest());
    }
  }
  std::sort(digests.begin(), digests.end());
  return digests;
}

int64_t SpaceSearcher::open_points() const {
  return static_cast<int64_t>(status_.size() - outcomes_.size()) - pending_count_;
}

std::optional<std::pair<std::string, double>> SpaceSearcher::best() const {
  if (best_point_ < 0) return std::nullopt;
  return std::make_pair(space_.points()[best_point_].candidate.digest(), best_speedup_);
}

void SpaceSearcher::MarkPending(int point) {
  status_[point] = PointStatus::kPending;
  ++pending_count_;
  if (cheap_[point]) --cheap_open_;
  OnPending(point);
}

void SpaceSearcher::RecordPoint(int point, std::optional<double> speedup) {
  status_[point] = PointStatus::kRecorded;
  --pending_count_;
  if (cheap_[point]) ++cheap_recorded_;
  outcomes_.emplace_back(point, speedup);
  if (speedup.has_value() && (best_point_ < 0 || *speedup > best_speedup_)) {
    best_point_ = point;
    best_speedup_ = *speedup;
  }
  OnRecorded(point, speedup);
}

std::string SpaceSearcher::Serialize() const {
  SearchState state;
  state.set_searcher(kind_);
  state.set_task_digest(task_digest_);
  state.set_target_arch(target_arch_);
  state.set_space_digest(space_.digest());
  state.set_seed(seed_);
  state.set_random_state(random_.state());
  for (const auto& [point, speedup] : outcomes_) {
    SearchOutcome* outcome = state.add_outcomes();
    outcome->set_point(static_cast<std::uint32_t>(point));
    if (speedup.has_value()) outcome->set_speedup(*speedup);
  }
  for (size_t point = 0; point < status_.size(); ++point) {
    if (status_[point] == PointStatus::kPending) {
      state.add_pending_points(static_cast<std::uint32_t>(point));
    }
  }
  return state.SerializeAsString();
}

absl::Status SpaceSearcher::Restore(const SearchState& state) {
  const auto open_point = [&](std::uint32_t point) -> absl::StatusOr<int> {
    if (point >= status_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("saved search state names point ", point,
                                                     " of a space of ", status_.size()));
    }
    if (status_[point] != PointStatus::kOpen) {
      return absl::InvalidArgumentError(
          absl::StrCat("saved search state lists point ", point, " twice"));
    }
    return static_cast<int>(point);
  };
  for (const SearchOutcome& outcome : state.outcomes()) {
    FORGE_ASSIGN_OR_RETURN(const int point, open_point(outcome.point()));
    if (outcome.has_speedup() && !ValidSpeedup(outcome.speedup())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "saved search state records speedup ", outcome.speedup(), " for point ", point));
    }
    MarkPending(point);
    RecordPoint(point, outcome.has_speedup() ? std::optional<double>(outcome.speedup())
                                             : std::nullopt);
  }
  for (const std::uint32_t pending_point : state.pending_points()) {
    FORGE_ASSIGN_OR_RETURN(const int point, open_point(pending_point));
    MarkPending(point);
  }
  random_.set_state(state.random_state());
  return absl::OkStatus();
}

}  // namespace forge::search
