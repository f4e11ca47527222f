#include "worker/timer/ceilings.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/gemm_library/gemm_library.h"
#include "worker/library/cublaslt_gemm.h"

namespace forge::timer {
namespace {

// A floating-point format as random bits need it: value = sign * 2^(exponent - bias) * 1.mantissa.
struct BitFormat {
  int bits;
  int mantissa_bits;
  int bias;
};

BitFormat FormatOf(forge::v1::DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_BFLOAT16: return {16, 7, 127};
    case forge::v1::DTYPE_FLOAT16: return {16, 10, 15};
    default: return {32, 23, 127};
  }
}

// `elements` random values of `dtype` with magnitudes in [0.25, 1) and random signs, as raw bytes.
// Non-zero data, because a product of zeros draws less power and so runs at higher clocks than
// real work does. Magnitudes below 1 keep an 8192-long dot product far from fp16's range limit.
std::vector<uint8_t> RandomMatrixBytes(forge::v1::DType dtype, int64_t elements) {
  const BitFormat format = FormatOf(dtype);
  const int bytes_per_element = format.bits / 8;
  std::vector<uint8_t> bytes(static_cast<size_t>(elements * bytes_per_element));
  std::mt19937 random(20261130);
  for (int64_t i = 0; i < elements; ++i) {
    const uint32_t draw = random();
    const uint32_t sign = draw >> 31;
    const uint32_t exponent = format.bias - 1 - ((draw >> 30) & 1);  // 2^-1 or 2^-2
    const uint32_t mantissa = draw & ((uint32_t{1} << format.mantissa_bits) - 1);
    const uint32_t word = (sign << (format.bits - 1)) | (exponent << format.mantissa_bits) |
                          mantissa;
    std::copy_n(reinterpret_cast<const uint8_t*>(&word), bytes_per_element,
                &bytes[static_cast<size_t>(i * bytes_per_element)]);  // little-endian
  }
  return bytes;
}

// The best FLOP/s of `size`^3 products in `dtype` over cuBLASLt's first algorithms. The one random
// matrix is both operands: the arithmetic and its power draw are those of any random product.
absl::StatusOr<double> MeasureMatmulFlops(Timer& timer, library::CublasLtGemm& gemm,
                                          forge::v1::DType dtype, int64_t size) {
  const gpu::Device& device = timer.device();
  const std::vector<uint8_t> host = RandomMatrixBytes(dtype, size * size);
  FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer matrix, device.Allocate(host.size()));
  FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer product, device.Allocate(host.size()));
  FORGE_RETURN_IF_ERROR(matrix.CopyFromHost(host.data(), host.size()));

  codegen::LibraryGemmCall call;
  call.m = call.n = call.k = size;
  call.dtype = dtype;
  call.a = codegen::LibraryMatrix{0, false, size, 0};
  call.b = codegen::LibraryMatrix{1, false, size, 0};
  const library::GemmOperands operands{matrix.address(), matrix.address(), 0, product.address()};
  FORGE_ASSIGN_OR_RETURN(const int offered, gemm.AlgorithmCount(call));
  if (offered == 0) {
    return absl::InternalError(
        absl::StrCat("cuBLASLt offers no algorithm for ", codegen::DescribeCall(call)));
  }
  TimerOptions options;
  options.kernel_durations = false;
  double best_flops = 0;
  for (call.algo = 0; call.algo < std::min(offered, kMatmulAlgorithmsTried); ++call.algo) {
    FORGE_ASSIGN_OR_RETURN(
        Timing timing,
        timer.Time([&](gpu::Stream& stream) { return gemm.Run(call, operands, stream.handle()); },
                   options));
    if (timing.summary.median <= 0) {
      return absl::InternalError(
          absl::StrCat(codegen::DescribeCall(call), " timed at zero microseconds"));
    }
    const double flops = 2.0 * static_cast<double>(size * size * size);
    best_flops = std::max(best_flops, flops / (timing.summary.median * 1e-6));
  }
  return best_flops;
}

// The process's ceilings per device ordinal.
struct ProcessCache {
  absl::Mutex mutex;
  absl::flat_hash_map<int, MeasuredCeilings> by_ordinal ABSL_GUARDED_BY(mutex);
};

ProcessCache& GetProcessCache() {
  static auto* cache = new ProcessCache;
  return *cache;
}

absl::StatusOr<MeasuredCeilings> MeasureOrReadFile(Timer& timer, absl::string_view cache_dir) {
  const gpu::DeviceProperties& properties = timer.device().properties();
  if (cache_dir.empty()) return MeasureCeilings(timer);
  const std::string path =
      CeilingsFilePath(cache_dir, properties.name, properties.driver_version);
  absl::StatusOr<MeasuredCeilings> stored = ReadCeilingsFile(path);
  if (stored.ok() || !absl::IsNotFound(stored.status())) return stored;
  FORGE_ASSIGN_OR_RETURN(MeasuredCeilings measured, MeasureCeilings(timer));
  FORGE_RETURN_IF_ERROR(WriteCeilingsFile(path, measured));
  return measured;
}

