// The timer: one protocol for candidates and baselines alike. Each rep writes a scratch buffer of
// at least twice the L2 size (so no rep finds the previous one's data in L2), runs an optional
// untimed hook (the judge re-poisons the outputs there), then times the launch between two CUDA
// events on the timer's stream; an optional untimed run in the middle (between_reps) stays out of
// every figure. Warm-up launches come first; the median of at least 20 reps is
// the result, with min, max and spread, and, where CUPTI can record, kernel-only durations.
//
// The timer never changes clocks or other GPU settings.
#ifndef FORGE_WORKER_TIMER_TIMER_H_
#define FORGE_WORKER_TIMER_TIMER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/device.h"
#include "worker/timer/stats.h"

namespace forge::timer {

// Enqueues one run of whatever is timed on `stream`: a candidate kernel, or the ATen baseline
// through LibTorch on the same stream. All of its work must be ordered on `stream`.
using LaunchFn = std::function<absl::Status(gpu::Stream& stream)>;

struct TimerOptions {
  int warmup = 5;
  int reps = 20;  // at least 20
  bool flush_l2 = true;
  // Runs before each rep, outside the timed interval (e.g. the judge's output poisoning).
  LaunchFn before_each_rep;
  // Runs once, before the L2 flush of the middle rep (reps / 2), with every earlier rep finished
  // and its kernels' durations collected: untimed work that neither the event times nor the
  // kernel durations see, and whose traces in L2 the flush clears (the judge's run of the
  // candidate on other inputs, JudgedCandidate::RunOnOtherContents). Its own stream is
  // synchronized before the next rep is enqueued.
  std::function<absl::Status()> between_reps;
  // Also record kernel-only durations with CUPTI when it is available.
  bool kernel_durations = true;
};

struct Timing {
  std::vector<double> rep_us;  // event-timed duration of each rep, in microseconds
  Summary summary;             // of rep_us
  // Kernel-only time of each rep (the sum of its kernels' durations), from CUPTI; empty when
  // unavailable, and kernel_status says why.
  std::vector<double> kernel_rep_us;
  std::optional<Summary> kernel_summary;
  absl::Status kernel_status;
  int kernels_per_rep = 0;
};

class Timer {
 public:
  // Allocates the L2 flush buffer (twice the device's L2, rounded up to 4 bytes) and the stream.
  static absl::StatusOr<std::unique_ptr<Timer>> Create(const gpu::Device& device);

  // Times `launch` with the protocol above. Errors of the launch or of its kernels come back as
  // the status (a sticky one marks the context lost; see gpu::IsStickyError).
  absl::StatusOr<Timing> Time(const LaunchFn& launch, const TimerOptions& options = {});

  // Device-to-device copy bandwidth in bytes per second (bytes read plus bytes written), measured
  // once with the same protocol over a buffer of 2 GiB (at least four times L2, at most an eighth of
  // the device memory), then cached.
  absl::StatusOr<double> CopyBandwidth();

  gpu::Stream& stream() { return stream_; }
  const gpu::Device& device() const { return device_; }

 private:
  Timer(const gpu::Device& device, gpu::Stream stream, gpu::DeviceBuffer flush_buffer)
      : device_(device), stream_(std::move(stream)), flush_buffer_(std::move(flush_buffer)) {}

  const gpu::Device& device_;
  gpu::Stream stream_;
  gpu::DeviceBuffer flush_buffer_;
  std::optional<double> copy_bandwidth_;
};

// The least time the work can take on the device: max(flops / peak FLOP/s, bytes / bandwidth),
// in microseconds. A term whose ceiling is not positive is left out.
double RooflineFloorUs(int64_t flops, int64_t bytes, double peak_flops_per_second,
                       double bandwidth_bytes_per_second);

}  // namespace forge::timer

#endif  // FORGE_WORKER_TIMER_TIMER_H_
