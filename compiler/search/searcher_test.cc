#include "compiler/search/searcher.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/codegen/family.h"
#include "compiler/graph/partition.h"
#include "compiler/search/candidate.h"
#include "compiler/search/prior.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fixtures/test_models.h"

namespace forge::search {
namespace {

using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::SoftmaxTask;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::v1::Candidate;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
constexpr auto kBf16 = forge::v1::DTYPE_BFLOAT16;
constexpr char kArch[] = "sm_90";

using Factory = std::function<absl::StatusOr<std::unique_ptr<Searcher>>(
    const KernelTask&, absl::string_view, const SearchOptions&, absl::string_view)>;

struct NamedFactory {
  std::string name;
  Factory create;
};

std::vector<NamedFactory> Factories() {
  return {{"mcts", CreateMctsSearcher}, {"random", CreateRandomSearcher}};
}

// 640 float32 elements: few pointwise points are valid (most leave threads idle).
KernelTask SmallReluTask() {
  KernelTask task = TaskBuilder()
                        .Input("x", kF32, {640})
                        .Node("relu", "relu", "default", {TensorArg("self", "x")}, kF32, {640})
                        .Output("relu")
                        .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
  task.set_digest(std::string(64, 'b'));
  return task;
}

std::unique_ptr<Searcher> Create(const Factory& factory, const KernelTask& task,
                                 const SearchOptions& options = {},
                                 absl::string_view saved_state = "") {
  absl::StatusOr<std::unique_ptr<Searcher>> searcher =
      factory(task, kArch, options, saved_state);
  EXPECT_TRUE(searcher.ok()) << searcher.status();
  return searcher.ok() ? *std::move(searcher) : nullptr;
}

// The whole valid space, by draining a searcher.
std::vector<Candidate> AllCandidates(const KernelTask& task) {
  std::unique_ptr<Searcher> searcher = Create(CreateRandomSearcher, task);
  return searcher->Propose(1 << 20);
}

std::vector<std::string> Digests(const std::vector<Candidate>& candidates) {
  std::vector<std::string> digests;
  for (const Candidate& candidate : candidates) digests.push_back(candidate.digest());
  return digests;
}

// A deterministic synthetic oracle over row_reduce points: best near 128 threads a row, 8 lanes,
// the row cached, one rows-per-block; a smooth landscape with one good region.
double SyntheticSpeedup(const Candidate& candidate) {
  const auto& p = candidate.parameters();
  const double threads = std::log2(static_cast<double>(p.at("threads_per_row")));
  const double width = std::log2(static_cast<double>(p.at("vector_width")));
  const double rows = std::log2(static_cast<double>(p.at("rows_per_block")));
  return 0.2 + 4.0 * std::exp(-0.5 * (threads - 7) * (threads - 7)) *
                   std::exp(-0.3 * (width - 3) * (width - 3)) * (p.at("cache_row") ? 1.0 : 0.6) *
                   std::exp(-0.2 * rows * rows);
}

// Proposes `batch` at a time and records each proposal's oracle speedup, until `budget`
// proposals; returns the speedups in proposal order.
std::vector<double> RunSearch(Searcher& searcher, int budget, int batch) {
  std::vector<double> speedups;
  while (static_cast<int>(speedups.size()) < budget) {
    const std::vector<Candidate> proposed =
        searcher.Propose(std::min<int>(batch, budget - static_cast<int>(speedups.size())));
    if (proposed.empty()) break;
    for (const Candidate& candidate : proposed) {
      speedups.push_back(SyntheticSpeedup(candidate));
      EXPECT_TRUE(searcher.Record(candidate.digest(), speedups.back()).ok());
    }
  }
  return speedups;
}

std::vector<KernelTask> TestModelTasks() {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  EXPECT_NE(directory, nullptr) << "FORGE_TEST_MODELS is not set; run through ctest";
  std::vector<KernelTask> tasks;
  if (directory == nullptr) return tasks;
  absl::flat_hash_set<std::string> seen;
  for (const std::string& model : forge::testing::kTestModelNames) {
    forge::v1::Graph graph;
    std::ifstream file(std::string(directory) + "/" + model + "/graph.pb", std::ios::binary);
    EXPECT_TRUE(file && graph.ParseFromIstream(&file)) << model;
    absl::StatusOr<graph::PartitionResult> partition = graph::Partition(graph);
    EXPECT_TRUE(partition.ok()) << model << ": " << partition.status();
    if (!partition.ok()) continue;
    for (const KernelTask& task : partition->tasks) {
      if (seen.insert(task.digest()).second) tasks.push_back(task);
    }
  }
  return tasks;
}

// Over every task of the test models, both searchers propose each valid point exactly once,
// never the ATen fallback, and are exhausted when all are recorded.
TEST(SearcherModelsTest, ProposalsAreTheValidPointsOnce) {
  int searched_tasks = 0;
  for (const KernelTask& task : TestModelTasks()) {
    std::map<std::string, int64_t> space_sizes;
    for (const NamedFactory& factory : Factories()) {
      SCOPED_TRACE(factory.name + " on task " + task.digest());
      std::unique_ptr<Searcher> searcher = Create(factory.create, task);
      ASSERT_NE(searcher, nullptr);
      absl::flat_hash_set<std::string> digests;
      for (std::vector<Candidate> batch = searcher->Propose(7); !batch.empty();
           batch = searcher->Propose(7)) {
        for (const Candidate& candidate : batch) {
          EXPECT_TRUE(digests.insert(candidate.digest()).second) << "proposed twice";
          EXPECT_EQ(candidate.digest(), CandidateDigest(candidate));
          EXPECT_EQ(candidate.target_arch(), kArch);
          EXPECT_NE(candidate.family(), forge::v1::KERNEL_FAMILY_ATEN);
          EXPECT_TRUE(codegen::FindFamily(candidate.family())->Validate(task, PointOf(candidate))
                          .ok());
          EXPECT_TRUE(GenerateCandidate(task, candidate).ok());
          // Every third candidate fails: failures count as outcomes too.
          const std::optional<double> speedup =
              digests.size() % 3 == 0 ? std::nullopt : std::optional<double>(1.0);
          EXPECT_TRUE(searcher->Record(candidate.digest(), speedup).ok());
        }
      }
      EXPECT_TRUE(searcher->Exhausted());
      EXPECT_EQ(searcher->pending(), 0);
      EXPECT_EQ(searcher->recorded(), static_cast<int64_t>(digests.size()));
      space_sizes[factory.name] = static_cast<int64_t>(digests.size());
    }
    EXPECT_EQ(space_sizes["mcts"], space_sizes["random"]);
    searched_tasks += space_sizes["mcts"] > 0;
  }
  // Pointwise, reduction (row and cross-entropy) and GEMM library tasks all have spaces.
  EXPECT_GE(searched_tasks, 10);
}

TEST(SearcherTest, PendingRecordAndRelease) {
  for (const NamedFactory& factory : Factories()) {
    SCOPED_TRACE(factory.name);
    const KernelTask task = SoftmaxTask(kBf16, 16384, 4096);
    std::unique_ptr<Searcher> searcher = Create(factory.create, task);
    EXPECT_FALSE(searcher->best().has_value());
    const std::vector<Candidate> batch = searcher->Propose(3);
    ASSERT_EQ(batch.size(), 3u);
    EXPECT_EQ(searcher->pending(), 3);
    std::vector<std::string> pending_digests = Digests(batch);
    std::sort(pending_digests.begin(), pending_digests.end());
    EXPECT_EQ(searcher->PendingDigests(), pending_digests);

    // Not pending: an unknown digest, and a valid point never proposed.
    EXPECT_EQ(searcher->Record(std::string(64, 'f'), 1.0).code(), absl::StatusCode::kNotFound);
    const std::vector<Candidate> all = AllCandidates(task);
    const auto unproposed = std::find_if(all.begin(), all.end(), [&](const Candidate& c) {
      return std::none_of(batch.begin(), batch.end(),
                          [&](const Candidate& b) { return b.digest() == c.digest(); });
    });
    ASSERT_NE(unproposed, all.end());
    EXPECT_EQ(searcher->Release(unproposed->digest()).code(), absl::StatusCode::kNotFound);

    EXPECT_EQ(searcher->Record(batch[0].digest(), 0.0).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(searcher->Record(batch[0].digest(), std::nan("")).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(searcher->pending(), 3);

    ASSERT_TRUE(searcher->Record(batch[0].digest(), std::nullopt).ok());
    EXPECT_FALSE(searcher->best().has_value());
    ASSERT_TRUE(searcher->Record(batch[1].digest(), 1.5).ok());
    EXPECT_EQ(searcher->best(), std::make_pair(batch[1].digest(), 1.5));
    EXPECT_EQ(searcher->Record(batch[1].digest(), 2.0).code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(searcher->recorded(), 2);

    EXPECT_EQ(searcher->PendingDigests(), std::vector<std::string>{batch[2].digest()});
    ASSERT_TRUE(searcher->Release(batch[2].digest()).ok());
    EXPECT_EQ(searcher->Release(batch[2].digest()).code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(searcher->pending(), 0);
    EXPECT_TRUE(searcher->PendingDigests().empty());

    // The released point comes back; recorded ones never do.
    bool released_again = false;
    for (const Candidate& candidate : searcher->Propose(1 << 20)) {
      released_again |= candidate.digest() == batch[2].digest();
      EXPECT_NE(candidate.digest(), batch[0].digest());
      EXPECT_NE(candidate.digest(), batch[1].digest());
    }
    EXPECT_TRUE(released_again);
    EXPECT_EQ(searcher->pending() + searcher->recorded(), static_cast<int64_t>(all.size()));
  }
}

TEST(SearcherTest, ExhaustsASmallSpace) {
  const KernelTask task = SmallReluTask();
  const size_t space_size = AllCandidates(task).size();
  ASSERT_GT(space_size, 1u);
  ASSERT_LT(space_size, 64u);
  for (const NamedFactory& factory : Factories()) {
    SCOPED_TRACE(factory.name);
    std::unique_ptr<Searcher> searcher = Create(factory.create, task);
    const std::vector<Candidate> proposed = searcher->Propose(64);
    EXPECT_EQ(proposed.size(), space_size);
    EXPECT_TRUE(searcher->Propose(1).empty());
    EXPECT_FALSE(searcher->Exhausted()) << "pending candidates are not outcomes";
    for (const Candidate& candidate : proposed) {
      EXPECT_FALSE(searcher->Exhausted());
      ASSERT_TRUE(searcher->Record(candidate.digest(), 1.0).ok());
    }
    EXPECT_TRUE(searcher->Exhausted());
    EXPECT_TRUE(searcher->Propose(8).empty());
  }
}

// A bf16 matrix product: cuBLASLt points (cheap: no compile) and CUTLASS points (expensive: nvcc).
KernelTask BfMatmulTask() {
  KernelTask task =
      TaskBuilder()
          .Input("a", kBf16, {128, 256})
          .Input("b", kBf16, {256, 512})
          .Node("mm", "mm", "default", {TensorArg("self", "a"), TensorArg("mat2", "b")}, kBf16,
                {128, 512})
          .Output("mm")
          .Build(forge::v1::KERNEL_FAMILY_GEMM);
  task.set_flops(2 * 128 * 256 * 512);
  task.set_min_bytes(2 * (128 * 256 + 256 * 512 + 128 * 512));
  task.set_digest(std::string(64, 'c'));
  return task;
}

// Cheap-only proposals take every cheap point once and no expensive one, and leave the expensive
// ones to later proposals; the cheap counts follow.
TEST(SearcherTest, CheapOnlyProposalsTakeCheapPointsOnly) {
  const KernelTask task = BfMatmulTask();
  const std::vector<Candidate> all = AllCandidates(task);
  const int64_t expensive = std::count_if(all.begin(), all.end(), IsExpensive);
  const int64_t cheap = static_cast<int64_t>(all.size()) - expensive;
  ASSERT_GT(expensive, 0) << "no CUTLASS point for the bf16 matmul";
  ASSERT_GT(cheap, 0) << "no cuBLASLt point for the bf16 matmul";
  for (const Candidate& candidate : all) {
    EXPECT_NE(candidate.compile_cost(), forge::v1::COMPILE_COST_UNSPECIFIED)
        << candidate.template_name();
  }
  for (const NamedFactory& factory : Factories()) {
    SCOPED_TRACE(factory.name);
    std::unique_ptr<Searcher> searcher = Create(factory.create, task);
    EXPECT_EQ(searcher->cheap_points(), cheap);
    EXPECT_EQ(searcher->cheap_open(), cheap);
    const std::vector<Candidate> first = searcher->Propose(1, Proposals::kCheapOnly);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_FALSE(IsExpensive(first[0]));
    ASSERT_TRUE(searcher->Record(first[0].digest(), 1.0).ok());
    EXPECT_EQ(searcher->cheap_recorded(), 1);
    const std::vector<Candidate> rest = searcher->Propose(1 << 20, Proposals::kCheapOnly);
    EXPECT_EQ(static_cast<int64_t>(rest.size()), cheap - 1);
    for (const Candidate& candidate : rest) EXPECT_FALSE(IsExpensive(candidate));
    EXPECT_EQ(searcher->cheap_open(), 0);
    EXPECT_TRUE(searcher->Propose(4, Proposals::kCheapOnly).empty());
    // A released cheap point is open to cheap proposals again.
    ASSERT_TRUE(searcher->Release(rest[0].digest()).ok());
    EXPECT_EQ(searcher->cheap_open(), 1);
    EXPECT_EQ(Digests(searcher->Propose(4, Proposals::kCheapOnly)),
              std::vector<std::string>{rest[0].digest()});
    const std::vector<Candidate> expensive_ones = searcher->Propose(1 << 20);
    EXPECT_EQ(static_cast<int64_t>(expensive_ones.size()), expensive);
    for (const Candidate& candidate : expensive_ones) EXPECT_TRUE(IsExpensive(candidate));
    EXPECT_EQ(searcher->cheap_recorded(), 1);
  }
}

// A task with no generated family (a 1-d convolution runs through ATen only: cuDNN's graphs take
// 2-d and 3-d ones, the stencil family 2-d depthwise ones) has nothing to search.
TEST(SearcherTest, NothingToSearchIsExhaustedAtOnce) {
  KernelTask task = TaskBuilder()
                        .Input("x", kF32, {1, 3, 8})
                        .Input("w", kF32, {4, 3, 3})
                        .Node("conv", "conv1d", "default",
                              {TensorArg("input", "x"), TensorArg("weight", "w")}, kF32,
                              {1, 4, 6})
                        .Output("conv")
                        .Build(forge::v1::KERNEL_FAMILY_CONV);
  for (const NamedFactory& factory : Factories()) {
    std::unique_ptr<Searcher> searcher = Create(factory.create, task);
    EXPECT_TRUE(searcher->Propose(4).empty()) << factory.name;
    EXPECT_TRUE(searcher->Exhausted()) << factory.name;
  }
}

// A restored searcher proposes what the saved one would have, whatever seed the caller passes
// (the state's wins), and ends in the same state.
TEST(SearcherTest, RestoreContinuesIdentically) {
  const KernelTask task = SoftmaxTask(kBf16, 16384, 4096);
  for (const NamedFactory& factory : Factories()) {
    SCOPED_TRACE(factory.name);
    SearchOptions options;
    options.seed = 7;
    std::unique_ptr<Searcher> original = Create(factory.create, task, options);
    std::vector<Candidate> batch;
    for (int round = 0; round < 4; ++round) {
      batch = original->Propose(5);
      ASSERT_EQ(batch.size(), 5u);
      ASSERT_TRUE(original->Record(batch[0].digest(), SyntheticSpeedup(batch[0])).ok());
      ASSERT_TRUE(original->Record(batch[1].digest(), std::nullopt).ok());
      ASSERT_TRUE(original->Record(batch[2].digest(), SyntheticSpeedup(batch[2])).ok());
      ASSERT_TRUE(original->Release(batch[3].digest()).ok());
    }
    const std::string saved = original->Serialize();

    SearchOptions other_seed = options;
    other_seed.seed = 8;
    std::unique_ptr<Searcher> restored = Create(factory.create, task, other_seed, saved);
    ASSERT_NE(restored, nullptr);
    EXPECT_EQ(restored->Serialize(), saved);
    EXPECT_EQ(restored->pending(), original->pending());
    EXPECT_EQ(restored->recorded(), original->recorded());
    EXPECT_EQ(restored->best(), original->best());
    EXPECT_EQ(restored->PendingDigests(), original->PendingDigests());

    // Both finish the pending candidates of the last round, then search on in lockstep.
    ASSERT_TRUE(original->Record(batch[4].digest(), 2.0).ok());
    ASSERT_TRUE(restored->Record(batch[4].digest(), 2.0).ok());
    for (int round = 0; round < 6; ++round) {
      const std::vector<Candidate> expected = original->Propose(6);
      const std::vector<Candidate> actual = restored->Propose(6);
      ASSERT_EQ(Digests(actual), Digests(expected)) << "round " << round;
      for (size_t i = 0; i + 1 < expected.size(); ++i) {
        ASSERT_TRUE(original->Record(expected[i].digest(), SyntheticSpeedup(expected[i])).ok());
        ASSERT_TRUE(restored->Record(actual[i].digest(), SyntheticSpeedup(actual[i])).ok());
      }
    }
    EXPECT_EQ(restored->Serialize(), original->Serialize());

    // A fresh searcher with the other seed is a different search: the restore did not just
    // happen to agree.
    if (factory.name == "random") {
      EXPECT_NE(Digests(Create(factory.create, task, other_seed)->Propose(10)),
                Digests(Create(factory.create, task, options)->Propose(10)));
    }
  }
}

TEST(SearcherTest, RestoreRejectsForeignStates) {
  const KernelTask task = SoftmaxTask(kBf16, 16384, 4096);
  std::unique_ptr<Searcher> mcts = Create(CreateMctsSearcher, task);
  mcts->Propose(3);
  const std::string saved = mcts->Serialize();

  auto status_of = [](absl::StatusOr<std::unique_ptr<Searcher>> created) {
    return created.status();
  };
  absl::Status status = status_of(CreateMctsSearcher(task, kArch, {}, "not a state \xff\xff"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  status = status_of(CreateRandomSearcher(task, kArch, {}, saved));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("searcher 'mcts'"));
  status = status_of(CreateMctsSearcher(task, "sm_80", {}, saved));
  EXPECT_THAT(status.message(), HasSubstr("target arch 'sm_90'"));
  KernelTask other = task;
  other.set_digest(std::string(64, 'c'));
  status = status_of(CreateMctsSearcher(other, kArch, {}, saved));
  EXPECT_THAT(status.message(), HasSubstr("task"));
  // The same digest over another space: the point indices would name other points.
  KernelTask reshaped = SmallReluTask();
  reshaped.set_digest(task.digest());
  status = status_of(CreateMctsSearcher(reshaped, kArch, {}, saved));
  EXPECT_THAT(status.message(), HasSubstr("search space"));
}

TEST(SearcherTest, OptionsAndArchAreChecked) {
  SearchOptions options;
  options.widening_exponent = 2;
  const KernelTask task = SoftmaxTask(kBf16, 16384, 4096);
  EXPECT_THAT(CreateMctsSearcher(task, kArch, options).status().message(),
              HasSubstr("widening_exponent"));
  EXPECT_EQ(CreateRandomSearcher(task, "", {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = SearchOptions();
  options.prior_gpu = "Voodoo 2";
  EXPECT_EQ(CreateMctsSearcher(task, kArch, options).status().code(),
            absl::StatusCode::kNotFound);
}

// Virtual loss makes one batch explore several subtrees; without it every descent of the batch
// follows the same path and the batch crowds one corner of the space.
TEST(SearcherTest, VirtualLossSpreadsABatch) {
  auto distinct_threads_per_row = [](double virtual_loss) {
    SearchOptions options;
    options.virtual_loss = virtual_loss;
    std::unique_ptr<Searcher> searcher =
        Create(CreateMctsSearcher, SoftmaxTask(kBf16, 16384, 4096), options);
    absl::flat_hash_set<int64_t> values;
    for (const Candidate& candidate : searcher->Propose(8)) {
      values.insert(candidate.parameters().at("threads_per_row"));
    }
    return values.size();
  };
  EXPECT_EQ(distinct_threads_per_row(0), 1u);
  EXPECT_GE(distinct_threads_per_row(1), 3u);
}

// The first proposal is the prior's favourite: the point the cost model predicts fastest.
TEST(SearcherTest, PriorOrdersExpansion) {
  SearchOptions options;
  const KernelTask task = SoftmaxTask(kBf16, 16384, 4096);
  std::unique_ptr<Searcher> with_prior = Create(CreateMctsSearcher, task, options);
  options.use_cost_model_prior = false;
  std::unique_ptr<Searcher> without_prior = Create(CreateMctsSearcher, task, options);
  const Candidate favourite = with_prior->Propose(1).front();
  EXPECT_NE(favourite.digest(), without_prior->Propose(1).front().digest());

  // No point the target can run is predicted faster (ties go by the tree's seeded keys).
  absl::StatusOr<CostModelPrior> prior = CostModelPrior::ForGpu(options.prior_gpu);
  ASSERT_TRUE(prior.ok()) << prior.status();
  auto predict = [&](const Candidate& candidate) {
    absl::StatusOr<codegen::GeneratedKernel> kernel = GenerateCandidate(task, candidate);
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    absl::StatusOr<double> seconds = prior->PredictSeconds(task, *kernel);
    EXPECT_TRUE(seconds.ok()) << seconds.status();
    return *seconds;
  };
  const codegen::KernelFamily& family = *codegen::FindFamily(task.family());
  absl::StatusOr<std::vector<codegen::TemplateSpace>> spaces = family.ScheduleSpace(task);
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  double fastest = std::numeric_limits<double>::infinity();
  for (const codegen::TemplateSpace& space : *spaces) {
    for (const codegen::SchedulePoint& point : codegen::EnumeratePoints(space)) {
      absl::StatusOr<Candidate> candidate = MakeCandidate(task, family, point, kArch);
      if (candidate.ok()) fastest = std::min(fastest, predict(*candidate));
    }
  }
  EXPECT_DOUBLE_EQ(predict(favourite), fastest);
  // A row of 4096 bf16: kept in registers, it is read once.
  EXPECT_EQ(favourite.parameters().at("cache_row"), 1);
}

// With rewards from a deterministic synthetic oracle, MCTS (prior off, so only the outcomes
// guide it) finds better points and proposes more good ones than uniform sampling at the same
// budget, averaged over seeds. Fixed seeds: the comparison is deterministic.
TEST(SearcherTest, MctsConcentratesOnTheGoodRegion) {
  const KernelTask task = SoftmaxTask(kBf16, 16384, 4096);
  double space_best = 0;
  for (const Candidate& candidate : AllCandidates(task)) {
    space_best = std::max(space_best, SyntheticSpeedup(candidate));
  }
  constexpr int kBudget = 32;
  constexpr int kBatch = 4;
  constexpr int kSeeds = 10;
  std::map<std::string, double> best_fraction;  // mean over seeds of best found / space best
  std::map<std::string, double> good_share;     // share of proposals within 25% of the best
  for (const NamedFactory& factory : Factories()) {
    for (int seed = 1; seed <= kSeeds; ++seed) {
      SearchOptions options;
      options.seed = static_cast<uint64_t>(seed);
      options.use_cost_model_prior = false;
      std::unique_ptr<Searcher> searcher = Create(factory.create, task, options);
      const std::vector<double> speedups = RunSearch(*searcher, kBudget, kBatch);
      ASSERT_EQ(speedups.size(), static_cast<size_t>(kBudget));
      best_fraction[factory.name] +=
          *std::max_element(speedups.begin(), speedups.end()) / space_best / kSeeds;
      good_share[factory.name] +=
          static_cast<double>(std::count_if(speedups.begin(), speedups.end(),
                                            [&](double s) { return s >= 0.75 * space_best; })) /
          (kBudget * kSeeds);
    }
  }
  EXPECT_GT(best_fraction["mcts"], best_fraction["random"]);
  EXPECT_GT(good_share["mcts"], 1.5 * good_share["random"]);
  RecordProperty("mcts_best_fraction", std::to_string(best_fraction["mcts"]));
  RecordProperty("random_best_fraction", std::to_string(best_fraction["random"]));
  RecordProperty("mcts_good_share", std::to_string(good_share["mcts"]));
  RecordProperty("random_good_share", std::to_string(good_share["random"]));
}

}  // namespace
}  // namespace forge::search
