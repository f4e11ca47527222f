#include "worker/compile/compile_pool.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace forge::compile {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kElfMagic[] = "\x7f\x45\x4c\x46";  // "\x7fELF"

constexpr char kScaleSource[] = R"(
template <typename T> __global__ void scale(T* data, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}
)";

constexpr char kSharedSource[] = R"(
extern "C" __global__ void reverse_block(float* out) {
  __shared__ float buf[256];
  buf[threadIdx.x] = out[blockIdx.x * 256 + threadIdx.x];
  __syncthreads();
  out[blockIdx.x * 256 + threadIdx.x] = buf[255 - threadIdx.x];
}
)";

// `local` is indexed with values only known at run time, so it cannot live in registers;
// `pressure` keeps 48 accumulators live, more than --maxrregcount=32 allows.
constexpr char kStackSource[] = R"(
extern "C" __global__ void gather_local(float* out, const int* idx, int n) {
  float local[256];
  for (int i = 0; i < 256; ++i) local[i] = out[(i * 7 + threadIdx.x) % n];
  for (int r = 0; r < 8; ++r) local[idx[r] & 255] += local[idx[r + 8] & 255];
  out[threadIdx.x] = local[idx[threadIdx.x] & 255];
}
extern "C" __global__ void pressure(float* out, const float* in) {
  float acc[48];
  #pragma unroll
  for (int i = 0; i < 48; ++i) acc[i] = in[threadIdx.x + i * 1024];
  #pragma unroll
  for (int r = 0; r < 16; ++r) {
    #pragma unroll
    for (int i = 0; i < 48; ++i) acc[i] = acc[i] * acc[(i + r) % 48] + in[r];
  }
  float s = 0;
  #pragma unroll
  for (int i = 0; i < 48; ++i) s += acc[i];
  out[threadIdx.x] = s;
}
)";

constexpr char kSyntaxErrorSource[] = R"(
extern "C" __global__ void broken(float* out) { out[0] = 1.0f }
)";

CompileRequest ScaleRequest(const std::string& arch = "sm_90") {
  CompileRequest request;
  request.source = kScaleSource;
  request.name_expressions = {"scale<float>"};
  request.arch = arch;
  return request;
}

// A distinct small kernel for each `variant`, so each needs its own compile.
CompileRequest VariantRequest(int variant) {
  CompileRequest request;
  request.source = absl::StrReplaceAll(R"(
extern "C" __global__ void add_VARIANT(float* data) { data[threadIdx.x] += VARIANT.0f; }
)",
                                       {{"VARIANT", absl::StrCat(variant)}});
  request.name_expressions = {absl::StrCat("add_", variant)};
  return request;
}

std::unique_ptr<CompilePool> MakePool(CompilePoolOptions options = {}) {
  absl::StatusOr<std::unique_ptr<CompilePool>> pool = CompilePool::Create(std::move(options));
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *std::move(pool) : nullptr;
}

TEST(CompilePoolTest, CompilesForSm80AndSm90) {
  std::unique_ptr<CompilePool> pool = MakePool();
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->nvrtc_version(), "13.0");
  for (const std::string arch : {"sm_80", "sm_90"}) {
    SCOPED_TRACE(arch);
    const CompileResult result = pool->Compile(ScaleRequest(arch));
    ASSERT_TRUE(result.ok()) << result.status << "\n" << result.log;
    EXPECT_THAT(result.cubin, StartsWith(kElfMagic));
    EXPECT_EQ(result.source, CompileSource::kCompiled);
    EXPECT_GT(result.compile_seconds, 0);
    ASSERT_EQ(result.lowered_names.count("scale<float>"), 1u);
    const std::string& mangled = result.lowered_names.at("scale<float>");
    EXPECT_EQ(mangled, "_Z5scaleIfEvPT_S0_i");
    const PtxasFunctionReport* kernel = result.ptxas.Find(mangled);
    ASSERT_NE(kernel, nullptr) << result.log;
    EXPECT_TRUE(kernel->is_entry);
    EXPECT_EQ(kernel->arch, arch);
    EXPECT_GT(kernel->registers, 0);
    EXPECT_EQ(kernel->shared_memory_bytes, 0);
    EXPECT_EQ(kernel->stack_frame_bytes, 0);
  }
  // sm_80 and sm_90 are separate entries, not one cached cubin.
  EXPECT_EQ(pool->stats().compiles, 2);
}

