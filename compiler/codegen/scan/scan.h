// The scan family: an inclusive prefix scan along one dimension (aten::cumsum, cumprod, cummax,
// cummin, logcumsumexp), with the group's elementwise and view ops fused before it (the scanned
// element computed from the task's inputs) and after it (every task output computed from the
// scanned element at the same position: `cumsum(x) / n`, `exp(logcumsumexp(x))`). Any dim; every
// task output has the scanned tensor's shape. float32 / bfloat16 / float16 scan in float32
// (float64 in float64); cumsum and cumprod of integers give int64, combined in int64. cummax and
// cummin return ATen's indices exactly (the later position wins a tie; a NaN wins and stays).
//
// Template "row_scan", for a scanned dim that is the last (rows of consecutive elements): a row is
// scanned by `threads_per_row` threads (a warp, or several warps combining their totals through
// shared memory), `rows_per_block` rows per block, in tiles of threads_per_row x
// `elements_per_thread` x `vector_width` elements (each thread loads elements_per_thread vectors
// of consecutive elements, scans them, then the row's threads scan their totals by warp shuffles),
// the carry of the tiles before combined in front.
//
// Template "col_scan", for a scanned dim with inner elements after it (dim 1 of (N, C, H, W)):
// consecutive threads own consecutive inner positions (coalesced loads) and each walks its row
// along the scanned dim, `unroll` elements loaded before they are combined; `threads_per_block`.
//
// Template "chained_scan", for a last dim of 16384 elements or more (first in the space when the
// rows are too few to fill the GPU with a block each: cumsum over 1M+ elements): every block
// scans one tile of `threads_per_block` x `elements_per_thread` x `vector_width` elements as
// row_scan does, taking tiles in ticket order, and the prefix passes from tile to tile in one
// pass: a decoupled look-back (Merrill & Garland) whose combination order is fixed (groups of
// 32 x `tiles_per_lane` tiles, chained_scan.cuh), its flags in __device__ arrays stamped with the
// launch's epoch, so no memset is needed between launches. Launches of one loaded module must not
// overlap (the judge and the timer launch one at a time on one stream).
//
// Every template combines in an order fixed by the schedule point: the same bits every launch. A
// float32 sum's running carry (the tiles' in row_scan, the elements' in col_scan) is compensated
// (Kahan), so a long row or column stays within a few ulps of the exact prefix where a plain
// float32 carry would drift by sqrt(terms) ulps (compiler/codegen/tools/scan_accuracy.py).
//
// This folder: analysis.h (what a task scans), layout.h (a point's layout, constraints, default,
// launch and cost hints), emitter.h (the source), and the CUDA it embeds (scan_prelude.cuh,
// tile.cuh, row_scan.cuh, column_scan.cuh, chained_scan.cuh; cuda_sources.h).
#ifndef FORGE_COMPILER_CODEGEN_SCAN_SCAN_H_
#define FORGE_COMPILER_CODEGEN_SCAN_SCAN_H_

#include "compiler/codegen/family.h"

namespace forge::codegen {

class ScanFamily : public KernelFamily {
 public:
  forge::v1::KernelFamily kind() const override { return forge::v1::KERNEL_FAMILY_SCAN; }
  absl::string_view name() const override { return "scan"; }
  absl::string_view generator_version() const override { return "scan-1"; }

  absl::Status Applies(const forge::v1::KernelTask& task) const override;
  absl::StatusOr<std::vector<TemplateSpace>> ScheduleSpace(
      const forge::v1::KernelTask& task) const override;
  absl::Status Validate(const forge::v1::KernelTask& task,
                        const SchedulePoint& point) const override;
  absl::StatusOr<LaunchPlan> Plan(const forge::v1::KernelTask& task,
                                  const SchedulePoint& point) const override;
  absl::StatusOr<std::string> Emit(const forge::v1::KernelTask& task,
                                   const LaunchPlan& plan) const override;
};

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_SCAN_SCAN_H_
