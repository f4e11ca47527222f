// The ATen baseline of a kernel task: what PyTorch eager does for the task's group, on the GPU, so
// that a candidate's speedup is measured against it with the same timer and the same protocol.
//
// The group runs node by node through the dispatcher (the reference interpreter's code, on CUDA
// instead of the CPU) in the graph's own dtypes, on the stream the caller gives: every kernel and
// every allocation of a launch is ordered there. Like eager PyTorch, ATen allocates each launch's
// intermediates and outputs itself, from its caching allocator: after the first (warm-up) launch
// the blocks come from its cache, so timed launches pay no cudaMalloc; the cache keeps the memory
// after the baseline is gone. Host dispatch costs on the order of eager PyTorch's per node are
// part of a launch; the timer's kernel-only durations leave them out.
#ifndef FORGE_WORKER_BASELINE_ATEN_BASELINE_H_
#define FORGE_WORKER_BASELINE_ATEN_BASELINE_H_

#include <cuda.h>

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compiler/reference/reference.h"
#include "forge/v1/task.pb.h"

namespace forge::baseline {

class AtenBaseline {
 public:
  // Checks the task first, without a GPU: every node's operator exists with the schema the graph
  // recorded and has a CUDA kernel in this LibTorch (NotFound / FailedPrecondition naming the
  // node), and `inputs` (one per group input, in order) match the task's input specs
  // (InvalidArgument). Then uploads the inputs to GPU `device_ordinal`, keeping their strides
  // (Unavailable without a GPU).
  static absl::StatusOr<std::unique_ptr<AtenBaseline>> Create(
      const v1::KernelTask& task, absl::Span<const reference::HostTensor> inputs,
      int device_ordinal = 0);
  // The same checks, over inputs already on GPU `device_ordinal`: `inputs` holds each group
  // input's device address, its storage laid out as the task's spec says. Nothing is copied (but
  // for a group with an op that may write its arguments, which gets device copies): the memory
  // must stay allocated, and unchanged, while the baseline runs.
  static absl::StatusOr<std::unique_ptr<AtenBaseline>> OnDevice(
      const v1::KernelTask& task, absl::Span<const CUdeviceptr> inputs, int device_ordinal = 0);
  ~AtenBaseline();
  AtenBaseline(const AtenBaseline&) = delete;
  AtenBaseline& operator=(const AtenBaseline&) = delete;

  // Enqueues one run of the group on `stream`, a stream of the device's primary context (the
  // Timer's, for instance), and returns. The outputs live until the next launch.
  absl::Status Launch(CUstream stream);

  // The last launch's outputs, one per group output, in host memory; waits for the device.
  absl::StatusOr<std::vector<reference::HostTensor>> Outputs() const;

  // Enqueues on `stream` copies of the last launch's outputs into device memory at `outputs`
  // (one address per task output, laid out as the task's spec says). InternalError when an output
  // differs from its spec in dtype or shape.
  absl::Status CopyOutputsTo(absl::Span<const CUdeviceptr> outputs, CUstream stream) const;

 private:
  struct State;  // the LibTorch side
  // The checks of the task's operators and the GPU both factories make; the State without inputs.
  static absl::StatusOr<std::unique_ptr<State>> Prepare(const v1::KernelTask& task,
                                                        int device_ordinal);
  explicit AtenBaseline(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace forge::baseline

#endif  // FORGE_WORKER_BASELINE_ATEN_BASELINE_H_
