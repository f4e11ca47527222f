// The ATen fallback's candidates in the sandbox child: the task's group run node by node through
// LibTorch's CUDA kernels (worker/baseline's AtenBaseline), judged and timed like any candidate.
// Its timing is the task's eager baseline. Built only with LibTorch's CUDA libraries
// (forge::libtorch_cuda); this header includes no LibTorch.
//
// The judge's launch runs a fresh AtenBaseline over the judge's input buffers in place (nothing
// goes through the host) on the judge's stream, and enqueues there copies of the outputs into the
// judge's output buffers, in their layouts. The timed launch is the AtenBaseline of the last judge
// launch alone (the last draw's input buffers, which the judge keeps for the timer; its outputs
// from the caching allocator), as eager PyTorch runs; after timing, what the last timed run
// produced is copied into the judge's output buffers, which the child then re-checks.
#ifndef FORGE_WORKER_SANDBOX_ATEN_FALLBACK_H_
#define FORGE_WORKER_SANDBOX_ATEN_FALLBACK_H_

#include "absl/status/statusor.h"
#include "forge/v1/task.pb.h"
#include "worker/gpu/device.h"
#include "worker/sandbox/sandbox_child.h"

namespace forge::sandbox {

// The ATen fallback candidate of `task` on `device`. The task's ops are checked at the first
// launch: an op without a CUDA kernel in this LibTorch, or not found with the recorded schema,
// makes the candidate unsupported (RunnableCandidate::unsupported_reason).
absl::StatusOr<RunnableCandidate> LoadAtenFallback(const gpu::Device& device,
                                                   const forge::v1::KernelTask& task);

}  // namespace forge::sandbox

#endif  // FORGE_WORKER_SANDBOX_ATEN_FALLBACK_H_
