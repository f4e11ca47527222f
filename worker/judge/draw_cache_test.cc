#include "worker/judge/draw_cache.h"

#include <thread>

#include "gtest/gtest.h"

namespace forge::judge {
namespace {

forge::v1::TensorSpec Float32(int64_t elements) {
  forge::v1::TensorSpec spec;
  spec.set_dtype(forge::v1::DTYPE_FLOAT32);
  spec.add_shape(elements);
  return spec;
}

forge::v1::KernelTask ScaleTask() {
  forge::v1::KernelTask task;
  task.set_digest("scale-task");
  *task.add_inputs() = Float32(8);
  *task.add_outputs() = Float32(8);
  forge::v1::Graph& group = *task.mutable_group();
  group.add_inputs()->set_value_name("x");
  forge::v1::Node& node = *group.add_nodes();
  node.set_op("aten::mul");
  node.add_outputs("y");
  group.add_outputs()->set_value_name("y");
  return task;
}

std::vector<InputDomain> AnyDomains(const forge::v1::KernelTask& task) {
  return std::vector<InputDomain>(task.inputs_size());
}

DrawKey KeyOf(int draw, uint64_t seed = 7) {
  const forge::v1::KernelTask task = ScaleTask();
  return MakeDrawKey(task, AnyDomains(task), /*reference_id=*/1, /*native_reference=*/false, seed,
                     draw);
}

// A draw of one input of `elements` float32 values, all equal to `value`, with references of as
// many doubles when `with_references`.
CachedDraw DrawOf(double value, int64_t elements = 1000, bool with_references = true) {
  auto inputs = std::make_shared<std::vector<HostTensor>>();
  HostTensor input = *HostTensor::Allocate(Float32(elements));
  for (int64_t i = 0; i < elements; ++i) input.Set(i, value);
  inputs->push_back(std::move(input));
  CachedDraw draw{.inputs = std::move(inputs), .references = nullptr};
  if (with_references) {
    auto references = std::make_shared<DrawReferences>();
    references->float64.push_back(std::vector<double>(elements, 2 * value));
    draw.references = std::move(references);
  }
  return draw;
}

// The cost the cache counts for DrawOf(value, elements) under KeyOf(draw).
int64_t BytesOfOneDraw(int64_t elements = 1000) {
  DrawCache cache;
  cache.Insert(KeyOf(0), DrawOf(1, elements));
  return cache.stats().bytes;
}

TEST(MakeDrawKeyTest, DiffersByEverythingADrawDependsOn) {
  const forge::v1::KernelTask task = ScaleTask();
  const std::vector<InputDomain> domains = AnyDomains(task);
  const DrawKey key = MakeDrawKey(task, domains, 1, false, 7, 0);
  EXPECT_EQ(key, MakeDrawKey(task, domains, 1, false, 7, 0));

  EXPECT_NE(key, MakeDrawKey(task, domains, 1, false, 7, 1));  // draw
  EXPECT_NE(key, MakeDrawKey(task, domains, 1, false, 8, 0));  // seed
  EXPECT_NE(key, MakeDrawKey(task, domains, 2, false, 7, 0));  // reference
  EXPECT_NE(key, MakeDrawKey(task, domains, 1, true, 7, 0));   // native reference

  std::vector<InputDomain> ranged = domains;
  ranged[0].range = {0, 10};
  EXPECT_NE(key, MakeDrawKey(task, ranged, 1, false, 7, 0));
  std::vector<InputDomain> positive = domains;
  positive[0].kind = InputDomain::Kind::kPositive;
  EXPECT_NE(key, MakeDrawKey(task, positive, 1, false, 7, 0));

  forge::v1::KernelTask other_digest = task;
  other_digest.set_digest("other-task");
  EXPECT_NE(key, MakeDrawKey(other_digest, domains, 1, false, 7, 0));
  // The same digest with other contents (a hand-made task, a digest bug) is another task.
  forge::v1::KernelTask other_shape = task;
  other_shape.mutable_inputs(0)->set_shape(0, 9);
  EXPECT_NE(key, MakeDrawKey(other_shape, domains, 1, false, 7, 0));
  forge::v1::KernelTask other_op = task;
  other_op.mutable_group()->mutable_nodes(0)->set_op("aten::add");
  EXPECT_NE(key, MakeDrawKey(other_op, domains, 1, false, 7, 0));
}

TEST(MakeDrawKeyTest, IgnoresWhatDrawsDoNotDependOn) {
  const forge::v1::KernelTask task = ScaleTask();
  forge::v1::KernelTask annotated = task;
  annotated.add_notes("reference output near constant");
  annotated.set_baseline_share(0.25);
  annotated.set_occurrences(3);
  (*annotated.mutable_group()->mutable_nodes(0)->mutable_attributes())["stack_trace"] = "model.py";
  const std::vector<InputDomain> domains = AnyDomains(task);
  std::vector<InputDomain> explained = domains;
  explained[0].reason = "said differently";
  EXPECT_EQ(MakeDrawKey(task, domains, 1, false, 7, 0),
            MakeDrawKey(annotated, explained, 1, false, 7, 0));
}

TEST(DrawCacheTest, FindsWhatWasInsertedAndCounts) {
  DrawCache cache;
  EXPECT_FALSE(cache.Find(KeyOf(0)).has_value());

  const CachedDraw inputs_only = DrawOf(3, 1000, /*with_references=*/false);
  cache.Insert(KeyOf(0), inputs_only);
  std::optional<CachedDraw> found = cache.Find(KeyOf(0));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->inputs, inputs_only.inputs);  // the same data, not a copy
  EXPECT_EQ(found->references, nullptr);
  const int64_t inputs_only_bytes = cache.stats().bytes;

