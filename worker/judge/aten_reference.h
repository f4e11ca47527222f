// The judge's reference in production: the task's group run through ATen with all floating-point
// math in float64 (compiler/reference), on the CPU or, in the sandbox child, on the GPU
// (aten_gpu_reference.h). A separate library so that the judge and its GPU tests stay free of
// LibTorch; this one links it.
#ifndef FORGE_WORKER_JUDGE_ATEN_REFERENCE_H_
#define FORGE_WORKER_JUDGE_ATEN_REFERENCE_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compiler/reference/reference.h"
#include "forge/v1/task.pb.h"
#include "worker/judge/judge.h"

namespace forge::judge {

// How a reference runs a task's group at a precision (compiler/reference's RunTaskGroup, on the
// CPU, or a runner that uses a GPU: aten_gpu_reference.h).
using GroupRunner = std::function<absl::StatusOr<std::vector<reference::HostTensor>>(
    const forge::v1::KernelTask& task, absl::Span<const reference::HostTensor> inputs,
    reference::Precision precision)>;

// A ReferenceFn over `run_group` in Precision::kFloat64, with the same run in Precision::kNative as
// its native reference (eager's own rounding, which widens the judge's tolerance for
// reduced-precision tasks). Inputs keep the values the candidate got (rounded to their dtypes) and
// their strides.
ReferenceFn AtenFloat64Reference(GroupRunner run_group = reference::RunTaskGroup);

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_ATEN_REFERENCE_H_
