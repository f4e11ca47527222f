// How repeatable the Timer is on a real GPU, and whether a plain copy kernel reaches the copy
// bandwidth the Timer reports as the memory ceiling (the issue "The judge, the timer and the
// sandbox", item 5). A measurement, not a test: it exits 0 unless a CUDA, NVRTC or file call
// fails, and prints each figure beside its target for the report to judge.
//
//   timer_quality OUT.json
//
// 1. Repeatability: each workload is timed by kCalls calls of Timer::Time in a row (L2 flushed,
//    warm-up, median of kRepsPerCall); the spread of the calls' medians, (max - min) / median,
//    is the figure, with each call's min / median / max and CUPTI kernel-only median.
// 2. Copy bandwidth: a vectorized copy kernel and cuMemcpyDtoD at several sizes, in GB/s (bytes
//    read plus written over the median), against Timer::CopyBandwidth(), itself sampled from
//    kCeilingSamples fresh Timers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status/status_macros.h"
#include "worker/compile/compile_pool.h"
#include "worker/gpu/device.h"
#include "worker/timer/stats.h"
#include "worker/timer/timer.h"

namespace forge {
namespace {

constexpr int kCalls = 10;
constexpr int kRepsPerCall = 20;
constexpr int kCeilingSamples = 5;
constexpr double kRepeatabilityTarget = 0.03;  // spread of the medians, for kernels >= 1 ms
constexpr double kLongKernelUs = 1000;
constexpr double kBandwidthTarget = 0.05;  // |copy kernel / CopyBandwidth() - 1|
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kHeadlineCopyBytes = 2048 * kMiB;
constexpr int64_t kLargeElementwiseElements = 1'600'000'000;
constexpr int64_t kSmallElementwiseElements = 32 * kMiB;  // about 0.1 ms
constexpr int kFmaIterations = 65536;                     // about 2 ms on an H200
constexpr int kThreadsPerBlock = 256;
constexpr int kFloat4PerThread = 4;  // loads in flight per thread before the stores

// Copy and elementwise kernels the way the generators write memory-bound kernels (float4
// accesses, all loads of a thread before its stores); the FMA chain is compute-bound, so its
// repeatability shows clock variation rather than memory-system variation.
constexpr char kKernelSource[] = R"(
extern "C" __global__ void copy_f4(const float4* __restrict__ src, float4* __restrict__ dst,
                                   unsigned long long n) {
  const unsigned long long base =
      blockIdx.x * (unsigned long long)(blockDim.x * FLOAT4_PER_THREAD) + threadIdx.x;
  float4 v[FLOAT4_PER_THREAD];
#pragma unroll
  for (int k = 0; k < FLOAT4_PER_THREAD; ++k) {
    const unsigned long long i = base + k * blockDim.x;
    if (i < n) v[k] = src[i];
  }
#pragma unroll
  for (int k = 0; k < FLOAT4_PER_THREAD; ++k) {
    const unsigned long long i = base + k * blockDim.x;
    if (i < n) dst[i] = v[k];
  }
}

__device__ __forceinline__ float mul_add_relu(float a, float b) {
  return fmaxf(a * b + 0.5f, 0.0f);
}

extern "C" __global__ void mul_add_relu_f4(const float4* __restrict__ a,
                                           const float4* __restrict__ b,
                                           float4* __restrict__ out, unsigned long long n) {
  const unsigned long long base =
      blockIdx.x * (unsigned long long)(blockDim.x * FLOAT4_PER_THREAD) + threadIdx.x;
  float4 x[FLOAT4_PER_THREAD], y[FLOAT4_PER_THREAD];
#pragma unroll
  for (int k = 0; k < FLOAT4_PER_THREAD; ++k) {
    const unsigned long long i = base + k * blockDim.x;
    if (i < n) { x[k] = a[i]; y[k] = b[i]; }
  }
#pragma unroll
  for (int k = 0; k < FLOAT4_PER_THREAD; ++k) {
    const unsigned long long i = base + k * blockDim.x;
    if (i < n) {
      out[i] = make_float4(mul_add_relu(x[k].x, y[k].x), mul_add_relu(x[k].y, y[k].y),
                           mul_add_relu(x[k].z, y[k].z), mul_add_relu(x[k].w, y[k].w));
    }
  }
}

extern "C" __global__ void fma_chain(float* out, float seed, int iterations) {
  const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  float a = seed + threadIdx.x * 1e-7f, b = a + 1e-3f, c = a + 2e-3f, d = a + 3e-3f;
  for (int k = 0; k < iterations; ++k) {
    a = fmaf(a, 0.9999f, 1e-4f);
    b = fmaf(b, 0.9999f, 1e-4f);
    c = fmaf(c, 0.9999f, 1e-4f);
    d = fmaf(d, 0.9999f, 1e-4f);
  }
  out[i] = a + b + c + d;
}
)";

struct Kernels {
  gpu::Module module;
  gpu::Kernel copy;
  gpu::Kernel elementwise;
  gpu::Kernel fma;
};

absl::StatusOr<Kernels> CompileKernels(const gpu::Device& device) {
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<compile::CompilePool> pool,
                         compile::CompilePool::Create({.threads = 1}));
  compile::CompileResult compiled =
      pool->Compile({.source = kKernelSource,
                     .name_expressions = {"copy_f4", "mul_add_relu_f4", "fma_chain"},
                     .arch = device.properties().arch(),
                     .options = {absl::StrCat("-DFLOAT4_PER_THREAD=", kFloat4PerThread)}});
  if (!compiled.ok()) {
    return Annotate(compiled.status,
                    absl::StrCat("compiling the timer-quality kernels: ", compiled.log));
  }
  FORGE_ASSIGN_OR_RETURN(gpu::Module module, device.LoadModule(compiled.cubin));
  FORGE_ASSIGN_OR_RETURN(gpu::Kernel copy, module.GetKernel(compiled.lowered_names["copy_f4"]));
  FORGE_ASSIGN_OR_RETURN(gpu::Kernel elementwise,
                         module.GetKernel(compiled.lowered_names["mul_add_relu_f4"]));
  FORGE_ASSIGN_OR_RETURN(gpu::Kernel fma, module.GetKernel(compiled.lowered_names["fma_chain"]));
  return Kernels{std::move(module), copy, elementwise, fma};
}

