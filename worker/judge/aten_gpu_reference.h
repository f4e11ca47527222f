// The judge's float64 reference on the GPU. The CPU runs a large task's float64 reference in tens of
// seconds (65 s for a 32768 x 4096 cross-entropy, every draw of the first candidate of the task);
// the same ATen ops in float64 on an H200 take milliseconds. Same interpreter, same ops, same
// float64 math: only the device differs (reductions may sum in another order, which float64 makes
// negligible against the judge's tolerances). Needs LibTorch's CUDA libraries; this header
// includes no LibTorch.
#ifndef FORGE_WORKER_JUDGE_ATEN_GPU_REFERENCE_H_
#define FORGE_WORKER_JUDGE_ATEN_GPU_REFERENCE_H_

#include "worker/judge/aten_reference.h"

namespace forge::judge {

// A GroupRunner on CUDA device `gpu_ordinal`, falling back to the CPU (reference::RunTaskGroup)
// when the GPU run fails (out of memory, an op without a float64 CUDA kernel); the fallback is
// logged on stderr once per task. After each run the memory ATen cached goes back to the driver:
// the judge allocates its own buffers with the driver API, outside ATen's cache.
GroupRunner CudaGroupRunner(int gpu_ordinal);

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_ATEN_GPU_REFERENCE_H_
