// Kernel-only durations from CUPTI's Activity API (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL): the time
// each kernel ran on the GPU, without launch overhead or the gaps between launches.
#ifndef FORGE_WORKER_TIMER_KERNEL_ACTIVITY_H_
#define FORGE_WORKER_TIMER_KERNEL_ACTIVITY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace forge::timer {

struct KernelActivity {
  std::string name;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t stream_id = 0;
  double duration_us() const { return static_cast<double>(end_ns - start_ns) / 1000.0; }
};

// Records every kernel the process runs while it lives. CUPTI's activity buffers are process-wide,
// so at most one recorder exists at a time.
class KernelActivityRecorder {
 public:
  // Unavailable when CUPTI cannot record here (no GPU or driver, counters or tracing not permitted,
  // another profiler attached) or another recorder is active; the message says which.
  static absl::StatusOr<std::unique_ptr<KernelActivityRecorder>> Start();
  ~KernelActivityRecorder();
  KernelActivityRecorder(const KernelActivityRecorder&) = delete;
  KernelActivityRecorder& operator=(const KernelActivityRecorder&) = delete;

  // Flushes CUPTI's buffers and returns the kernels completed since Start() or the last Collect(),
  // ordered by start time. Synchronize the work first: kernels still running are not included.
  absl::StatusOr<std::vector<KernelActivity>> Collect();

 private:
  KernelActivityRecorder() = default;
};

}  // namespace forge::timer

#endif  // FORGE_WORKER_TIMER_KERNEL_ACTIVITY_H_
