// The GPUs Forge targets: the resources a kernel schedule must fit (SMs, shared memory, registers)
// and the peak rates that bound its speed (DRAM bandwidth, math throughput per mode), with the
// roofline floor those rates give for a task.
#ifndef FORGE_COMMON_ARCH_ARCH_H_
#define FORGE_COMMON_ARCH_ARCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace forge {

// The unit doing the arithmetic; each has its own peak rate.
enum class MathMode {
  kFp32,  // float32 FFMA on the CUDA cores (no tensor cores)
  kTf32,  // tensor cores on float32 data rounded to TF32
  kBf16,  // tensor cores on bf16 or fp16 data, fp32 accumulation, dense
  kFp8,   // tensor cores on fp8 (e4m3 / e5m2) data, fp32 accumulation, dense
  kFp64,  // float64 on the CUDA cores (not the fp64 tensor-core rate)
};

// Lower-case name of the mode, e.g. "bf16".
absl::string_view MathModeName(MathMode mode);

struct GpuArch {
  std::string name;                // e.g. "H200"
  std::string arch;                // the compile target, e.g. "sm_90"
  int compute_capability;          // major * 10 + minor, e.g. 90
  int sm_count;
  std::int64_t l2_bytes;
  std::int64_t shared_memory_per_sm_bytes;
  std::int64_t shared_memory_per_block_bytes;  // the opt-in maximum
  int registers_per_sm;            // 32-bit registers
  int max_threads_per_sm;
  double boost_clock_hz;
  double dram_bytes_per_second;    // bytes read + written
  // Peak FLOP/s per mode (a multiply-add counts as 2); 0 where the GPU lacks the mode.
  double peak_fp32_flops;
  double peak_tf32_flops;
  double peak_bf16_flops;
  double peak_fp8_flops;
  double peak_fp64_flops;

  // Peak FLOP/s of `mode`; 0 where the GPU lacks it.
  double PeakFlops(MathMode mode) const;
};

// Every GPU in the table, in a fixed order.
const std::vector<GpuArch>& KnownGpus();

// The GPU called `name`, ignoring case, spaces, dashes and underscores ("h200", "RTX 4090",
// "rtx4090"). NotFound lists the valid names.
absl::StatusOr<GpuArch> FindGpu(absl::string_view name);

enum class Bound { kMemory, kCompute };

// "memory-bound" or "compute-bound".
absl::string_view BoundName(Bound bound);

struct Roofline {
  double seconds;  // max(flops / peak, bytes / bandwidth)
  Bound bound;     // which of the two terms is larger (memory on a tie)
};

// The fastest a task of `flops` and `bytes` of DRAM traffic can run on `gpu` in `mode`.
// InvalidArgument when flops > 0 and the GPU lacks the mode, or a count is negative.
absl::StatusOr<Roofline> RooflineFloor(const GpuArch& gpu, double flops, double bytes,
                                       MathMode mode);

}  // namespace forge

#endif  // FORGE_COMMON_ARCH_ARCH_H_
