// The executor of a worker without a GPU: each emulated GPU is a virtual lane whose "execution" is
// the emulated backend's prediction (worker/emulated): the kernel compiled for real for the
// emulated GPU's architecture, ptxas' figures and the performance model. Its measurements are
// MEASUREMENT_KIND_PREDICTED, and it registers its GPUs with emulated = true. Host-launched
// candidates (CUTLASS shared objects) are not compiled here: nvcc takes ~45 s per configuration,
// which would make CI and the no-GPU demo crawl; they are predicted from their cost hints like
// library calls, with resources unavailable.
#ifndef FORGE_WORKER_DAEMON_EMULATED_EXECUTOR_H_
#define FORGE_WORKER_DAEMON_EMULATED_EXECUTOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/compile/compile_pool.h"
#include "worker/daemon/executor.h"
#include "worker/emulated/emulated_backend.h"

namespace forge::daemon {

class EmulatedExecutor final : public Executor {
 public:
  // Emulates the GPU named `gpu_name` in common/arch's table ("H200", "A100", ...) as GPU
  // `index` of the worker. NotFound, listing the known GPUs, for another name. With `learned`
  // (which must outlive the executor; the worker's CostModelFetcher keeps it current), the
  // learned performance model refines the predictions where it has a usable model.
  static absl::StatusOr<std::unique_ptr<EmulatedExecutor>> Create(
      absl::string_view gpu_name, int index, compile::CompilePool* pool,
      const cost::CostPredictor* learned = nullptr);

  // Predicts the candidate (a cache hit for the compile Prepare did). A candidate the model
  // cannot predict (an inconsistent task) fails at FAILURE_STAGE_TIME, reason INTERNAL; never
  // an error status.
  absl::StatusOr<forge::v1::Result> Execute(PreparedCandidate prepared,
                                            StageTimes* times) override;

 private:
  EmulatedExecutor(forge::v1::GpuInfo gpu, compile::CompilePool* pool,
                   const cost::CostPredictor* learned)
      : Executor(std::move(gpu), pool), backend_(pool, learned) {}

  bool CompilesHostLaunched() const override { return false; }

  const emulated::EmulatedBackend backend_;
};

}  // namespace forge::daemon

#endif  // FORGE_WORKER_DAEMON_EMULATED_EXECUTOR_H_