TEST(CompilePoolTest, ReportsStaticSharedMemory) {
  std::unique_ptr<CompilePool> pool = MakePool();
  ASSERT_NE(pool, nullptr);
  CompileRequest request;
  request.source = kSharedSource;
  request.name_expressions = {"reverse_block"};
  const CompileResult result = pool->Compile(request);
  ASSERT_TRUE(result.ok()) << result.status << "\n" << result.log;
  EXPECT_EQ(result.lowered_names.at("reverse_block"), "reverse_block");
  const PtxasFunctionReport* kernel = result.ptxas.Find("reverse_block");
  ASSERT_NE(kernel, nullptr) << result.log;
  EXPECT_EQ(kernel->shared_memory_bytes, 256 * sizeof(float));
  EXPECT_EQ(kernel->barriers, 1);
}

TEST(CompilePoolTest, ReportsStackFrameAndSpills) {
  std::unique_ptr<CompilePool> pool = MakePool();
  ASSERT_NE(pool, nullptr);
  CompileRequest request;
  request.source = kStackSource;
  request.options = {"--maxrregcount=32"};
  const CompileResult result = pool->Compile(request);
  ASSERT_TRUE(result.ok()) << result.status << "\n" << result.log;

  const PtxasFunctionReport* gather = result.ptxas.Find("gather_local");
  ASSERT_NE(gather, nullptr) << result.log;
  EXPECT_GE(gather->stack_frame_bytes, 256 * sizeof(float));

  const PtxasFunctionReport* pressure = result.ptxas.Find("pressure");
  ASSERT_NE(pressure, nullptr) << result.log;
  EXPECT_LE(pressure->registers, 32);
  EXPECT_GT(pressure->stack_frame_bytes, 0);
  EXPECT_GT(pressure->spill_store_bytes, 0);
  EXPECT_GT(pressure->spill_load_bytes, 0);
}

TEST(CompilePoolTest, SyntaxErrorIsAResultAndThePoolKeepsServing) {
  std::unique_ptr<CompilePool> pool = MakePool({.threads = 1});
  ASSERT_NE(pool, nullptr);
  CompileRequest broken;
  broken.source = kSyntaxErrorSource;
  const CompileResult failed = pool->Compile(broken);
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(failed.status.message(), HasSubstr("kernel.cu(2): error: expected a \";\""));
  EXPECT_THAT(failed.log, HasSubstr("error: expected a \";\""));
  EXPECT_TRUE(failed.cubin.empty());

  // Failures are not cached: the same request compiles (and fails) again.
  EXPECT_FALSE(pool->Compile(broken).ok());

  const CompileResult good = pool->Compile(ScaleRequest());
  EXPECT_TRUE(good.ok()) << good.status;

  const CompilePoolStats stats = pool->stats();
  EXPECT_EQ(stats.requests, 3);
  EXPECT_EQ(stats.compiles, 3);
  EXPECT_EQ(stats.failures, 2);
}

TEST(CompilePoolTest, UnknownNameExpressionIsAResult) {
  std::unique_ptr<CompilePool> pool = MakePool({.threads = 1});
  ASSERT_NE(pool, nullptr);
  CompileRequest request = ScaleRequest();
  request.name_expressions = {"no_such_kernel<float>"};
  const CompileResult result = pool->Compile(request);
  EXPECT_EQ(result.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.log, HasSubstr("\"no_such_kernel\" is undefined"));
}

TEST(CompilePoolTest, UnsupportedArchIsAClearFailure) {
  std::unique_ptr<CompilePool> pool = MakePool({.threads = 1});
  ASSERT_NE(pool, nullptr);

  const CompileResult unknown = pool->Compile(ScaleRequest("sm_999"));
  EXPECT_EQ(unknown.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status.message(), HasSubstr("arch 'sm_999' is not supported by NVRTC"));
  EXPECT_THAT(unknown.status.message(), HasSubstr("sm_90"));  // lists what is supported

  // CUDA 13 dropped Volta.
  EXPECT_THAT(pool->Compile(ScaleRequest("sm_70")).status.message(),
              HasSubstr("arch 'sm_70' is not supported"));
  // A virtual arch would give PTX, not a cubin.
  EXPECT_THAT(pool->Compile(ScaleRequest("compute_90")).status.message(),
              HasSubstr("not a GPU architecture"));

  const CompilePoolStats stats = pool->stats();
  EXPECT_EQ(stats.failures, 3);
  EXPECT_EQ(stats.compiles, 0);  // refused before NVRTC runs
}

