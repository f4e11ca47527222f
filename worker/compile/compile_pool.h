// The compile stage of Forge's pipeline: CUDA C++ -> cubin for one GPU architecture through NVRTC,
// with ptxas' resource report; or, for host-launched candidates (CUTLASS kernels, whose launch
// needs host code: compiler/codegen/host_launch_abi.h), a whole translation unit -> a shared object
// through the toolkit's nvcc, run as a child process (worker/compile/nvcc.h). Neither needs a GPU
// or the driver, so this runs anywhere the toolkit is installed.
//
// CompilePool runs compiles on its own threads. Results are cached in memory and, optionally, on
// disk, keyed by the SHA-256 of everything that determines the output: the kind, source, arch,
// options, name expressions and the compiler's version (NVRTC's; for shared objects nvcc's
// `--version` text, the CUTLASS headers' version, the host-launch ABI header, the host compiler's
// version and the C library's: NvccToolchain). Equal requests
// submitted while one is compiling share that compile. A restarted pool with the same disk cache
// directory finds both kinds there.
//
// With a catalog (object_catalog.h: the fleet's, kept by the coordinator), a request missing both
// caches is looked up there before it is compiled, and what the pool compiles is published there
// (shared objects always; cubins when catalog_cubins: NVRTC takes ~0.1-1 s, little for a round
// trip to save). A catalog entry is taken only when it decodes as a cache entry of the request's
// own key with an ELF object; anything else (missing, unreachable, refused, garbage) compiles
// locally: the catalog never fails a request.
//
// Metrics, when CompilePoolOptions::registry is set: forge_worker_compile_seconds{output} (each
// compile run here that succeeded), forge_worker_catalog_lookups_total{outcome=hit|miss|error|
// rejected}, forge_worker_catalog_publishes_total{outcome=stored|exists|error}.
#ifndef FORGE_WORKER_COMPILE_COMPILE_POOL_H_
#define FORGE_WORKER_COMPILE_COMPILE_POOL_H_

#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <optional>
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
#include "common/metrics/metrics.h"
#include "compiler/codegen/generated_kernel.h"
#include "worker/compile/nvcc.h"
#include "worker/compile/object_catalog.h"
#include "worker/compile/ptxas_report.h"

namespace forge::compile {

struct CompileRequest {
  // kNvrtcCubin: NVRTC -> the cubin of the named kernels. kNvccSharedObject: nvcc -> a shared
  // object (LaunchPlan::compile_output of a host-launched candidate); `source` is then a whole
  // translation unit exporting host_launch_abi.h's entry points, which may #include
  // "compiler/codegen/host_launch_abi.h" (the pool provides it) and CUTLASS's headers.
  codegen::CompileOutput output = codegen::CompileOutput::kNvrtcCubin;
  std::string source;  // CUDA C++
  // Kernels to keep and look up by name: "my_kernel", "gemm<128, 64>", "ns::f". Each comes back
  // in CompileResult::lowered_names with the mangled name the cubin uses. Cubins only: must be
  // empty for a shared object.
  std::vector<std::string> name_expressions;
  // A real GPU architecture (sm_XX, sm_XXa or sm_XXf), not compute_XX. Shared objects are built
  // for its arch-specific variant (SharedObjectArch: sm_90 -> sm_90a).
  std::string arch = "sm_90";
  // Extra compiler options. NVRTC's, e.g. "--use_fast_math", "--maxrregcount=64", "-DTILE=128";
  // the pool adds --gpu-architecture and --ptxas-options=-v itself. For a shared object nvcc's
  // (LaunchPlan::compile_options), after the pool's own (NvccCommand).
  std::vector<std::string> options;
};

// The compile a generated candidate needs for `arch`: NVRTC's cubin of kernel.kernel_name, or for
// a host-launched candidate (kernel.compile_output kNvccSharedObject) nvcc's shared object with the
// plan's compile_options; nullopt for a cubin candidate without a kernel name (the ATen fallback,
// a plain cuBLASLt call), which has nothing to compile. The worker's executors, the emulated
// backend and the GPU benchmarks all ask with it, so that their compiles of one kernel share one
// cache entry.
std::optional<CompileRequest> CompileRequestFor(const codegen::GeneratedKernel& kernel,
                                                const std::string& arch);

// Where a result's cubin came from.
enum class CompileSource {
  kCompiled,        // NVRTC ran for this request
  kMemoryCache,     // an earlier identical request's result
  kDiskCache,       // read back from the pool's cache directory
  kJoinedInFlight,  // an identical request was compiling when this one arrived; shares its result
  kCatalog,         // another worker's compile, from the fleet's catalog (object_catalog.h)
};

struct CompileResult {
  // OK, or why there is no output: InvalidArgument for a source that does not compile, an
  // unsupported arch or a rejected option (the log says more), Internal for NVRTC failures.
  // Shared objects also: FailedPrecondition when nvcc is missing (the message names the path and
  // the worker flag), DeadlineExceeded when nvcc ran past CompilePoolOptions::nvcc_timeout; a
  // source that needs CUTLASS's headers where there are none says so.
  absl::Status status;
  // ELF bytes, empty unless ok(): the cubin, or for kNvccSharedObject the shared object.
  std::string cubin;
  std::map<std::string, std::string> lowered_names;  // name expression -> mangled name (cubins)
  // The NVRTC program log, or nvcc's command line and output; ptxas lines included.
  std::string log;
  PtxasReport ptxas;  // parsed from `log`
  double compile_seconds = 0;  // NVRTC or nvcc time of the compile that produced this result
  CompileSource source = CompileSource::kCompiled;

