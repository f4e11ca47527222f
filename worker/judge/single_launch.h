// One launch of a candidate on the judge's draw 0, with nothing else running on the GPU: what
// compute-sanitizer watches when a would-be best is sanitized (the sandbox child's one-shot mode,
// worker/sandbox/sanitize.h). The judge has already compared this candidate's outputs; this run
// exists to give the tool every kernel the candidate launches and nothing of the judge's own.
//
// Contract of LaunchOnDrawZero: the inputs are draw 0 of JudgeOptions' seed and integer ranges
// (DrawInput, the judge's first draw bit for bit), each in an exact allocation (no guard zones:
// memcheck sees the first byte past a tensor as out of bounds), uploaded on the launch stream;
// the outputs are exact allocations left unwritten, so that initcheck reports a kernel that
// reads an output before writing it; the candidate is launched once on that stream and its
// completion waited for through an event recorded after the launch, then the whole device.
// Returns the launch's or the synchronization's CUDA error (the candidate's), or the judge's
// error drawing the inputs.
#ifndef FORGE_WORKER_JUDGE_SINGLE_LAUNCH_H_
#define FORGE_WORKER_JUDGE_SINGLE_LAUNCH_H_

#include "absl/status/status.h"
#include "forge/v1/task.pb.h"
#include "worker/gpu/device.h"
#include "worker/judge/judge.h"

namespace forge::judge {

absl::Status LaunchOnDrawZero(const gpu::Device& device, const forge::v1::KernelTask& task,
                              const CandidateLaunch& launch, const JudgeOptions& options);

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_SINGLE_LAUNCH_H_