TEST(CompilePoolTest, CompilesForAdaHopperArchSpecificAndBlackwell) {
  std::unique_ptr<CompilePool> pool = MakePool();
  ASSERT_NE(pool, nullptr);
  std::vector<std::future<CompileResult>> futures;
  for (const std::string arch : {"sm_89", "sm_90a", "sm_100"}) {
    futures.push_back(pool->Submit(ScaleRequest(arch)));
  }
  for (std::future<CompileResult>& future : futures) {
    const CompileResult result = future.get();
    EXPECT_TRUE(result.ok()) << result.status;
    EXPECT_THAT(result.cubin, StartsWith(kElfMagic));
  }
}

TEST(CompilePoolTest, RepeatIsAMemoryHitWithIdenticalBytes) {
  std::unique_ptr<CompilePool> pool = MakePool();
  ASSERT_NE(pool, nullptr);
  const CompileResult first = pool->Compile(ScaleRequest());
  ASSERT_TRUE(first.ok()) << first.status;
  const CompileResult second = pool->Compile(ScaleRequest());
  ASSERT_TRUE(second.ok()) << second.status;
  EXPECT_EQ(second.source, CompileSource::kMemoryCache);
  EXPECT_TRUE(second.cache_hit());
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(second.lowered_names, first.lowered_names);
  EXPECT_EQ(second.ptxas, first.ptxas);

  // Any input that changes the cubin changes the key.
  CompileRequest other_options = ScaleRequest();
  other_options.options = {"--use_fast_math"};
  EXPECT_NE(pool->CacheKey(other_options), pool->CacheKey(ScaleRequest()));
  EXPECT_NE(pool->CacheKey(ScaleRequest("sm_80")), pool->CacheKey(ScaleRequest()));

  const CompilePoolStats stats = pool->stats();
  EXPECT_EQ(stats.compiles, 1);
  EXPECT_EQ(stats.memory_hits, 1);
}

TEST(CompilePoolTest, EvictsTheOldestEntryPastTheMemoryBudget) {
  std::unique_ptr<CompilePool> measure = MakePool({.threads = 1});
  ASSERT_NE(measure, nullptr);
  const CompileResult a = measure->Compile(VariantRequest(1));
  const CompileResult b = measure->Compile(VariantRequest(2));
  ASSERT_TRUE(a.ok() && b.ok());
  const auto entry_bytes = [](const CompileResult& r) {
    return static_cast<std::int64_t>(r.cubin.size() + r.log.size());
  };

  // Room for either entry but not both, with a margin for the logs' "Compile time = ..." figures,
  // whose length varies from run to run.
  const std::int64_t budget =
      std::max(entry_bytes(a), entry_bytes(b)) + std::min(entry_bytes(a), entry_bytes(b)) / 2;
  std::unique_ptr<CompilePool> pool = MakePool({.threads = 1, .memory_cache_bytes = budget});
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->Compile(VariantRequest(1)).source, CompileSource::kCompiled);
  EXPECT_EQ(pool->Compile(VariantRequest(2)).source, CompileSource::kCompiled);
  EXPECT_EQ(pool->Compile(VariantRequest(2)).source, CompileSource::kMemoryCache);
  EXPECT_EQ(pool->Compile(VariantRequest(1)).source, CompileSource::kCompiled);
}