  bool ok() const { return status.ok(); }
  bool cache_hit() const {
    return source == CompileSource::kMemoryCache || source == CompileSource::kDiskCache ||
           source == CompileSource::kCatalog;
  }
};

struct CompilePoolOptions {
  int threads = 2;
  // Where compiled results persist across pools and processes; empty keeps them in memory only.
  std::string disk_cache_dir;
  // Past this many bytes of cubins and logs the oldest in-memory entries are dropped.
  std::int64_t memory_cache_bytes = std::int64_t{256} << 20;
  // Shared objects: the nvcc to run (looked up at the first such request, so a pool without one
  // still compiles cubins), the CUTLASS headers passed to it (empty or without
  // cutlass/version.h: none), and how long one nvcc run may take before it is killed. A CUTLASS
  // sm90 configuration takes about 45 s on one core.
  std::string nvcc_path = DefaultNvccPath();
  std::string cutlass_include = DefaultCutlassInclude();
  absl::Duration nvcc_timeout = absl::Minutes(10);
  // The fleet's catalog of compiled objects; null: none. Shared by whoever else holds it.
  std::shared_ptr<ObjectCatalog> catalog;
  // Cubins go through the catalog too (shared objects always do).
  bool catalog_cubins = false;
  // Where the pool's metrics go (the header comment lists them); null: nowhere. Must outlive the
  // pool; Create fails when it has the families already.
  metrics::Registry* registry = nullptr;
};

struct CompilePoolStats {
  std::int64_t requests = 0;
  std::int64_t compiles = 0;  // NVRTC and nvcc runs, failed ones included
  std::int64_t failures = 0;  // requests answered with an error
  std::int64_t memory_hits = 0;
  std::int64_t disk_hits = 0;
  std::int64_t in_flight_joins = 0;
  std::int64_t disk_rejects = 0;         // cache files that failed their checksum or parse
  std::int64_t disk_write_failures = 0;  // results that could not be saved to disk
  double compile_seconds = 0;            // summed over `compiles`
  // The catalog (object_catalog.h): lookups by outcome, and publishes.
  std::int64_t catalog_hits = 0;
  std::int64_t catalog_misses = 0;
  std::int64_t catalog_errors = 0;   // unreachable, timed out, refused
  std::int64_t catalog_rejects = 0;  // served bytes that were no cache entry of the key
  std::int64_t catalog_publishes = 0;          // entries stored in the catalog
  std::int64_t catalog_publish_failures = 0;
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
  // The nvcc and CUTLASS headers shared objects are built with, described at the first call (it
  // runs `nvcc --version` once); the error says what is missing.
  absl::StatusOr<NvccToolchain> nvcc_toolchain() const;
  // The cache key of `request`; on disk the entry is <disk_cache_dir>/<key hex>.forgecubin (for
  // shared objects too). A shared object's key without a usable nvcc is never looked up.
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
  struct Metrics {
    metrics::Family<metrics::Histogram>* compile_seconds = nullptr;
    metrics::Family<metrics::Counter>* lookups = nullptr;
    metrics::Family<metrics::Counter>* publishes = nullptr;
  };

  CompilePool(CompilePoolOptions options, std::string nvrtc_version, std::vector<int> archs,
              Metrics metrics);
  void WorkerLoop();
  // The result of `job`, from the disk cache, the catalog or a compile; `publish` gets the cache
  // entry to publish to the catalog afterwards, when there is one.
  CompileResult Produce(const Job& job, std::string& publish);
  // Whether `request` goes through the catalog.
  bool UsesCatalog(const CompileRequest& request) const;
  // The catalog's entry for `job`, decoded and checked; nullopt to compile.
  std::optional<CompileResult> FromCatalog(const Job& job);
  void PublishToCatalog(const Job& job, double compile_seconds, absl::string_view entry);
  void CountLookup(absl::string_view outcome) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The compile itself, by the request's output kind.
  CompileResult Run(const CompileRequest& request) const;
  // Why the pool cannot take `request` at all (an arch it does not know, nvcc missing), or OK.
  absl::Status CheckRequest(const CompileRequest& request) const;
  void Finish(const Digest& key, CompileResult result);
  void RememberLocked(const Digest& key, const CompileResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  bool HasWorkOrStopping() const ABSL_SHARED_LOCKS_REQUIRED(mutex_);

  const CompilePoolOptions options_;
  const std::string nvrtc_version_;
  const std::vector<int> supported_archs_;  // NVRTC's sm numbers: 75, 80, ..., 121
  const absl::Time created_;
  const Metrics metrics_;

  mutable absl::Mutex toolchain_mutex_;
  mutable std::optional<absl::StatusOr<NvccToolchain>> toolchain_ ABSL_GUARDED_BY(toolchain_mutex_);

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
