#include "worker/judge/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/synchronization/notification.h"

namespace forge::judge {

// One ForEachChunk call. Shared with the workers that took it, so that a worker that claims past
// the last chunk touches memory that is still there after the caller has returned.
struct ThreadPool::Pass {
  Pass(int64_t count, absl::FunctionRef<void(int64_t, int64_t, int64_t)> body)
      : count(count), chunks(ChunkCount(count)), body(body) {}

  const int64_t count;
  const int64_t chunks;
  // Called only for claimed chunks, all of which finish before ForEachChunk returns.
  const absl::FunctionRef<void(int64_t, int64_t, int64_t)> body;
  std::atomic<int64_t> next_chunk{0};
  std::atomic<int64_t> chunks_done{0};
  absl::Notification all_done;
};

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { Work(); });
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
    work_available_.SignalAll();
  }
  for (std::thread& worker : workers_) worker.join();
}

ThreadPool& ThreadPool::Default() {
  static ThreadPool* const pool = [] {
    int threads = 0;
    if (const char* configured = std::getenv("FORGE_JUDGE_THREADS");
        configured == nullptr || !absl::SimpleAtoi(configured, &threads) || threads < 1 ||
        threads > 256) {
      threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1,
                           kMaxDefaultThreads);
    }
    return new ThreadPool(threads);
  }();
  return *pool;
}

void ThreadPool::ForEachChunk(int64_t count,
                              absl::FunctionRef<void(int64_t, int64_t, int64_t)> body) {
  const int64_t chunks = ChunkCount(count);
  if (chunks == 0) return;
  if (chunks == 1 || workers_.empty()) {
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      body(chunk, chunk * kChunkElements, std::min(count, (chunk + 1) * kChunkElements));
    }
    return;
  }
  auto pass = std::make_shared<Pass>(count, body);
  {
    absl::MutexLock lock(&mutex_);
    passes_.push_back(pass);
    work_available_.SignalAll();
  }
  RunChunks(*pass);
  {
    // Every chunk is claimed: no worker needs to find this pass any more.
    absl::MutexLock lock(&mutex_);
    passes_.erase(std::remove(passes_.begin(), passes_.end(), pass), passes_.end());
  }
  pass->all_done.WaitForNotification();
}

void ThreadPool::RunChunks(Pass& pass) {
  for (;;) {
    const int64_t chunk = pass.next_chunk.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= pass.chunks) return;
    pass.body(chunk, chunk * kChunkElements, std::min(pass.count, (chunk + 1) * kChunkElements));
    if (pass.chunks_done.fetch_add(1, std::memory_order_acq_rel) + 1 == pass.chunks) {
      pass.all_done.Notify();
    }
  }
}

void ThreadPool::Work() {
  for (;;) {
    std::shared_ptr<Pass> pass;
    {
      absl::MutexLock lock(&mutex_);
      while (!stopping_ && passes_.empty()) work_available_.Wait(&mutex_);
      if (stopping_) return;
      pass = passes_.front();
      if (pass->next_chunk.load(std::memory_order_relaxed) >= pass->chunks) {
        // Its caller will drop it; let the next pass come to the front meanwhile.
        passes_.erase(passes_.begin());
        continue;
      }
    }
    RunChunks(*pass);
  }
}

}  // namespace forge::judge
