// Cross-architecture transfer of a predicted time: a prediction made for a GPU with a learned
// model (the source, e.g. the H200, whose measurements trained it) carried to a GPU of the arch
// table without measurements (the target, e.g. an A100) by the ratio of the two GPUs' ceilings on
// the candidate's bottleneck:
//
//   target seconds = source seconds x ceiling(source) / ceiling(target)
//
// The bottleneck is read from the task's roofline on the source GPU: DRAM when its bytes bound
// the floor; the math unit of the task's math mode (FFMA on the CUDA cores for float32/float64,
// the tensor cores otherwise) when its flops do; launch when the whole floor is below one kernel
// launch's overhead (the launches dominate). Ceilings are the arch table's figures (DRAM
// bandwidth, the peak of the math mode); the table has one launch overhead for every GPU
// (perf_model.h), so a launch-bound time transfers unchanged. An L2-bound ceiling needs an L2
// bandwidth, which the table lacks and no calibration measures yet: not a bottleneck here.
//
// A transferred time is a PREDICTION for a GPU nothing measured; its error is unknown until a
// transfer check between two measured GPU kinds exists (callers say "no measured error").
#ifndef FORGE_COMPILER_COST_LEARNED_TRANSFER_H_
#define FORGE_COMPILER_COST_LEARNED_TRANSFER_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/arch/arch.h"
#include "forge/v1/task.pb.h"

namespace forge::cost {

enum class Bottleneck { kDram, kFfma, kTensorCore, kLaunch };

// "DRAM", "FFMA", "tensor core", "launch".
absl::string_view BottleneckName(Bottleneck bottleneck);

struct Transfer {
  double seconds = 0;  // on the target
  double ratio = 1;    // target seconds / source seconds
  Bottleneck bottleneck = Bottleneck::kDram;
};

// The bottleneck of `task` on `source`: see the header comment. InvalidArgument when the source
// lacks the task's math mode.
absl::StatusOr<Bottleneck> BottleneckOf(const GpuArch& source, const forge::v1::KernelTask& task);

// `seconds` predicted for `task` on `source`, carried to `target`. InvalidArgument for a
// non-positive time or when either GPU lacks the task's math mode.
absl::StatusOr<Transfer> TransferSeconds(double seconds, const forge::v1::KernelTask& task,
                                         const GpuArch& source, const GpuArch& target);

}  // namespace forge::cost

#endif  // FORGE_COMPILER_COST_LEARNED_TRANSFER_H_