  // The references arrive later under the same key and replace the entry.
  CachedDraw complete = inputs_only;
  complete.references = DrawOf(3).references;
  cache.Insert(KeyOf(0), complete);
  found = cache.Find(KeyOf(0));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->references, complete.references);
  EXPECT_FALSE(cache.Find(KeyOf(1)).has_value());
  EXPECT_FALSE(cache.Find(KeyOf(0, /*seed=*/8)).has_value());

  const DrawCacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.input_hits, 1);
  EXPECT_EQ(stats.misses, 3);
  EXPECT_EQ(stats.entries, 1);
  EXPECT_EQ(stats.evictions, 0);
  EXPECT_EQ(stats.corrupt, 0);
  EXPECT_EQ(stats.bytes, inputs_only_bytes + 1000 * static_cast<int64_t>(sizeof(double)));
  EXPECT_EQ(stats.capacity_bytes, DrawCache::kDefaultCapacityBytes);
}

TEST(DrawCacheTest, EvictsTheLeastRecentlyUsedToStayWithinItsBytes) {
  const int64_t draw_bytes = BytesOfOneDraw();
  DrawCache cache(2 * draw_bytes + draw_bytes / 2);
  cache.Insert(KeyOf(0), DrawOf(0));
  cache.Insert(KeyOf(1), DrawOf(1));
  ASSERT_TRUE(cache.Find(KeyOf(0)).has_value());  // draw 1 is now the least recently used
  cache.Insert(KeyOf(2), DrawOf(2));

  EXPECT_TRUE(cache.Find(KeyOf(0)).has_value());
  EXPECT_FALSE(cache.Find(KeyOf(1)).has_value());
  EXPECT_TRUE(cache.Find(KeyOf(2)).has_value());
  const DrawCacheStats stats = cache.stats();
  EXPECT_EQ(stats.evictions, 1);
  EXPECT_EQ(stats.entries, 2);
  EXPECT_EQ(stats.bytes, 2 * draw_bytes);
}

