#include "common/arch/arch.h"

#include <algorithm>
#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace forge {
namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;
constexpr std::int64_t kKiB = 1024;
constexpr std::int64_t kMiB = 1024 * 1024;

// Datasheet figures (NVIDIA's product briefs and the CUDA programming guide's per-capability
// limits); dense tensor-core rates (the datasheets' sparse figures halved); fp64 is the CUDA-core
// rate. The H200's bandwidth, bf16 and fp32 rates are MEASURED on Forge's H200 (docs: "Facts about
// the machines"), because a floor the hardware cannot reach would flatter every kernel; its other
// figures are the datasheet's.
std::vector<GpuArch> BuildTable() {
  std::vector<GpuArch> gpus;
  gpus.push_back(GpuArch{
      .name = "A100",  // SXM4 80GB
      .arch = "sm_80",
      .compute_capability = 80,
      .sm_count = 108,
      .l2_bytes = 40 * kMiB,
      .shared_memory_per_sm_bytes = 164 * kKiB,
      .shared_memory_per_block_bytes = 163 * kKiB,
      .registers_per_sm = 65536,
      .max_threads_per_sm = 2048,
      .boost_clock_hz = 1.410 * kGiga,
      .dram_bytes_per_second = 2.039 * kTera,
      .peak_fp32_flops = 19.5 * kTera,
      .peak_tf32_flops = 156 * kTera,
      .peak_bf16_flops = 312 * kTera,
      .peak_fp8_flops = 0,  // no fp8 tensor cores before sm_89
      .peak_fp64_flops = 9.7 * kTera,
  });
  gpus.push_back(GpuArch{
      .name = "H100",  // SXM5 80GB
      .arch = "sm_90",
      .compute_capability = 90,
      .sm_count = 132,
      .l2_bytes = 50 * kMiB,
      .shared_memory_per_sm_bytes = 228 * kKiB,
      .shared_memory_per_block_bytes = 227 * kKiB,
      .registers_per_sm = 65536,
      .max_threads_per_sm = 2048,
      .boost_clock_hz = 1.980 * kGiga,
      .dram_bytes_per_second = 3.35 * kTera,
      .peak_fp32_flops = 67 * kTera,
      .peak_tf32_flops = 494.7 * kTera,
      .peak_bf16_flops = 989.4 * kTera,
      .peak_fp8_flops = 1978.9 * kTera,
      .peak_fp64_flops = 34 * kTera,
  });
  gpus.push_back(GpuArch{
      .name = "H200",  // SXM 141GB
      .arch = "sm_90",
      .compute_capability = 90,
      .sm_count = 132,
      .l2_bytes = 60 * kMiB,
      .shared_memory_per_sm_bytes = 228 * kKiB,
      .shared_memory_per_block_bytes = 227 * kKiB,
      .registers_per_sm = 65536,
      .max_threads_per_sm = 2048,
      .boost_clock_hz = 1.980 * kGiga,
      .dram_bytes_per_second = 4.3 * kTera,  // measured (datasheet: 4.8 TB/s)
      .peak_fp32_flops = 51 * kTera,         // measured, cuBLAS fp32 without TF32 (datasheet: 67)
      .peak_tf32_flops = 494.7 * kTera,
      .peak_bf16_flops = 790 * kTera,  // measured bf16 matmul (datasheet: 989.4)
      .peak_fp8_flops = 1978.9 * kTera,
      .peak_fp64_flops = 34 * kTera,
  });
  gpus.push_back(GpuArch{
      .name = "L40S",
      .arch = "sm_89",
      .compute_capability = 89,
      .sm_count = 142,
      .l2_bytes = 96 * kMiB,
      .shared_memory_per_sm_bytes = 100 * kKiB,
      .shared_memory_per_block_bytes = 99 * kKiB,
      .registers_per_sm = 65536,
      .max_threads_per_sm = 1536,
      .boost_clock_hz = 2.520 * kGiga,
      .dram_bytes_per_second = 0.864 * kTera,
      .peak_fp32_flops = 91.6 * kTera,
      .peak_tf32_flops = 183 * kTera,
      .peak_bf16_flops = 362 * kTera,
      .peak_fp8_flops = 733 * kTera,
      .peak_fp64_flops = 1.43 * kTera,  // 1/64 of fp32
  });
  gpus.push_back(GpuArch{
      .name = "RTX 4090",
      .arch = "sm_89",
      .compute_capability = 89,
      .sm_count = 128,
      .l2_bytes = 72 * kMiB,
      .shared_memory_per_sm_bytes = 100 * kKiB,
      .shared_memory_per_block_bytes = 99 * kKiB,
      .registers_per_sm = 65536,
      .max_threads_per_sm = 1536,
      .boost_clock_hz = 2.520 * kGiga,
      .dram_bytes_per_second = 1.008 * kTera,
      .peak_fp32_flops = 82.6 * kTera,
      .peak_tf32_flops = 82.6 * kTera,
      .peak_bf16_flops = 165.2 * kTera,  // with fp32 accumulation (GeForce runs it at half rate)
      .peak_fp8_flops = 330.3 * kTera,   // with fp32 accumulation
      .peak_fp64_flops = 1.29 * kTera,
  });
  gpus.push_back(GpuArch{
      .name = "B200",  // HGX B200 figures per GPU
      .arch = "sm_100",
      .compute_capability = 100,
      .sm_count = 148,
      .l2_bytes = 126 * kMiB,
      .shared_memory_per_sm_bytes = 228 * kKiB,
      .shared_memory_per_block_bytes = 227 * kKiB,
      .registers_per_sm = 65536,
      .max_threads_per_sm = 2048,
      .boost_clock_hz = 1.965 * kGiga,
      .dram_bytes_per_second = 8.0 * kTera,
      .peak_fp32_flops = 75 * kTera,
      .peak_tf32_flops = 1125 * kTera,
      .peak_bf16_flops = 2250 * kTera,
      .peak_fp8_flops = 4500 * kTera,
      .peak_fp64_flops = 37 * kTera,
  });
  return gpus;
}

