#include "worker/judge/thread_pool.h"

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace forge::judge {
namespace {

constexpr int64_t kChunk = ThreadPool::kChunkElements;

TEST(ThreadPoolTest, EveryChunkRunsOnceWithItsBounds) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int64_t count : {int64_t{0}, int64_t{1}, kChunk, kChunk + 1, 7 * kChunk - 3}) {
      std::vector<std::atomic<int>> visits(count);
      std::vector<std::atomic<int>> chunk_runs(ThreadPool::ChunkCount(count));
      pool.ForEachChunk(count, [&](int64_t chunk, int64_t begin, int64_t end) {
        EXPECT_EQ(begin, chunk * kChunk);
        EXPECT_EQ(end, std::min(count, (chunk + 1) * kChunk));
        ++chunk_runs[chunk];
        for (int64_t i = begin; i < end; ++i) ++visits[i];
      });
      for (const auto& runs : chunk_runs) EXPECT_EQ(runs.load(), 1) << count;
      for (int64_t i = 0; i < count; ++i) ASSERT_EQ(visits[i].load(), 1) << "element " << i;
    }
  }
}

TEST(ThreadPoolTest, ChunkCountRoundsUp) {
  EXPECT_EQ(ThreadPool::ChunkCount(0), 0);
  EXPECT_EQ(ThreadPool::ChunkCount(1), 1);
  EXPECT_EQ(ThreadPool::ChunkCount(kChunk), 1);
  EXPECT_EQ(ThreadPool::ChunkCount(kChunk + 1), 2);
}

TEST(ThreadPoolTest, ASingleChunkRunsOnTheCallingThread) {
  ThreadPool pool(4);
  std::thread::id ran_on;
  pool.ForEachChunk(kChunk,
                    [&](int64_t, int64_t, int64_t) { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(ThreadPoolTest, LargePassesUseTheWorkers) {
  ThreadPool pool(3);
  // Each chunk waits until a thread other than the caller has run a chunk too, or gives up: with
  // workers, some chunk runs elsewhere.
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> worker_ran{false};
  pool.ForEachChunk(64 * kChunk, [&](int64_t, int64_t, int64_t) {
    if (std::this_thread::get_id() != caller) worker_ran = true;
    for (int spins = 0; spins < 100000 && !worker_ran; ++spins) std::this_thread::yield();
  });
  EXPECT_TRUE(worker_ran);
}

TEST(ThreadPoolTest, ConcurrentCallersEachGetAllTheirChunks) {
  ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::vector<int64_t> totals(4, 0);
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 20; ++round) {
        std::atomic<int64_t> elements{0};
        pool.ForEachChunk(10 * kChunk + c, [&](int64_t, int64_t begin, int64_t end) {
          elements += end - begin;
        });
        totals[c] += elements;
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  for (int c = 0; c < 4; ++c) EXPECT_EQ(totals[c], 20 * (10 * kChunk + c)) << "caller " << c;
}

TEST(ChunkedSumTest, SameForEveryNumberOfThreadsAndPlainWithinAChunk) {
  auto term = [](int64_t i) { return std::sin(0.37 * static_cast<double>(i)) * 1e3 + 1e-3; };
  const int64_t count = 9 * kChunk + 17;
  ThreadPool serial(1);
  const double expected = ChunkedSum(serial, count, term);
  for (int threads : {2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(ChunkedSum(pool, count, term), expected) << threads << " threads";
  }
  // Up to one chunk, the plain left-to-right sum.
  double plain = 0;
  for (int64_t i = 0; i < kChunk; ++i) plain += term(i);
  ThreadPool pool(4);
  EXPECT_EQ(ChunkedSum(pool, kChunk, term), plain);
  // Beyond, the chunks' sums added in order.
  double chunked = 0;
  for (int64_t chunk = 0; chunk < ThreadPool::ChunkCount(count); ++chunk) {
    double sum = 0;
    for (int64_t i = chunk * kChunk; i < std::min(count, (chunk + 1) * kChunk); ++i) sum += term(i);
    chunked += sum;
  }
  EXPECT_EQ(expected, chunked);
}

}  // namespace
}  // namespace forge::judge
