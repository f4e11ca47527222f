// Hardware counters of one launch for the bottleneck report: DRAM bytes and achieved occupancy,
// read with CUPTI's range profiler (the CUDA 13 cuptiRangeProfiler* and cuptiProfilerHost* API).
//
// The whole launch is one user range, replayed by us as often as the metrics need passes; each
// pass starts with L2 flushed, as a timed rep does, so that DRAM bytes are those of a cold launch.
// Counters are often unreadable (no GPU, a driver that restricts them to administrators, a
// virtualized or sandboxed GPU): then the metrics say so and carry no numbers. The profiler never
// locks or changes clocks here.
#ifndef FORGE_WORKER_TIMER_KERNEL_METRICS_H_
#define FORGE_WORKER_TIMER_KERNEL_METRICS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "forge/v1/task.pb.h"
#include "worker/gpu/device.h"
#include "worker/timer/timer.h"

namespace forge::timer {

struct CounterReading {
  // counters_available, dram_bytes and achieved_occupancy (0 to 1); the compiler figures are left
  // unset for the caller to fill.
  v1::KernelMetrics metrics;
  // OK when the counters were read; otherwise Unavailable, "counters unavailable: <reason>", and
  // metrics.counters_available() is false.
  absl::Status counters_status;
};

// Reads the counters over `launch` on `stream`, which runs once per profiler pass and must do the
// same work each time (a candidate or a baseline is). Errors only for a failing launch (or a
// sticky error of the context); counters that cannot be read come back in counters_status.
absl::StatusOr<CounterReading> ReadKernelCounters(const gpu::Device& device, gpu::Stream& stream,
                                                  const LaunchFn& launch);

// How many replay passes the metrics take on `chip` (CUPTI's chip name, e.g. "GH100"), from
// CUPTI's host library alone: no GPU needed. Fails when CUPTI does not know the chip or a metric.
absl::StatusOr<int64_t> CounterPassesForChip(absl::string_view chip);

}  // namespace forge::timer

#endif  // FORGE_WORKER_TIMER_KERNEL_METRICS_H_