// Keys of the cache file, in the order FormatCeilings writes them.
constexpr absl::string_view kDeviceNameKey = "device_name";
constexpr absl::string_view kDriverVersionKey = "driver_version";
constexpr absl::string_view kMeasuredAtKey = "measured_at";
constexpr absl::string_view kCopyKey = "copy_bytes_per_second";
constexpr absl::string_view kBf16Key = "bf16_flops_per_second";
constexpr absl::string_view kFp16Key = "fp16_flops_per_second";
constexpr absl::string_view kFp32Key = "fp32_flops_per_second";

}  // namespace

absl::StatusOr<double> MeasuredCeilings::MatmulFlops(MathMode mode) const {
  switch (mode) {
    case MathMode::kBf16: return std::max(bf16_flops_per_second, fp16_flops_per_second);
    case MathMode::kFp32: return fp32_flops_per_second;
    default:
      return absl::NotFoundError(absl::StrCat("no measured ", MathModeName(mode),
                                              " matrix throughput for ", device_name));
  }
}

absl::StatusOr<MeasuredCeilings> MeasureCeilings(Timer& timer) {
  const gpu::Device& device = timer.device();
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<library::CublasLtGemm> gemm,
                         library::CublasLtGemm::Create(device));
  MeasuredCeilings ceilings;
  ceilings.device_name = device.properties().name;
  ceilings.driver_version = device.properties().driver_version;
  ceilings.measured_at = absl::Now();
  absl::StatusOr<double> copy = timer.CopyBandwidth();
  if (!copy.ok()) {
    return Annotate(copy.status(), absl::StrCat("measuring copy bandwidth on ",
                                                ceilings.device_name));
  }
  ceilings.copy_bytes_per_second = *copy;
  const std::pair<forge::v1::DType, double*> throughputs[] = {
      {forge::v1::DTYPE_BFLOAT16, &ceilings.bf16_flops_per_second},
      {forge::v1::DTYPE_FLOAT16, &ceilings.fp16_flops_per_second},
      {forge::v1::DTYPE_FLOAT32, &ceilings.fp32_flops_per_second}};
  for (const auto& [dtype, flops] : throughputs) {
    const int64_t size =
        dtype == forge::v1::DTYPE_FLOAT32 ? kFloat32MatmulSize : kHalfPrecisionMatmulSize;
    absl::StatusOr<double> measured = MeasureMatmulFlops(timer, *gemm, dtype, size);
    if (!measured.ok()) {
      return Annotate(measured.status(),
                      absl::StrCat("measuring ", forge::v1::DType_Name(dtype),
                                   " matrix throughput on ", ceilings.device_name));
    }
    *flops = *measured;
  }
  return ceilings;
}

absl::StatusOr<MeasuredCeilings> CachedCeilings(Timer& timer, absl::string_view cache_dir) {
  ProcessCache& cache = GetProcessCache();
  absl::MutexLock lock(&cache.mutex);
  const int ordinal = timer.device().properties().ordinal;
  if (auto it = cache.by_ordinal.find(ordinal); it != cache.by_ordinal.end()) return it->second;
  FORGE_ASSIGN_OR_RETURN(MeasuredCeilings ceilings, MeasureOrReadFile(timer, cache_dir));
  cache.by_ordinal.emplace(ordinal, ceilings);
  return ceilings;
}

absl::StatusOr<Roofline> FloorFromCeilings(const MeasuredCeilings& ceilings, double flops,
                                           double bytes, MathMode mode) {
  if (flops < 0 || bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "roofline floor needs non-negative counts, got flops=", flops, " bytes=", bytes));
  }
  double compute_seconds = 0;
  if (flops > 0) {
    FORGE_ASSIGN_OR_RETURN(const double peak, ceilings.MatmulFlops(mode));
    if (peak <= 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("measured ", MathModeName(mode), " throughput of ", ceilings.device_name,
                       " is ", peak, " FLOP/s; no floor for ", flops, " flops"));
    }
    compute_seconds = flops / peak;
  }
  double memory_seconds = 0;
  if (bytes > 0) {
    if (ceilings.copy_bytes_per_second <= 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("measured copy bandwidth of ", ceilings.device_name, " is ",
                       ceilings.copy_bytes_per_second, " B/s; no floor for ", bytes, " bytes"));
    }
    memory_seconds = bytes / ceilings.copy_bytes_per_second;
  }
  if (compute_seconds > memory_seconds) return Roofline{compute_seconds, Bound::kCompute};
  return Roofline{memory_seconds, Bound::kMemory};
}