// A new pool on `cache_dir` (a restarted worker) answers `request` from disk without compiling,
// with what `built` had, and then from memory.
void ExpectDiskHit(const std::string& cache_dir, const CompileRequest& request,
                   const CompileResult& built) {
  std::unique_ptr<CompilePool> pool = MakePool({.disk_cache_dir = cache_dir});
  ASSERT_NE(pool, nullptr);
  const CompileResult loaded = pool->Compile(request);
  ASSERT_TRUE(loaded.ok()) << loaded.status;
  EXPECT_EQ(loaded.source, CompileSource::kDiskCache);
  EXPECT_EQ(loaded.cubin, built.cubin);
  EXPECT_EQ(loaded.lowered_names, built.lowered_names);
  EXPECT_EQ(loaded.log, built.log);
  EXPECT_EQ(loaded.ptxas, built.ptxas);
  EXPECT_DOUBLE_EQ(loaded.compile_seconds, built.compile_seconds);

  // Once read from disk it is served from memory.
  EXPECT_EQ(pool->Compile(request).source, CompileSource::kMemoryCache);
  const CompilePoolStats stats = pool->stats();
  EXPECT_EQ(stats.compiles, 0);
  EXPECT_EQ(stats.disk_hits, 1);
  EXPECT_EQ(stats.memory_hits, 1);
}

TEST(CompilePoolTest, NewPoolOnTheSameDirectoryGetsADiskHit) {
  forge::testing::TempDir dir;
  const std::string cache_dir = dir.path() + "/cubins";
  CompileResult compiled;
  {
    std::unique_ptr<CompilePool> pool = MakePool({.disk_cache_dir = cache_dir});
    ASSERT_NE(pool, nullptr);
    compiled = pool->Compile(ScaleRequest());
    ASSERT_TRUE(compiled.ok()) << compiled.status;
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(cache_dir) /
                                        (pool->CacheKey(ScaleRequest()).ToHex() + ".forgecubin")));
  }
  // Only the entry itself is left behind, no temporary files.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(cache_dir),
                          std::filesystem::directory_iterator()),
            1);

  ExpectDiskHit(cache_dir, ScaleRequest(), compiled);
}

TEST(CompilePoolTest, CorruptDiskEntryIsRecompiled) {
  forge::testing::TempDir dir;
  std::filesystem::path entry;
  std::string original_cubin;
  {
    std::unique_ptr<CompilePool> pool = MakePool({.disk_cache_dir = dir.path()});
    ASSERT_NE(pool, nullptr);
    const CompileResult compiled = pool->Compile(ScaleRequest());
    ASSERT_TRUE(compiled.ok()) << compiled.status;
    original_cubin = compiled.cubin;
    entry = std::filesystem::path(dir.path()) /
            (pool->CacheKey(ScaleRequest()).ToHex() + ".forgecubin");
  }
  // Flip one byte inside the stored cubin, as a bad disk or a torn copy would.
  {
    std::fstream file(entry, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(file);
    file.seekp(static_cast<std::streamoff>(std::filesystem::file_size(entry) - 100));
    file.put('\x55');
  }

  {
    std::unique_ptr<CompilePool> pool = MakePool({.disk_cache_dir = dir.path()});
    ASSERT_NE(pool, nullptr);
    const CompileResult recompiled = pool->Compile(ScaleRequest());
    ASSERT_TRUE(recompiled.ok()) << recompiled.status;
    EXPECT_EQ(recompiled.source, CompileSource::kCompiled);
    EXPECT_EQ(recompiled.cubin, original_cubin);
    const CompilePoolStats stats = pool->stats();
    EXPECT_EQ(stats.disk_rejects, 1);
    EXPECT_EQ(stats.disk_hits, 0);
    EXPECT_EQ(stats.compiles, 1);
  }

  // The recompile replaced the bad entry.
  std::unique_ptr<CompilePool> pool = MakePool({.disk_cache_dir = dir.path()});
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->Compile(ScaleRequest()).source, CompileSource::kDiskCache);
}

TEST(CompilePoolTest, ConcurrentIdenticalRequestsCompileOnce) {
  std::unique_ptr<CompilePool> pool = MakePool({.threads = 4});
  ASSERT_NE(pool, nullptr);
  constexpr int kRequests = 16;
  std::vector<CompileResult> results(kRequests);
  std::vector<std::thread> callers;
  for (int i = 0; i < kRequests; ++i) {
    callers.emplace_back([&pool, &results, i] { results[i] = pool->Compile(ScaleRequest()); });
  }
  for (std::thread& caller : callers) caller.join();

  int compiled = 0;
  for (const CompileResult& result : results) {
    ASSERT_TRUE(result.ok()) << result.status;
    EXPECT_EQ(result.cubin, results[0].cubin);
    if (result.source == CompileSource::kCompiled) ++compiled;
  }
  EXPECT_EQ(compiled, 1);
  const CompilePoolStats stats = pool->stats();
  EXPECT_EQ(stats.requests, kRequests);
  EXPECT_EQ(stats.compiles, 1);
  EXPECT_EQ(stats.in_flight_joins + stats.memory_hits, kRequests - 1);
}

