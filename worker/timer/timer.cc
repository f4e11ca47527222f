#include "worker/timer/timer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "worker/timer/kernel_activity.h"

namespace forge::timer {
namespace {

constexpr int kMinimumReps = 20;
constexpr int64_t kPlateauCopyBytes = int64_t{2} << 30;

// Per-rep kernel time from CUPTI's records of the timed reps, which must hold the same number of
// kernels each (the flush and the hook are memsets, which CUPTI records as such, not as kernels).
absl::Status FillKernelDurations(const std::vector<KernelActivity>& kernels, int reps,
                                 Timing& timing) {
  if (kernels.empty() || kernels.size() % reps != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUPTI recorded ", kernels.size(), " kernels over ", reps,
        " reps, not the same number per rep"));
  }
  timing.kernels_per_rep = static_cast<int>(kernels.size() / reps);
  for (int rep = 0; rep < reps; ++rep) {
    double total_us = 0;
    for (int k = 0; k < timing.kernels_per_rep; ++k) {
      total_us += kernels[rep * timing.kernels_per_rep + k].duration_us();
    }
    timing.kernel_rep_us.push_back(total_us);
  }
  timing.kernel_summary = Summarize(timing.kernel_rep_us);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Timer>> Timer::Create(const gpu::Device& device) {
  const int64_t flush_bytes = (2 * device.properties().l2_cache_bytes + 3) / 4 * 4;
  FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer flush_buffer,
                         device.Allocate(static_cast<size_t>(std::max<int64_t>(flush_bytes, 4))));
  FORGE_ASSIGN_OR_RETURN(gpu::Stream stream, device.CreateStream());
  return std::unique_ptr<Timer>(new Timer(device, std::move(stream), std::move(flush_buffer)));
}

absl::StatusOr<Timing> Timer::Time(const LaunchFn& launch, const TimerOptions& options) {
  if (options.reps < kMinimumReps || options.warmup < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the timer needs at least ", kMinimumReps, " reps and 1 warm-up launch; got ",
        options.reps, " reps and ", options.warmup, " warm-up launches"));
  }
  Timing timing;
  // CUPTI starts before the warm-up, so that whatever enabling it costs is paid outside the timed
  // reps. (Event-timed maxima still show rare outliers while CUPTI records; medians do not.)
  std::unique_ptr<KernelActivityRecorder> recorder;
  if (options.kernel_durations) {
    absl::StatusOr<std::unique_ptr<KernelActivityRecorder>> started = KernelActivityRecorder::Start();
    if (started.ok()) {
      recorder = *std::move(started);
    } else {
      timing.kernel_status = started.status();
    }
  } else {
    timing.kernel_status = absl::FailedPreconditionError("kernel durations not requested");
  }
  for (int i = 0; i < options.warmup; ++i) {
    FORGE_RETURN_IF_ERROR(Annotate(launch(stream_), "warm-up launch"));
  }
  FORGE_RETURN_IF_ERROR(Annotate(stream_.Synchronize(), "after the warm-up launches"));
  if (recorder != nullptr) {
    absl::StatusOr<std::vector<KernelActivity>> warmup_kernels = recorder->Collect();
    if (!warmup_kernels.ok()) {
      timing.kernel_status = warmup_kernels.status();
      recorder.reset();
    }
  }

  std::vector<gpu::Event> starts;
  std::vector<gpu::Event> ends;
  for (int rep = 0; rep < options.reps; ++rep) {
    FORGE_ASSIGN_OR_RETURN(gpu::Event start, device_.CreateEvent());
    FORGE_ASSIGN_OR_RETURN(gpu::Event end, device_.CreateEvent());
    starts.push_back(std::move(start));
    ends.push_back(std::move(end));
  }

  // The timed reps' kernels, collected around the untimed run between them.
  std::vector<KernelActivity> timed_kernels;
  auto collect = [&](bool keep) {
    if (recorder == nullptr) return;
    absl::StatusOr<std::vector<KernelActivity>> kernels = recorder->Collect();
    if (!kernels.ok()) {
      timing.kernel_status = kernels.status();
      recorder.reset();
      return;
    }
    if (keep) timed_kernels.insert(timed_kernels.end(), kernels->begin(), kernels->end());
  };
  for (int rep = 0; rep < options.reps; ++rep) {
    if (options.between_reps && rep == options.reps / 2) {
      FORGE_RETURN_IF_ERROR(Annotate(stream_.Synchronize(), "before the untimed run"));
      collect(/*keep=*/true);
      FORGE_RETURN_IF_ERROR(Annotate(options.between_reps(), "the untimed run between reps"));
      FORGE_RETURN_IF_ERROR(Annotate(device_.Synchronize(), "after the untimed run"));
      collect(/*keep=*/false);
    }
    if (options.flush_l2) FORGE_RETURN_IF_ERROR(flush_buffer_.Fill32(0x5A5A5A5Au, stream_));
    if (options.before_each_rep) {
      FORGE_RETURN_IF_ERROR(Annotate(options.before_each_rep(stream_), "before a timed rep"));
    }
    FORGE_RETURN_IF_ERROR(starts[rep].Record(stream_));
    FORGE_RETURN_IF_ERROR(Annotate(launch(stream_), absl::StrCat("timed launch ", rep)));
    FORGE_RETURN_IF_ERROR(ends[rep].Record(stream_));
  }
  FORGE_RETURN_IF_ERROR(Annotate(stream_.Synchronize(), "after the timed reps"));
  FORGE_RETURN_IF_ERROR(Annotate(device_.Synchronize(), "after the timed reps"));

  for (int rep = 0; rep < options.reps; ++rep) {
    FORGE_ASSIGN_OR_RETURN(float milliseconds, ends[rep].MillisecondsSince(starts[rep]));
    timing.rep_us.push_back(milliseconds * 1000.0);
  }
  timing.summary = Summarize(timing.rep_us);

  collect(/*keep=*/true);
  if (recorder != nullptr) {
    timing.kernel_status = FillKernelDurations(timed_kernels, options.reps, timing);
  }
  return timing;
}

