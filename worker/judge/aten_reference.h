// The judge's reference in production: the task's group run through ATen on the CPU with all
// floating-point math in float64 (compiler/reference). A separate library so that the judge and
// its GPU tests stay free of LibTorch; this one links it.
#ifndef FORGE_WORKER_JUDGE_ATEN_REFERENCE_H_
#define FORGE_WORKER_JUDGE_ATEN_REFERENCE_H_

#include "worker/judge/judge.h"

namespace forge::judge {

// A ReferenceFn over compiler/reference's RunTaskGroup in Precision::kFloat64, with the same run in
// Precision::kNative as its native reference (eager's own rounding, which widens the judge's
// tolerance for reduced-precision tasks). Inputs keep the values the candidate got (rounded to
// their dtypes) and their strides.
ReferenceFn AtenFloat64Reference();

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_ATEN_REFERENCE_H_