TEST(CompilePoolTest, DifferentKernelsAcrossThreadsAllSucceed) {
  std::unique_ptr<CompilePool> pool = MakePool({.threads = 4});
  ASSERT_NE(pool, nullptr);
  constexpr int kKernels = 8;
  std::vector<std::future<CompileResult>> futures;
  for (int i = 0; i < kKernels; ++i) futures.push_back(pool->Submit(VariantRequest(i)));

  std::set<std::string> cubins;
  double compile_seconds = 0;
  for (int i = 0; i < kKernels; ++i) {
    const CompileResult result = futures[i].get();
    ASSERT_TRUE(result.ok()) << result.status;
    EXPECT_EQ(result.source, CompileSource::kCompiled);
    EXPECT_NE(result.ptxas.Find(absl::StrCat("add_", i)), nullptr) << result.log;
    cubins.insert(result.cubin);
    compile_seconds += result.compile_seconds;
  }
  EXPECT_EQ(cubins.size(), static_cast<std::size_t>(kKernels));

  const CompilePoolStats stats = pool->stats();
  EXPECT_EQ(stats.requests, kKernels);
  EXPECT_EQ(stats.compiles, kKernels);
  EXPECT_EQ(stats.failures, 0);
  EXPECT_EQ(stats.memory_hits + stats.disk_hits + stats.in_flight_joins, 0);
  // Summed in a different order than the pool did, so equal only up to rounding.
  EXPECT_NEAR(stats.compile_seconds, compile_seconds, 1e-9 * compile_seconds);
  EXPECT_GT(stats.compiles_per_second, 0);
  std::cout << "compile pool: " << stats.compiles << " compiles on 4 threads in "
            << stats.uptime_seconds << " s = " << stats.compiles_per_second
            << " compiles/s (NVRTC time " << stats.compile_seconds << " s)\n";
}

TEST(CompilePoolTest, ShutdownAnswersEveryQueuedRequest) {
  std::vector<std::future<CompileResult>> futures;
  {
    std::unique_ptr<CompilePool> pool = MakePool({.threads = 1});
    ASSERT_NE(pool, nullptr);
    for (int i = 0; i < 4; ++i) futures.push_back(pool->Submit(VariantRequest(100 + i)));
  }
  for (std::future<CompileResult>& future : futures) {
    const CompileResult result = future.get();  // a broken promise would throw here
    EXPECT_TRUE(result.ok() || absl::IsCancelled(result.status)) << result.status;
  }
}