// The comparison key of a GPU name: lower case, without spaces, dashes and underscores.
std::string NameKey(absl::string_view name) {
  std::string key;
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_') continue;
    key.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return key;
}

}  // namespace

absl::string_view MathModeName(MathMode mode) {
  switch (mode) {
    case MathMode::kFp32: return "fp32";
    case MathMode::kTf32: return "tf32";
    case MathMode::kBf16: return "bf16";
    case MathMode::kFp8: return "fp8";
    case MathMode::kFp64: return "fp64";
  }
  return "unknown";
}

double GpuArch::PeakFlops(MathMode mode) const {
  switch (mode) {
    case MathMode::kFp32: return peak_fp32_flops;
    case MathMode::kTf32: return peak_tf32_flops;
    case MathMode::kBf16: return peak_bf16_flops;
    case MathMode::kFp8: return peak_fp8_flops;
    case MathMode::kFp64: return peak_fp64_flops;
  }
  return 0;
}

const std::vector<GpuArch>& KnownGpus() {
  static const std::vector<GpuArch>* const gpus = new std::vector<GpuArch>(BuildTable());
  return *gpus;
}

absl::StatusOr<GpuArch> FindGpu(absl::string_view name) {
  const std::string key = NameKey(name);
  std::vector<std::string> names;
  for (const GpuArch& gpu : KnownGpus()) {
    if (NameKey(gpu.name) == key) return gpu;
    names.push_back(gpu.name);
  }
  return absl::NotFoundError(absl::StrCat("unknown GPU '", name,
                                          "'; known GPUs: ", absl::StrJoin(names, ", ")));
}

absl::string_view BoundName(Bound bound) {
  return bound == Bound::kMemory ? "memory-bound" : "compute-bound";
}

absl::StatusOr<Roofline> RooflineFloor(const GpuArch& gpu, double flops, double bytes,
                                       MathMode mode) {
  if (flops < 0 || bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("roofline floor needs non-negative counts, got flops=", flops,
                     " bytes=", bytes));
  }
  const double peak = gpu.PeakFlops(mode);
  if (flops > 0 && peak <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(gpu.name, " has no ", MathModeName(mode),
                                                   " math; no roofline floor for ", flops,
                                                   " flops"));
  }
  const double compute_seconds = flops > 0 ? flops / peak : 0;
  const double memory_seconds = bytes / gpu.dram_bytes_per_second;
  if (compute_seconds > memory_seconds) return Roofline{compute_seconds, Bound::kCompute};
  return Roofline{memory_seconds, Bound::kMemory};
}

}  // namespace forge