// Grid of the float4 kernels: one block per kThreadsPerBlock * kFloat4PerThread float4s.
gpu::LaunchShape Float4Shape(int64_t float4_count) {
  const int64_t per_block = int64_t{kThreadsPerBlock} * kFloat4PerThread;
  gpu::LaunchShape shape;
  shape.grid[0] = static_cast<uint32_t>((float4_count + per_block - 1) / per_block);
  shape.block[0] = kThreadsPerBlock;
  return shape;
}

absl::Status LaunchCopy(const gpu::Kernel& kernel, const gpu::DeviceBuffer& source,
                        gpu::DeviceBuffer& destination, gpu::Stream& stream) {
  CUdeviceptr src = source.address(), dst = destination.address();
  unsigned long long count = source.size_bytes() / 16;
  void* args[] = {&src, &dst, &count};
  return kernel.Launch(Float4Shape(static_cast<int64_t>(count)), args, stream);
}

double GigabytesPerSecond(int64_t bytes, double microseconds) {
  return static_cast<double>(bytes) / (microseconds * 1e-6) / 1e9;
}

std::string JsonDouble(double value) {
  return std::isfinite(value) ? absl::StrFormat("%.6g", value) : "null";
}

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n') ? ' ' : c;
  }
  return out + "\"";
}

// (max - min) / median of `values`.
double RangeOverMedian(const std::vector<double>& values) {
  const timer::Summary summary = timer::Summarize(values);
  return summary.median > 0 ? (summary.max - summary.min) / summary.median : 0;
}

struct Workload {
  std::string name;
  std::string description;
  timer::LaunchFn launch;
};

struct RepeatabilityResult {
  std::string name;
  std::string description;
  std::vector<timer::Timing> calls;
  std::vector<double> medians_us;
  std::vector<double> kernel_medians_us;  // empty when CUPTI recorded nothing
  double median_of_medians_us = 0;
  double spread_of_medians = 0;
  double kernel_spread_of_medians = 0;
  bool long_kernel = false;  // median >= kLongKernelUs: the 3% target applies
};