absl::StatusOr<double> Timer::CopyBandwidth() {
  if (copy_bandwidth_) return *copy_bandwidth_;
  // Large enough to reach the copy engine's plateau (on the H200 a 256 MiB copy ran 4% below a
  // 4 GiB one, 2 GiB within 1%), but no more than an eighth of the device's memory.
  const gpu::DeviceProperties& properties = device_.properties();
  const int64_t bytes = std::max<int64_t>(
      4 * properties.l2_cache_bytes,
      std::min<int64_t>(kPlateauCopyBytes, properties.total_memory_bytes / 8));
  FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer source, device_.Allocate(bytes));
  FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer destination, device_.Allocate(bytes));
  FORGE_RETURN_IF_ERROR(source.Fill32(0x3F800000u, stream_));
  TimerOptions options;
  options.kernel_durations = false;
  FORGE_ASSIGN_OR_RETURN(Timing timing, Time(
      [&](gpu::Stream& stream) { return destination.CopyFromDeviceAsync(source, stream); },
      options));
  if (timing.summary.median <= 0) {
    return absl::InternalError("device-to-device copy timed at zero microseconds");
  }
  copy_bandwidth_ = 2.0 * static_cast<double>(bytes) / (timing.summary.median * 1e-6);
  return *copy_bandwidth_;
}

double RooflineFloorUs(int64_t flops, int64_t bytes, double peak_flops_per_second,
                       double bandwidth_bytes_per_second) {
  double floor_seconds = 0;
  if (peak_flops_per_second > 0) {
    floor_seconds = std::max(floor_seconds, static_cast<double>(flops) / peak_flops_per_second);
  }
  if (bandwidth_bytes_per_second > 0) {
    floor_seconds = std::max(floor_seconds, static_cast<double>(bytes) / bandwidth_bytes_per_second);
  }
  return floor_seconds * 1e6;
}

}  // namespace forge::timer
