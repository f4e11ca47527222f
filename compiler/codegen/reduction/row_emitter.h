// The row_reduce template's emitter: a row (all elements that share the leading coordinates) is
// reduced by threads_per_row threads, a warp or several (combined through shared memory), with
// rows_per_block rows per block; or, with cluster_blocks > 1, by the blocks of one thread block
// cluster, each taking a segment of the row and combining through distributed shared memory
// (cluster_prelude.cuh). A cached cluster keeps its segment in shared memory and is persistent:
// its clusters take rows from a counter and copy the next row in while writing this one's
// outputs. reduction.h describes the template and its parameters.
#ifndef FORGE_COMPILER_CODEGEN_REDUCTION_ROW_EMITTER_H_
#define FORGE_COMPILER_CODEGEN_REDUCTION_ROW_EMITTER_H_

#include <string>
#include <vector>

#include "compiler/codegen/reduction/reduction_emitter.h"

namespace forge::codegen::reduction {

class RowReduceEmitter : public ReductionEmitter {
 public:
  // `point` must be a valid row_reduce point of `analysis` (ValidatePoint).
  RowReduceEmitter(const ReductionTask& analysis, const SchedulePoint& point)
      : ReductionEmitter(analysis, point) {}

 private:
  absl::string_view TemplateName() const override { return "row_reduce"; }
  void AppendPreludes(std::string& source) const override;
  std::string LayoutNotes() const override;
  std::string DeviceGlobals() const override;
  std::string KernelQualifiers() const override;
  std::vector<std::string> ThreadIndices() const override;
  void Combine(int index, const std::string& acc_type, const std::string& op,
               const std::string& accumulator, std::vector<std::string>& lines) override;
  void Body(const std::vector<std::string>& passes, const std::vector<std::string>& final_pass,
            const std::vector<std::string>& row_outputs, std::vector<std::string>& lines) override;

  // A cached cluster's shared-memory row cache and forge_fill_row_chunk(row, j), which copies
  // chunk j of `row` into it with cp.async (one group per chunk).
  std::vector<std::string> SharedRowCache();
  // The kernel body of a cached cluster (appended to `lines`): persistent clusters that take
  // rows from a counter and copy the next row into shared memory while writing this one's
  // outputs.
  void PersistentRows(const std::vector<std::string>& passes,
                      const std::vector<std::string>& final_pass,
                      const std::vector<std::string>& row_outputs, std::vector<std::string>& lines);
};

}  // namespace forge::codegen::reduction

#endif  // FORGE_COMPILER_CODEGEN_REDUCTION_ROW_EMITTER_H_