absl::StatusOr<RepeatabilityResult> MeasureRepeatability(timer::Timer& timer,
                                                         const Workload& workload) {
  RepeatabilityResult result{.name = workload.name, .description = workload.description};
  const timer::TimerOptions options{.reps = kRepsPerCall};
  for (int call = 0; call < kCalls; ++call) {
    absl::StatusOr<timer::Timing> timing = timer.Time(workload.launch, options);
    if (!timing.ok()) {
      return Annotate(timing.status(), absl::StrCat(workload.name, ", call ", call + 1));
    }
    result.medians_us.push_back(timing->summary.median);
    if (timing->kernel_summary) result.kernel_medians_us.push_back(timing->kernel_summary->median);
    result.calls.push_back(*std::move(timing));
  }
  result.median_of_medians_us = timer::Percentile(result.medians_us, 0.5);
  result.spread_of_medians = RangeOverMedian(result.medians_us);
  result.kernel_spread_of_medians = RangeOverMedian(result.kernel_medians_us);
  result.long_kernel = result.median_of_medians_us >= kLongKernelUs;
  return result;
}

// A workload owns its device buffers through the launch closure, so they are freed with it.
using BufferList = std::vector<gpu::DeviceBuffer>;

absl::StatusOr<std::shared_ptr<BufferList>> AllocateFilled(const gpu::Device& device,
                                                           gpu::Stream& stream, int count,
                                                           int64_t bytes, uint32_t pattern) {
  auto buffers = std::make_shared<BufferList>();
  for (int i = 0; i < count; ++i) {
    FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer, device.Allocate(static_cast<size_t>(bytes)));
    FORGE_RETURN_IF_ERROR(buffer.Fill32(pattern, stream));
    buffers->push_back(std::move(buffer));
  }
  FORGE_RETURN_IF_ERROR(stream.Synchronize());
  return buffers;
}

absl::StatusOr<Workload> CopyWorkload(const gpu::Device& device, gpu::Stream& stream,
                                      const gpu::Kernel& kernel, int64_t bytes) {
  FORGE_ASSIGN_OR_RETURN(std::shared_ptr<BufferList> buffers,
                         AllocateFilled(device, stream, 2, bytes, 0x3F800000u));
  return Workload{absl::StrCat("copy_", bytes / kMiB, "MiB"),
                  absl::StrCat("vectorized copy kernel, ", bytes / kMiB, " MiB"),
                  [&kernel, buffers](gpu::Stream& s) {
                    return LaunchCopy(kernel, (*buffers)[0], (*buffers)[1], s);
                  }};
}

absl::StatusOr<Workload> ElementwiseWorkload(const gpu::Device& device, gpu::Stream& stream,
                                             const gpu::Kernel& kernel, int64_t elements) {
  FORGE_ASSIGN_OR_RETURN(std::shared_ptr<BufferList> buffers,
                         AllocateFilled(device, stream, 3, elements * 4, 0x3F800000u));
  return Workload{
      absl::StrCat("mul_add_relu_", elements, "_f32"),
      absl::StrCat("elementwise max(a*b+0.5, 0), fp32, ", elements, " elements (2 in, 1 out)"),
      [&kernel, buffers, elements](gpu::Stream& s) {
        CUdeviceptr a = (*buffers)[0].address(), b = (*buffers)[1].address(),
                    out = (*buffers)[2].address();
        unsigned long long count = static_cast<unsigned long long>(elements / 4);
        void* args[] = {&a, &b, &out, &count};
        return kernel.Launch(Float4Shape(elements / 4), args, s);
      }};
}

absl::StatusOr<Workload> FmaWorkload(const gpu::Device& device, gpu::Stream& stream,
                                     const gpu::Kernel& kernel) {
  // One full wave: 8 blocks of 256 threads per SM (2048 threads, the SM's limit).
  gpu::LaunchShape shape;
  shape.grid[0] = static_cast<uint32_t>(device.properties().sm_count * 8);
  shape.block[0] = kThreadsPerBlock;
  const int64_t threads = int64_t{shape.grid[0]} * kThreadsPerBlock;
  FORGE_ASSIGN_OR_RETURN(std::shared_ptr<BufferList> buffers,
                         AllocateFilled(device, stream, 1, threads * 4, 0));
  return Workload{"fma_chain",
                  absl::StrCat("compute-bound: 4 dependent FMA chains of ", kFmaIterations,
                               " per thread, ", threads, " threads"),
                  [&kernel, buffers, shape](gpu::Stream& s) {
                    CUdeviceptr out = (*buffers)[0].address();
                    float seed = 0.5f;
                    int iterations = kFmaIterations;
                    void* args[] = {&out, &seed, &iterations};
                    return kernel.Launch(shape, args, s);
                  }};
}

