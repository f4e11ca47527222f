#include "compiler/cost/learned/transfer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "compiler/cost/perf_model.h"
#include "compiler/graph/cost.h"

namespace forge::cost {
namespace {

bool OnCudaCores(MathMode mode) { return mode == MathMode::kFp32 || mode == MathMode::kFp64; }

// The table's ceiling of `gpu` on `bottleneck` for math in `mode`; 0 where the GPU lacks it.
double Ceiling(const GpuArch& gpu, Bottleneck bottleneck, MathMode mode) {
  switch (bottleneck) {
    case Bottleneck::kDram: return gpu.dram_bytes_per_second;
    case Bottleneck::kFfma:
    case Bottleneck::kTensorCore: return gpu.PeakFlops(mode);
    case Bottleneck::kLaunch: return 1 / LaunchOverheadSeconds();
  }
  return 0;
}

}  // namespace

absl::string_view BottleneckName(Bottleneck bottleneck) {
  switch (bottleneck) {
    case Bottleneck::kDram: return "DRAM";
    case Bottleneck::kFfma: return "FFMA";
    case Bottleneck::kTensorCore: return "tensor core";
    case Bottleneck::kLaunch: return "launch";
  }
  return "unknown";
}

absl::StatusOr<Bottleneck> BottleneckOf(const GpuArch& source,
                                        const forge::v1::KernelTask& task) {
  const MathMode mode = graph::FloorMathMode(task);
  FORGE_ASSIGN_OR_RETURN(const Roofline floor,
                         RooflineFloor(source, static_cast<double>(task.flops()),
                                       static_cast<double>(task.min_bytes()), mode));
  if (floor.seconds < LaunchOverheadSeconds()) return Bottleneck::kLaunch;
  if (floor.bound == Bound::kMemory) return Bottleneck::kDram;
  return OnCudaCores(mode) ? Bottleneck::kFfma : Bottleneck::kTensorCore;
}

absl::StatusOr<Transfer> TransferSeconds(double seconds, const forge::v1::KernelTask& task,
                                         const GpuArch& source, const GpuArch& target) {
  if (!(seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("a transferred time must be positive, got ",
                                                   seconds, " s"));
  }
  FORGE_ASSIGN_OR_RETURN(const Bottleneck bottleneck, BottleneckOf(source, task));
  const MathMode mode = graph::FloorMathMode(task);
  const double from = Ceiling(source, bottleneck, mode);
  const double to = Ceiling(target, bottleneck, mode);
  if (!(from > 0) || !(to > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no ", BottleneckName(bottleneck), " ceiling for ", MathModeName(mode), " on ",
        from > 0 ? target.name : source.name));
  }
  return Transfer{.seconds = seconds * from / to, .ratio = from / to, .bottleneck = bottleneck};
}

}  // namespace forge::cost
