// The compile stage of Forge's pipeline: CUDA C++ -> cubin for one GPU architecture through NVRTC,
// with ptxas' resource report. NVRTC needs neither a GPU nor the driver, so this runs anywhere the
// toolkit is installed.
//
// CompilePool runs compiles on its own threads. Results are cached in memory and, optionally, on
// disk, keyed by the SHA-256 of everything that determines the cubin (source, arch, options, name
// expressions, NVRTC version); equal requests submitted while one is compiling share that compile.
#ifndef FORGE_WORKER_COMPILE_COMPILE_POOL_H_
#define FORGE_WORKER_COMPILE_COMPILE_POOL_H_

#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/digest/sha256.h"
#include "worker/compile/ptxas_report.h"

namespace forge::compile {

struct CompileRequest {
  std::string source;  // CUDA C++
  // Kernels to keep and look up by name: "my_kernel", "gemm<128, 64>", "ns::f". Each comes back
  // in CompileResult::lowered_names with the mangled name the cubin uses.
  std::vector<std::string> name_expressions;
  std::string arch = "sm_90";  // a real GPU architecture (sm_XX, sm_XXa or sm_XXf), not compute_XX
  // Extra NVRTC options, e.g. "--use_fast_math", "--maxrregcount=64", "-DTILE=128". The pool adds
  // --gpu-architecture and --ptxas-options=-v itself.
  std::vector<std::string> options;
};

// Where a result's cubin came from.
enum class CompileSource {
  kCompiled,        // NVRTC ran for this request
  kMemoryCache,     // an earlier identical request's result
  kDiskCache,       // read back from the pool's cache directory
  kJoinedInFlight,  // an identical request was compiling when this one arrived; shares its result
};

struct CompileResult {
  // OK, or why there is no cubin: InvalidArgument for a source that does not compile, an
  // unsupported arch or a rejected option (the NVRTC log says more), Internal for NVRTC failures.
  absl::Status status;
  std::string cubin;                                 // ELF bytes; empty unless ok()
  std::map<std::string, std::string> lowered_names;  // name expression -> mangled name
  std::string log;                                   // the NVRTC program log, ptxas lines included
  PtxasReport ptxas;                                 // parsed from `log`
  double compile_seconds = 0;  // NVRTC time of the compile that produced this result
  CompileSource source = CompileSource::kCompiled;

  bool ok() const { return status.ok(); }
  bool cache_hit() const {
    return source == CompileSource::kMemoryCache || source == CompileSource::kDiskCache;
  }
};

struct CompilePoolOptions {
  int threads = 2;
  // Where compiled results persist across pools and processes; empty keeps them in memory only.
  std::string disk_cache_dir;
  // Past this many bytes of cubins and logs the oldest in-memory entries are dropped.
  std::int64_t memory_cache_bytes = std::int64_t{256} << 20;
};

struct CompilePoolStats {
  std::int64_t requests = 0;
  std::int64_t compiles = 0;  // NVRTC runs, failed ones included
  std::int64_t failures = 0;  // requests answered with an error
  std::int64_t memory_hits = 0;
  std::int64_t disk_hits = 0;
  std::int64_t in_flight_joins = 0;
  std::int64_t disk_rejects = 0;         // cache files that failed their checksum or parse
  std::int64_t disk_write_failures = 0;  // results that could not be saved to disk
  double compile_seconds = 0;            // summed over `compiles`
  double uptime_seconds = 0;
  double compiles_per_second = 0;  // compiles / uptime
};

class CompilePool {
 public:
  // Starts `options.threads` workers. Fails for a thread count below 1 or a disk cache directory
  // that cannot be created.
  static absl::StatusOr<std::unique_ptr<CompilePool>> Create(CompilePoolOptions options);

  // Requests still queued are answered with Cancelled; compiles already running finish first.
  ~CompilePool();
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  // Never throws and never leaves the future without a value; errors are in the result.
  std::future<CompileResult> Submit(CompileRequest request);
  // Submit() and wait.
  CompileResult Compile(CompileRequest request);

  CompilePoolStats stats() const;
  // "13.0": part of every cache key, so a toolkit upgrade never serves old cubins.
  const std::string& nvrtc_version() const { return nvrtc_version_; }
  // The cache key of `request`; on disk the entry is <disk_cache_dir>/<key hex>.forgecubin.
  Digest CacheKey(const CompileRequest& request) const;

 private:
  struct Job {
    Digest key;
    CompileRequest request;
  };
  struct MemoryEntry {
    CompileResult result;
    std::int64_t bytes;
  };

  CompilePool(CompilePoolOptions options, std::string nvrtc_version, std::vector<int> archs);
  void WorkerLoop();
  CompileResult Produce(const Job& job);
  void Finish(const Digest& key, CompileResult result);
  void RememberLocked(const Digest& key, const CompileResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  bool HasWorkOrStopping() const ABSL_SHARED_LOCKS_REQUIRED(mutex_);

  const CompilePoolOptions options_;
  const std::string nvrtc_version_;
  const std::vector<int> supported_archs_;  // NVRTC's sm numbers: 75, 80, ..., 121
  const absl::Time created_;

  mutable absl::Mutex mutex_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mutex_);
  // Every request waiting on the compile of a key; the first one started it.
  absl::flat_hash_map<Digest, std::vector<std::promise<CompileResult>>> in_flight_
      ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<Digest, MemoryEntry> memory_cache_ ABSL_GUARDED_BY(mutex_);
  std::deque<Digest> memory_cache_order_ ABSL_GUARDED_BY(mutex_);  // oldest first
  std::int64_t memory_cache_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  CompilePoolStats stats_ ABSL_GUARDED_BY(mutex_);

  std::vector<std::thread> workers_;
};

}  // namespace forge::compile

#endif  // FORGE_WORKER_COMPILE_COMPILE_POOL_H_
