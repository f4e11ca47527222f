// The executor of a real GPU: one sandbox child per GPU (worker/sandbox) judges each compiled
// candidate against the float64 ATen reference and then times it; generated kernels, cuBLASLt
// calls, host-launched candidates (their shared object, built by the pool's nvcc, in place of the
// cubin) and the ATen fallback all go through the same Judge and Time requests (cuBLASLt without
// an epilogue and the ATen fallback with an empty cubin). Measurements are MEASUREMENT_KIND_MEASURED and carry the roofline floor
// of the GPU's entry in common/arch's table.
#ifndef FORGE_WORKER_DAEMON_GPU_EXECUTOR_H_
#define FORGE_WORKER_DAEMON_GPU_EXECUTOR_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/arch/arch.h"
#include "worker/compile/compile_pool.h"
#include "worker/daemon/executor.h"
#include "worker/gpu/device.h"
#include "worker/judge/judge.h"
#include "worker/sandbox/sandbox.h"
#include "worker/timer/timer.h"

namespace forge::daemon {

// The GPUs the CUDA driver reports, by ordinal (each opened once to read its properties, and
// closed again). Unavailable, with gpu::DriverStatus()'s reason, where there is no driver or no
// device.
absl::StatusOr<std::vector<gpu::DeviceProperties>> DiscoverGpus();

// The table entry of a GPU the driver names, e.g. "NVIDIA H200" -> H200; NotFound for a GPU the
// table lacks.
absl::StatusOr<GpuArch> TableEntryForDevice(absl::string_view device_name);

struct GpuExecutorOptions {
  // The forge-sandbox-child executable.
  std::string sandbox_child;
  judge::JudgeOptions judge;
  timer::TimerOptions timer;  // before_each_rep and between_reps stay empty (the child's)
  // The compute-sanitizer that checks would-be bests (judge::FindComputeSanitizer); empty: none,
  // and such results carry SANITIZER_STATE_UNAVAILABLE (the coordinator makes none of them a
  // best).
  std::string compute_sanitizer;
};

class GpuExecutor final : public Executor {
 public:
  // Starts the sandbox child for `device`. InvalidArgument when options.sandbox_child is not an
  // executable file. A GPU missing from common/arch's table still runs candidates; its
  // measurements then carry no roofline floor.
  static absl::StatusOr<std::unique_ptr<GpuExecutor>> Create(const gpu::DeviceProperties& device,
                                                             GpuExecutorOptions options,
                                                             compile::CompilePool* pool);

  // Judges, then times the candidate in the sandbox. Failures of the candidate (wrong output,
  // crash, timeout) come back as a Failure; an error status means the sandbox could not run it
  // (Unavailable: no child or no GPU). Errors of the judge itself (a reference it cannot
  // compute) are Failures with reason INTERNAL. A measurement below both
  // prepared.sanitize_below_us and the fastest this executor has sanitized for the task would
  // become the task's best: the candidate then runs under compute-sanitizer
  // (sandbox/sanitize.h); a report fails it (SANITIZER_REPORT), otherwise the measurement carries
  // the tool's evidence (Measurement.sanitizer). Other measurements carry NOT_RUN.
  absl::StatusOr<forge::v1::Result> Execute(PreparedCandidate prepared,
                                            StageTimes* times) override;

 private:
  GpuExecutor(forge::v1::GpuInfo gpu, compile::CompilePool* pool, GpuExecutorOptions options,
              std::optional<GpuArch> table_entry, std::unique_ptr<sandbox::Sandbox> sandbox);

  const GpuExecutorOptions options_;
  const std::optional<GpuArch> table_entry_;
  std::unique_ptr<sandbox::Sandbox> sandbox_;
  // Per task digest, the fastest median this executor's sanitizer passed: a slower result would
  // not be a new best even where the lease's time to beat is older.
  std::map<std::string, double> sanitized_best_us_;
};

}  // namespace forge::daemon

#endif  // FORGE_WORKER_DAEMON_GPU_EXECUTOR_H_