struct CopyRow {
  int64_t bytes = 0;
  timer::Summary kernel;  // event-timed, like CopyBandwidth()
  timer::Summary memcpy;
  double kernel_gbps = 0;
  double memcpy_gbps = 0;
};

absl::StatusOr<CopyRow> MeasureCopy(timer::Timer& timer, const gpu::Kernel& kernel, int64_t bytes) {
  FORGE_ASSIGN_OR_RETURN(std::shared_ptr<BufferList> buffers,
                         AllocateFilled(timer.device(), timer.stream(), 2, bytes, 0x3F800000u));
  const gpu::DeviceBuffer& source = (*buffers)[0];
  gpu::DeviceBuffer& destination = (*buffers)[1];
  const timer::TimerOptions options{.reps = kRepsPerCall, .kernel_durations = false};
  FORGE_ASSIGN_OR_RETURN(
      timer::Timing kernel_timing,
      timer.Time([&](gpu::Stream& s) { return LaunchCopy(kernel, source, destination, s); },
                 options));
  FORGE_ASSIGN_OR_RETURN(
      timer::Timing memcpy_timing,
      timer.Time([&](gpu::Stream& s) { return destination.CopyFromDeviceAsync(source, s); },
                 options));
  return CopyRow{.bytes = bytes,
                 .kernel = kernel_timing.summary,
                 .memcpy = memcpy_timing.summary,
                 .kernel_gbps = GigabytesPerSecond(2 * bytes, kernel_timing.summary.median),
                 .memcpy_gbps = GigabytesPerSecond(2 * bytes, memcpy_timing.summary.median)};
}

std::string SummaryJson(const timer::Summary& summary) {
  return absl::StrCat(
      "{\"min_us\":", JsonDouble(summary.min), ",\"median_us\":", JsonDouble(summary.median),
      ",\"max_us\":", JsonDouble(summary.max), ",\"iqr_spread\":", JsonDouble(summary.spread), "}");
}

std::string RepeatabilityJson(const RepeatabilityResult& result) {
  std::vector<std::string> calls;
  for (const timer::Timing& timing : result.calls) {
    calls.push_back(absl::StrCat(
        "{\"event\":", SummaryJson(timing.summary),
        ",\"kernel\":", timing.kernel_summary ? SummaryJson(*timing.kernel_summary) : "null",
        ",\"kernels_per_rep\":", timing.kernels_per_rep,
        ",\"kernel_status\":", JsonString(timing.kernel_status.ToString()), "}"));
  }
  const bool passed = result.spread_of_medians < kRepeatabilityTarget;
  return absl::StrCat(
      "{\"name\":", JsonString(result.name), ",\"description\":", JsonString(result.description),
      ",\"median_of_medians_us\":", JsonDouble(result.median_of_medians_us),
      ",\"event_medians_us\":[",
      absl::StrJoin(result.medians_us, ",",
                    [](std::string* out, double v) { out->append(JsonDouble(v)); }),
      "],\"kernel_medians_us\":[",
      absl::StrJoin(result.kernel_medians_us, ",",
                    [](std::string* out, double v) { out->append(JsonDouble(v)); }),
      "],\"spread_of_medians\":", JsonDouble(result.spread_of_medians),
      ",\"kernel_spread_of_medians\":",
      result.kernel_medians_us.empty() ? "null" : JsonDouble(result.kernel_spread_of_medians),
      ",\"target_applies\":", result.long_kernel ? "true" : "false",
      ",\"pass\":", result.long_kernel ? (passed ? "true" : "false") : "null", ",\"calls\":[",
      absl::StrJoin(calls, ","), "]}");
}

std::string CopyRowJson(const CopyRow& row, double ceiling_gbps) {
  return absl::StrCat("{\"bytes\":", row.bytes, ",\"kernel\":", SummaryJson(row.kernel),
                      ",\"memcpy\":", SummaryJson(row.memcpy),
                      ",\"kernel_gbps\":", JsonDouble(row.kernel_gbps),
                      ",\"memcpy_gbps\":", JsonDouble(row.memcpy_gbps),
                      ",\"kernel_over_ceiling\":", JsonDouble(row.kernel_gbps / ceiling_gbps),
                      ",\"memcpy_over_ceiling\":", JsonDouble(row.memcpy_gbps / ceiling_gbps), "}");
}