std::string CeilingsFilePath(absl::string_view cache_dir, absl::string_view device_name,
                             int driver_version) {
  std::string name(device_name);
  for (char& c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  }
  return (std::filesystem::path(std::string(cache_dir)) /
          absl::StrCat("ceilings-", name, "-driver", driver_version, ".txt"))
      .string();
}

std::string FormatCeilings(const MeasuredCeilings& ceilings) {
  // %.17g: every double reads back exactly.
  return absl::StrCat(
      kDeviceNameKey, " ", ceilings.device_name, "\n", kDriverVersionKey, " ",
      ceilings.driver_version, "\n", kMeasuredAtKey, " ",
      absl::FormatTime(absl::RFC3339_full, ceilings.measured_at, absl::UTCTimeZone()), "\n",
      kCopyKey, " ", absl::StrFormat("%.17g", ceilings.copy_bytes_per_second), "\n", kBf16Key, " ",
      absl::StrFormat("%.17g", ceilings.bf16_flops_per_second), "\n", kFp16Key, " ",
      absl::StrFormat("%.17g", ceilings.fp16_flops_per_second), "\n", kFp32Key, " ",
      absl::StrFormat("%.17g", ceilings.fp32_flops_per_second), "\n");
}

absl::StatusOr<MeasuredCeilings> ParseCeilings(absl::string_view text, absl::string_view source) {
  MeasuredCeilings ceilings;
  std::map<absl::string_view, double*> doubles = {{kCopyKey, &ceilings.copy_bytes_per_second},
                                                  {kBf16Key, &ceilings.bf16_flops_per_second},
                                                  {kFp16Key, &ceilings.fp16_flops_per_second},
                                                  {kFp32Key, &ceilings.fp32_flops_per_second}};
  std::map<absl::string_view, int> seen_at_line;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (line.empty()) continue;
    const std::pair<absl::string_view, absl::string_view> key_value =
        absl::StrSplit(line, absl::MaxSplits(' ', 1));
    const absl::string_view key = key_value.first;
    const absl::string_view value = key_value.second;
    auto error = [&](absl::string_view problem) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_number, ": ", problem, " (line '", line, "')"));
    };
    if (auto [it, inserted] = seen_at_line.emplace(key, line_number); !inserted) {
      return error(absl::StrCat("key '", key, "' repeated (first on line ", it->second, ")"));
    }
    bool parsed = false;
    if (key == kDeviceNameKey) {
      ceilings.device_name = std::string(value);
      parsed = !value.empty();
    } else if (key == kDriverVersionKey) {
      parsed = absl::SimpleAtoi(value, &ceilings.driver_version);
    } else if (key == kMeasuredAtKey) {
      std::string time_error;
      parsed = absl::ParseTime(absl::RFC3339_full, value, &ceilings.measured_at, &time_error);
    } else if (auto it = doubles.find(key); it != doubles.end()) {
      parsed = absl::SimpleAtod(value, it->second);
    } else {
      return error(absl::StrCat("unknown key '", key, "'"));
    }
    if (!parsed) return error(absl::StrCat("bad value for '", key, "'"));
  }
  for (absl::string_view key : {kDeviceNameKey, kDriverVersionKey, kMeasuredAtKey, kCopyKey,
                                kBf16Key, kFp16Key, kFp32Key}) {
    if (!seen_at_line.contains(key)) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": missing key '", key, "'"));
    }
  }
  return ceilings;
}

absl::StatusOr<MeasuredCeilings> ReadCeilingsFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    std::error_code error;
    if (!std::filesystem::exists(path, error)) {
      return absl::NotFoundError(absl::StrCat("no ceilings file ", path));
    }
    return absl::UnavailableError(absl::StrCat("cannot open ceilings file ", path));
  }
  std::stringstream text;
  text << file.rdbuf();
  return ParseCeilings(text.str(), path);
}

absl::Status WriteCeilingsFile(const std::string& path, const MeasuredCeilings& ceilings) {
  const std::filesystem::path target(path);
  std::error_code error;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("creating directory ",
                                               target.parent_path().string(), ": ",
                                               error.message()));
  }
  // Per process: workers of one host may write the same card's file at once.
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream file(temporary, std::ios::trunc);
    file << FormatCeilings(ceilings);
    file.close();
    if (!file) return absl::UnavailableError(absl::StrCat("writing ceilings file ", temporary));
  }
  std::filesystem::rename(temporary, target, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("renaming ", temporary, " to ", path, ": ", error.message()));
  }
  return absl::OkStatus();
}

}  // namespace forge::timer
