// The threads of the judge's passes over large tensors on the host (comparing outputs with their
// reference, checking inputs came back unchanged, hashing cached draws). A pass splits its index
// range into fixed chunks of kChunkElements; the chunks run on the pool's threads and on the
// calling thread, and whatever the pass reduces (counts, maxima, first indices, sums) is combined
// in chunk order. The chunking depends on the range alone, never on the number of threads, so a
// pass gives bit-for-bit the same result on one thread or sixteen; a range of one chunk runs on the
// calling thread alone, exactly as a plain loop would, so small kernels pay nothing for the pool.
#ifndef FORGE_WORKER_JUDGE_THREAD_POOL_H_
#define FORGE_WORKER_JUDGE_THREAD_POOL_H_

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace forge::judge {

class ThreadPool {
 public:
  // Elements per chunk: large enough that claiming a chunk costs nothing next to its work, small
  // enough that a 16M-element tensor keeps 16 threads busy (256 chunks).
  static constexpr int64_t kChunkElements = int64_t{1} << 16;
  // The largest pool Default() makes: a host pass is bound by memory bandwidth long before.
  static constexpr int kMaxDefaultThreads = 16;

  // A pool of `threads` threads in all, the caller's included: threads - 1 workers (none for 1).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process's pool: $FORGE_JUDGE_THREADS threads when set to a number from 1 to 256, else the
  // hardware's threads, at most kMaxDefaultThreads. Made on first use.
  static ThreadPool& Default();

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Chunks of a range of `count` elements.
  static int64_t ChunkCount(int64_t count) {
    return count <= 0 ? 0 : (count + kChunkElements - 1) / kChunkElements;
  }

  // Runs body(chunk, begin, end) once for every chunk [begin, end) of [0, count), chunk c being
  // [c * kChunkElements, min(count, (c + 1) * kChunkElements)), and returns when all have run.
  // Chunks run concurrently and in no particular order; the calling thread runs chunks too, so the
  // pass completes even if every worker is busy with another caller's. Thread-safe.
  void ForEachChunk(int64_t count,
                    absl::FunctionRef<void(int64_t chunk, int64_t begin, int64_t end)> body);

 private:
  struct Pass;

  void Work();
  // Runs chunks of `pass` until none is left unclaimed.
  static void RunChunks(Pass& pass);

  absl::Mutex mutex_;
  absl::CondVar work_available_;
  // Passes with chunks left to claim, oldest first.
  std::vector<std::shared_ptr<Pass>> passes_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> workers_;
};

// Sum of term(i) over [0, count): each chunk summed left to right, the chunks' sums added in chunk
// order. Beyond one chunk this is not the order a single left-to-right loop adds in (the result can
// differ from it in the last bits), but it is the same for every number of threads.
template <typename Term>
double ChunkedSum(ThreadPool& pool, int64_t count, const Term& term) {
  std::vector<double> sums(ThreadPool::ChunkCount(count));
  pool.ForEachChunk(count, [&](int64_t chunk, int64_t begin, int64_t end) {
    double sum = 0;
    for (int64_t i = begin; i < end; ++i) sum += term(i);
    sums[chunk] = sum;
  });
  double total = 0;
  for (double sum : sums) total += sum;
  return total;
}

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_THREAD_POOL_H_