TEST(CompilePoolTest, RejectsBadOptions) {
  EXPECT_EQ(CompilePool::Create({.threads = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  forge::testing::TempDir dir;
  const std::string file = dir.path() + "/not_a_directory";
  std::ofstream(file) << "x";
  EXPECT_EQ(CompilePool::Create({.disk_cache_dir = file + "/cache"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// ---- shared objects through nvcc (host-launched candidates) -------------------------------------

// testdata/host_launch_scale.cu: the host-launch ABI over one small kernel (no CUTLASS: ~2-6 s).
std::string HostLaunchSource() {
  std::ifstream in(FORGE_HOST_LAUNCH_TEST_SOURCE);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

CompileRequest SharedObjectRequest(std::string source = HostLaunchSource()) {
  CompileRequest request;
  request.output = codegen::CompileOutput::kNvccSharedObject;
  request.source = std::move(source);
  request.arch = "sm_90";
  return request;
}

TEST(CompilePoolSharedObjectTest, BuildsReportsAndCachesInMemoryAndOnDisk) {
  ASSERT_FALSE(HostLaunchSource().empty()) << FORGE_HOST_LAUNCH_TEST_SOURCE;
  forge::testing::TempDir dir;
  const std::string cache_dir = dir.path() + "/objects";
  CompileResult built;
  {
    std::unique_ptr<CompilePool> pool = MakePool({.disk_cache_dir = cache_dir});
    ASSERT_NE(pool, nullptr);
    built = pool->Compile(SharedObjectRequest());
    ASSERT_TRUE(built.ok()) << built.status << "\n" << built.log;
    EXPECT_THAT(built.cubin, StartsWith(kElfMagic));
    EXPECT_EQ(built.source, CompileSource::kCompiled);
    EXPECT_GT(built.compile_seconds, 0);
    EXPECT_TRUE(built.lowered_names.empty());
    // The pool's command line, sm_90 built as its arch-specific variant, and ptxas' report of the
    // one kernel (a mangled name in an anonymous namespace).
    EXPECT_THAT(built.log, HasSubstr("-arch=sm_90a"));
    EXPECT_THAT(built.log, HasSubstr("-Xptxas -v"));
    ASSERT_EQ(built.ptxas.functions.size(), 1u) << built.log;
    const PtxasFunctionReport& kernel = built.ptxas.functions.begin()->second;
    EXPECT_THAT(built.ptxas.functions.begin()->first, HasSubstr("scale_through_workspace"));
    EXPECT_TRUE(kernel.is_entry);
    EXPECT_EQ(kernel.arch, "sm_90a");
    EXPECT_GT(kernel.registers, 0);

    const CompileResult again = pool->Compile(SharedObjectRequest());
    EXPECT_EQ(again.source, CompileSource::kMemoryCache);
    EXPECT_EQ(again.cubin, built.cubin);
    EXPECT_EQ(pool->stats().compiles, 1);
    EXPECT_EQ(pool->stats().memory_hits, 1);
    absl::StatusOr<NvccToolchain> toolchain = pool->nvcc_toolchain();
    ASSERT_TRUE(toolchain.ok()) << toolchain.status();
    EXPECT_THAT(toolchain->nvcc_version, HasSubstr("release 13."));
  }
  // A restarted worker (a new pool on the same directory) finds the object without nvcc.
  ExpectDiskHit(cache_dir, SharedObjectRequest(), built);
}

TEST(CompilePoolSharedObjectTest, KeyCoversKindSourceOptionsAndArch) {
  std::unique_ptr<CompilePool> pool = MakePool();
  ASSERT_NE(pool, nullptr);
  const CompileRequest base = SharedObjectRequest("extern \"C\" int f() { return 1; }");
  const Digest key = pool->CacheKey(base);
  EXPECT_EQ(pool->CacheKey(SharedObjectRequest("extern \"C\" int f() { return 1; }")), key);

  CompileRequest as_cubin = base;
  as_cubin.output = codegen::CompileOutput::kNvrtcCubin;
  CompileRequest other_source = base;
  other_source.source += "\n";
  CompileRequest with_option = base;
  with_option.options = {"-DFORGE_TEST_LAUNCH_FAILS"};
  CompileRequest other_option = base;
  other_option.options = {"-DFORGE_TEST_LAUNCH_FAILS=2"};
  CompileRequest other_arch = base;
  other_arch.arch = "sm_100";
  std::set<std::string> keys = {key.ToHex()};
  for (const CompileRequest* request :
       {&as_cubin, &other_source, &with_option, &other_option, &other_arch}) {
    keys.insert(pool->CacheKey(*request).ToHex());
  }
  EXPECT_EQ(keys.size(), 6u);
  // No compile was needed to tell them apart.
  EXPECT_EQ(pool->stats().compiles, 0);
}

TEST(CompilePoolSharedObjectTest, SourceThatDoesNotCompileGivesNvccsLog) {
  std::unique_ptr<CompilePool> pool = MakePool();
  ASSERT_NE(pool, nullptr);
  const CompileResult result =
      pool->Compile(SharedObjectRequest("extern \"C\" int forge_host_abi_version(void) { return 1 }"));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kInvalidArgument) << result.status;
  EXPECT_THAT(result.status.message(), HasSubstr("with nvcc"));
  EXPECT_THAT(result.status.message(), HasSubstr("error"));
  EXPECT_THAT(result.log, HasSubstr("kernel.cu"));
  EXPECT_THAT(result.log, HasSubstr("nvcc"));
  EXPECT_TRUE(result.cubin.empty());
  // Failures are not cached: the same request runs nvcc again.
  const CompileResult again = pool->Compile(
      SharedObjectRequest("extern \"C\" int forge_host_abi_version(void) { return 1 }"));
  EXPECT_FALSE(again.ok());
  EXPECT_EQ(again.source, CompileSource::kCompiled);
  EXPECT_EQ(pool->stats().compiles, 2);
  EXPECT_EQ(pool->stats().failures, 2);
}

TEST(CompilePoolSharedObjectTest, MissingCutlassHeadersAreNamed) {
  std::unique_ptr<CompilePool> pool = MakePool({.cutlass_include = ""});
  ASSERT_NE(pool, nullptr);
  const CompileResult result =
      pool->Compile(SharedObjectRequest("#include \"cutlass/cutlass.h\"\nint x;\n"));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kInvalidArgument) << result.status;
  EXPECT_THAT(result.status.message(), HasSubstr("CUTLASS's headers"));
  EXPECT_THAT(result.status.message(), HasSubstr("--compile.cutlass-include"));
}

TEST(CompilePoolSharedObjectTest, MissingNvccIsAClearFailureAndCubinsStillCompile) {
  std::unique_ptr<CompilePool> pool = MakePool({.nvcc_path = "/nonexistent/cuda/bin/nvcc"});
  ASSERT_NE(pool, nullptr);
  const CompileResult result = pool->Compile(SharedObjectRequest());
  EXPECT_EQ(result.status.code(), absl::StatusCode::kFailedPrecondition) << result.status;
  EXPECT_THAT(result.status.message(), HasSubstr("/nonexistent/cuda/bin/nvcc"));
  EXPECT_THAT(result.status.message(), HasSubstr("--compile.nvcc"));
  EXPECT_TRUE(pool->Compile(ScaleRequest()).ok());
  EXPECT_EQ(pool->stats().failures, 1);
}

TEST(CompilePoolSharedObjectTest, NvccPastItsTimeoutIsKilled) {
  std::unique_ptr<CompilePool> pool = MakePool({.nvcc_timeout = absl::Milliseconds(1)});
  ASSERT_NE(pool, nullptr);
  const CompileResult result = pool->Compile(SharedObjectRequest());
  EXPECT_EQ(result.status.code(), absl::StatusCode::kDeadlineExceeded) << result.status;
  EXPECT_THAT(result.status.message(), HasSubstr("killed"));
}

TEST(CompileRequestForTest, CubinsByKernelNameSharedObjectsWithThePlansOptions) {
  codegen::GeneratedKernel kernel;
  kernel.source = "extern \"C\" __global__ void k() {}";
  kernel.kernel_name = "k";
  kernel.compile_options = {"-DNOT_FOR_NVRTC"};  // a cubin plan has none; never passed to NVRTC
  std::optional<CompileRequest> request = CompileRequestFor(kernel, "sm_80");
  ASSERT_TRUE(request.has_value());
  EXPECT_EQ(request->output, codegen::CompileOutput::kNvrtcCubin);
  EXPECT_EQ(request->name_expressions, std::vector<std::string>{"k"});
  EXPECT_EQ(request->arch, "sm_80");
  EXPECT_TRUE(request->options.empty());
  kernel.kernel_name.clear();  // the ATen fallback, a plain cuBLASLt call
  EXPECT_FALSE(CompileRequestFor(kernel, "sm_80").has_value());

  kernel.hints.executor = codegen::Executor::kHostLaunched;
  kernel.compile_output = codegen::CompileOutput::kNvccSharedObject;
  kernel.compile_options = {"-DTILE=128"};
  request = CompileRequestFor(kernel, "sm_90");
  ASSERT_TRUE(request.has_value());
  EXPECT_EQ(request->output, codegen::CompileOutput::kNvccSharedObject);
  EXPECT_EQ(request->source, kernel.source);
  EXPECT_EQ(request->options, kernel.compile_options);
  EXPECT_TRUE(request->name_expressions.empty());
}

TEST(CompilePoolSharedObjectTest, NameExpressionsAreRefused) {
  std::unique_ptr<CompilePool> pool = MakePool();
  ASSERT_NE(pool, nullptr);
  CompileRequest request = SharedObjectRequest();
  request.name_expressions = {"forge_launch"};
  EXPECT_EQ(pool->Compile(std::move(request)).status.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace forge::compile
