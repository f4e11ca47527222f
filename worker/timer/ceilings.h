// The ceilings a candidate's roofline floor divides by, measured on the worker's own GPU rather
// than read from the arch table: device-to-device copy bandwidth (Timer::CopyBandwidth) and the
// matrix throughput cuBLASLt reaches in each math mode a task can compute in. Measured once per
// worker start (a few seconds: the products are large enough to run at the clocks the card holds
// under load) and cached per process, and optionally on disk so that a restarted worker on the
// same card and driver does not measure again.
//
// FloorFromCeilings is where the worker computes floors from measured numbers; common/arch's
// RooflineFloor stays the floor from the table's figures (predictions, `forge inspect`).
#ifndef FORGE_WORKER_TIMER_CEILINGS_H_
#define FORGE_WORKER_TIMER_CEILINGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/arch/arch.h"
#include "worker/timer/timer.h"

namespace forge::timer {

// Square matrix products the throughputs are measured on (m = n = k). float32 runs about 15x
// slower than bf16, so a smaller product keeps its measurement as short.
inline constexpr int64_t kHalfPrecisionMatmulSize = 8192;
inline constexpr int64_t kFloat32MatmulSize = 4096;
// The best of at most this many of cuBLASLt's heuristic algorithms is the ceiling.
inline constexpr int kMatmulAlgorithmsTried = 4;

struct MeasuredCeilings {
  std::string device_name;  // "NVIDIA H200"
  int driver_version = 0;   // e.g. 13000
  absl::Time measured_at;
  double copy_bytes_per_second = 0;  // bytes read plus bytes written
  // 2 * m * n * k over the median time of the fastest algorithm, float32 accumulation throughout.
  double bf16_flops_per_second = 0;  // tensor cores
  double fp16_flops_per_second = 0;  // tensor cores
  double fp32_flops_per_second = 0;  // CUBLAS_COMPUTE_32F: the CUDA cores, never TF32

  // The throughput that bounds work in `mode`: kBf16 (bf16 or fp16 data) takes the larger of the
  // two tensor-core figures, kFp32 the float32 one. NotFound for modes not measured (TF32, fp8,
  // fp64: no Forge candidate computes in them).
  absl::StatusOr<double> MatmulFlops(MathMode mode) const;

  bool operator==(const MeasuredCeilings&) const = default;
};

// Measures every ceiling on the timer's device with the timer's protocol (L2 flushed, warm-up,
// median of 20 reps): the copy bandwidth, then for bf16, fp16 and float32 the product of a matrix
// of random non-zero values (magnitudes in [0.25, 1), random signs) with itself, through each of
// cuBLASLt's first kMatmulAlgorithmsTried heuristic algorithms. Unavailable without a GPU.
absl::StatusOr<MeasuredCeilings> MeasureCeilings(Timer& timer);

// MeasureCeilings once per process and device ordinal; later calls return the first result.
// With a non-empty `cache_dir`, a process's first call for a device reads
// CeilingsFilePath(cache_dir, ...) instead of measuring when the file exists, and writes it after
// measuring when it does not (creating the directory).
absl::StatusOr<MeasuredCeilings> CachedCeilings(Timer& timer, absl::string_view cache_dir = "");

// The least time `flops` of arithmetic in `mode` and `bytes` of DRAM traffic can take at the
// measured ceilings. InvalidArgument for a negative count; NotFound when flops > 0 in a mode
// without a measured throughput; FailedPrecondition when a count is positive and its ceiling not.
absl::StatusOr<Roofline> FloorFromCeilings(const MeasuredCeilings& ceilings, double flops,
                                           double bytes, MathMode mode);

// The disk cache: one small text file of "key value" lines per device name and driver version,
// e.g. <cache_dir>/ceilings-NVIDIA_H200-driver13000.txt.
std::string CeilingsFilePath(absl::string_view cache_dir, absl::string_view device_name,
                             int driver_version);
std::string FormatCeilings(const MeasuredCeilings& ceilings);
// InvalidArgument naming `source` and the line for a malformed, unknown, repeated or missing key.
absl::StatusOr<MeasuredCeilings> ParseCeilings(absl::string_view text, absl::string_view source);
// NotFound when `path` does not exist; otherwise as ParseCeilings.
absl::StatusOr<MeasuredCeilings> ReadCeilingsFile(const std::string& path);
// Writes through a temporary file and a rename, so a reader never sees half a file.
absl::Status WriteCeilingsFile(const std::string& path, const MeasuredCeilings& ceilings);

}  // namespace forge::timer

#endif  // FORGE_WORKER_TIMER_CEILINGS_H_