TEST(DrawCacheTest, KeepsNoDrawLargerThanItsCapacity) {
  DrawCache cache(BytesOfOneDraw(1000) - 1);
  cache.Insert(KeyOf(0), DrawOf(0, 10));
  cache.Insert(KeyOf(1), DrawOf(1, 1000));
  EXPECT_TRUE(cache.Find(KeyOf(0)).has_value());
  EXPECT_FALSE(cache.Find(KeyOf(1)).has_value());
  EXPECT_EQ(cache.stats().entries, 1);
  EXPECT_EQ(cache.stats().evictions, 0);
}

TEST(DrawCacheTest, AFoundDrawOutlivesItsEviction) {
  const int64_t draw_bytes = BytesOfOneDraw();
  DrawCache cache(draw_bytes);
  cache.Insert(KeyOf(0), DrawOf(5));
  std::optional<CachedDraw> kept = cache.Find(KeyOf(0));
  ASSERT_TRUE(kept.has_value());
  cache.Insert(KeyOf(1), DrawOf(6));
  ASSERT_EQ(cache.stats().evictions, 1);
  ASSERT_FALSE(cache.Find(KeyOf(0)).has_value());

  EXPECT_EQ(kept->inputs.use_count(), 1);  // the cache let go; the holder still owns it
  EXPECT_EQ((*kept->inputs)[0].ToDoubles(), std::vector<double>(1000, 5.0));
  EXPECT_EQ(kept->references->float64[0], std::vector<double>(1000, 10.0));
}

TEST(DrawCacheTest, DropsADrawChangedInMemory) {
  DrawCache cache;
  const CachedDraw draw = DrawOf(1);
  cache.Insert(KeyOf(0), draw);
  cache.Insert(KeyOf(1), DrawOf(2));
  // What a stray write into the process's memory would do.
  const_cast<HostTensor&>((*draw.inputs)[0]).Set(17, 1.5);

  EXPECT_FALSE(cache.Find(KeyOf(0)).has_value());
  EXPECT_FALSE(cache.Find(KeyOf(0)).has_value());  // dropped, not found again
  EXPECT_TRUE(cache.Find(KeyOf(1)).has_value());
  const DrawCacheStats stats = cache.stats();
  EXPECT_EQ(stats.corrupt, 1);
  EXPECT_EQ(stats.misses, 2);
  EXPECT_EQ(stats.entries, 1);

  // A changed reference is caught as well.
  const CachedDraw other = DrawOf(3);
  cache.Insert(KeyOf(2), other);
  const_cast<DrawReferences&>(*other.references).float64[0][999] = 0;
  // Unverified (a caller that checks its own device copy), it is served as it is now.
  std::optional<CachedDraw> unverified = cache.Find(KeyOf(2), /*verify=*/false);
  ASSERT_TRUE(unverified.has_value());
  EXPECT_EQ(unverified->references->float64[0][999], 0);
  EXPECT_FALSE(cache.Find(KeyOf(2)).has_value());
  EXPECT_EQ(cache.stats().corrupt, 2);
}

TEST(DrawCacheTest, ServesSeveralThreadsAtOnce) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 300;
  constexpr int kDraws = 12;
  const int64_t draw_bytes = BytesOfOneDraw(200);
  DrawCache cache(6 * draw_bytes);  // half the draws fit: the threads evict each other's
  std::vector<std::thread> threads;
  std::vector<int> wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&cache, &wrong, t] {
      for (int round = 0; round < kRounds; ++round) {
        const int draw = (round * 7 + t) % kDraws;
        std::optional<CachedDraw> found = cache.Find(KeyOf(draw));
        if (!found.has_value()) {
          cache.Insert(KeyOf(draw), DrawOf(draw, 200));
        } else if ((*found->inputs)[0].Get(199) != draw ||
                   found->references->float64[0][199] != 2 * draw) {
          ++wrong[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  const DrawCacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits + stats.input_hits + stats.misses, kThreads * kRounds);
  EXPECT_GT(stats.hits, 0);
  EXPECT_GT(stats.evictions, 0);
  EXPECT_EQ(stats.corrupt, 0);
  EXPECT_LE(stats.entries, 6);
  EXPECT_EQ(stats.bytes, stats.entries * draw_bytes);
}

}  // namespace
}  // namespace forge::judge