std::string PassFail(bool passed) { return passed ? "pass" : "FAIL"; }

absl::Status Run(const std::string& out_path) {
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<gpu::Device> device, gpu::Device::Open(0));
  const gpu::DeviceProperties& properties = device->properties();
  std::printf("%s (%s), %d SMs, L2 %lld bytes, driver %d\n", properties.name.c_str(),
              properties.arch().c_str(), properties.sm_count,
              static_cast<long long>(properties.l2_cache_bytes), properties.driver_version);
  FORGE_ASSIGN_OR_RETURN(Kernels kernels, CompileKernels(*device));
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<timer::Timer> timer, timer::Timer::Create(*device));

  // The ceiling every ratio divides by is this Timer's CopyBandwidth(); fresh Timers' show how
  // much the ceiling itself moves from one measurement to the next.
  std::vector<double> ceiling_gbps;
  FORGE_ASSIGN_OR_RETURN(double bandwidth, timer->CopyBandwidth());
  ceiling_gbps.push_back(bandwidth / 1e9);
  for (int sample = 1; sample < kCeilingSamples; ++sample) {
    FORGE_ASSIGN_OR_RETURN(std::unique_ptr<timer::Timer> fresh, timer::Timer::Create(*device));
    FORGE_ASSIGN_OR_RETURN(double fresh_bandwidth, fresh->CopyBandwidth());
    ceiling_gbps.push_back(fresh_bandwidth / 1e9);
  }
  const double ceiling = ceiling_gbps.front();
  std::printf("Timer::CopyBandwidth(): %s GB/s (fresh Timers: %s)\n", JsonDouble(ceiling).c_str(),
              absl::StrJoin(ceiling_gbps, ", ", [](std::string* out, double v) {
                out->append(absl::StrFormat("%.1f", v));
              }).c_str());

  using WorkloadFactory = std::function<absl::StatusOr<Workload>()>;
  gpu::Stream& stream = timer->stream();
  const std::vector<WorkloadFactory> factories = {
      [&] { return CopyWorkload(*device, stream, kernels.copy, kHeadlineCopyBytes); },
      [&] { return CopyWorkload(*device, stream, kernels.copy, 4096 * kMiB); },
      [&] {
        return ElementwiseWorkload(*device, stream, kernels.elementwise, kLargeElementwiseElements);
      },
      [&] { return FmaWorkload(*device, stream, kernels.fma); },
      [&] {
        return ElementwiseWorkload(*device, stream, kernels.elementwise, kSmallElementwiseElements);
      },
  };
  std::vector<RepeatabilityResult> repeatability;
  for (const WorkloadFactory& factory : factories) {
    FORGE_ASSIGN_OR_RETURN(Workload workload, factory());
    FORGE_ASSIGN_OR_RETURN(RepeatabilityResult result, MeasureRepeatability(*timer, workload));
    std::printf("%s: medians %s us\n", result.name.c_str(),
                absl::StrJoin(result.medians_us, " ", [](std::string* out, double v) {
                  out->append(absl::StrFormat("%.1f", v));
                }).c_str());
    for (int call = 0; call < kCalls; ++call) {
      const timer::Timing& timing = result.calls[call];
      std::printf(
          "  call %2d: min %.1f median %.1f max %.1f us, CUPTI kernel median "
          "%s\n",
          call + 1, timing.summary.min, timing.summary.median, timing.summary.max,
          timing.kernel_summary ? absl::StrFormat("%.1f us", timing.kernel_summary->median).c_str()
                                : timing.kernel_status.ToString().c_str());
    }
    repeatability.push_back(std::move(result));
  }

  std::vector<CopyRow> copy_rows;
  for (int64_t bytes : {256 * kMiB, 1024 * kMiB, kHeadlineCopyBytes, 4096 * kMiB}) {
    FORGE_ASSIGN_OR_RETURN(CopyRow row, MeasureCopy(*timer, kernels.copy, bytes));
    copy_rows.push_back(row);
  }
  const CopyRow& headline =
      *std::find_if(copy_rows.begin(), copy_rows.end(),
                    [](const CopyRow& row) { return row.bytes == kHeadlineCopyBytes; });
  const double headline_ratio = headline.kernel_gbps / ceiling;
  const bool bandwidth_passed = std::abs(headline_ratio - 1) <= kBandwidthTarget;

  std::vector<std::string> repeatability_json, copy_json;
  for (const RepeatabilityResult& result : repeatability) {
    repeatability_json.push_back(RepeatabilityJson(result));
  }
  for (const CopyRow& row : copy_rows) copy_json.push_back(CopyRowJson(row, ceiling));
  const std::string json = absl::StrCat(
      "{\"device\":", JsonString(properties.name), ",\"arch\":", JsonString(properties.arch()),
      ",\"sm_count\":", properties.sm_count, ",\"l2_cache_bytes\":", properties.l2_cache_bytes,
      ",\"driver_version\":", properties.driver_version, ",\"calls\":", kCalls,
      ",\"reps_per_call\":", kRepsPerCall,
      ",\"repeatability_target\":", JsonDouble(kRepeatabilityTarget),
      ",\"long_kernel_us\":", JsonDouble(kLongKernelUs),
      ",\"bandwidth_target\":", JsonDouble(kBandwidthTarget), ",\"repeatability\":[",
      absl::StrJoin(repeatability_json, ","), "],\"copy_ceiling_gbps\":", JsonDouble(ceiling),
      ",\"copy_ceiling_samples_gbps\":[",
      absl::StrJoin(ceiling_gbps, ",",
                    [](std::string* out, double v) { out->append(JsonDouble(v)); }),
      "],\"copy_ceiling_spread\":", JsonDouble(RangeOverMedian(ceiling_gbps)), ",\"copy_sweep\":[",
      absl::StrJoin(copy_json, ","), "],\"headline\":{\"copy_bytes\":", kHeadlineCopyBytes,
      ",\"kernel_gbps\":", JsonDouble(headline.kernel_gbps),
      ",\"ceiling_gbps\":", JsonDouble(ceiling), ",\"ratio\":", JsonDouble(headline_ratio),
      ",\"pass\":", bandwidth_passed ? "true" : "false", "}}\n");
  std::ofstream out(out_path);
  out << json;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", out_path));

  std::printf(
      "\n== timer quality (%d calls of Timer::Time, median of %d reps "
      "each) ==\n",
      kCalls, kRepsPerCall);
  std::printf(
      "| workload | median of medians (us) | spread of %d medians | "
      "CUPTI kernel-only "
      "median (us) | its spread | target < 3%% (>= 1 ms) "
      "|\n|---|---|---|---|---|---|\n",
      kCalls);
  for (const RepeatabilityResult& result : repeatability) {
    const bool has_kernel = !result.kernel_medians_us.empty();
    std::printf(
        "| %s | %.1f | %.2f%% | %s | %s | %s |\n", result.name.c_str(), result.median_of_medians_us,
        100 * result.spread_of_medians,
        has_kernel
            ? absl::StrFormat("%.1f", timer::Percentile(result.kernel_medians_us, 0.5)).c_str()
            : "n/a",
        has_kernel ? absl::StrFormat("%.2f%%", 100 * result.kernel_spread_of_medians).c_str()
                   : "n/a",
        result.long_kernel ? PassFail(result.spread_of_medians < kRepeatabilityTarget).c_str()
                           : "(< 1 ms, no target)");
  }
  std::printf(
      "\n| copy size | copy kernel GB/s | cuMemcpyDtoD GB/s | kernel / "
      "ceiling | "
      "memcpy / ceiling |\n|---|---|---|---|---|\n");
  for (const CopyRow& row : copy_rows) {
    std::printf("| %lld MiB | %.1f | %.1f | %.3f | %.3f |\n",
                static_cast<long long>(row.bytes / kMiB), row.kernel_gbps, row.memcpy_gbps,
                row.kernel_gbps / ceiling, row.memcpy_gbps / ceiling);
  }
  std::printf(
      "\nTimer::CopyBandwidth() = %.1f GB/s (spread over %d fresh Timers "
      "%.2f%%); copy "
      "kernel at %lld MiB = %.1f GB/s; ratio %.3f: %s (target within 5%%)\n",
      ceiling, kCeilingSamples, 100 * RangeOverMedian(ceiling_gbps),
      static_cast<long long>(kHeadlineCopyBytes / kMiB), headline.kernel_gbps, headline_ratio,
      PassFail(bandwidth_passed).c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace forge

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.json\n", argv[0]);
    return 2;
  }
  const absl::Status status = forge::Run(argv[1]);
  if (!status.ok()) {
    std::fprintf(stderr, "timer_quality: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
