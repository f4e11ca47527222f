// The col_reduce template's emitter, for a reduced dimension followed by inner elements (dim 1 of
// (N, C, H, W)): consecutive threads own consecutive rows (consecutive inner positions, so every
// load of a warp is coalesced) and each walks its row's reduced dimension; reduce_threads threads
// may split a row, combining through shared memory in lane order (forge_col_allreduce:
// deterministic). reduction.h describes the template and its parameters.
#ifndef FORGE_COMPILER_CODEGEN_REDUCTION_COLUMN_EMITTER_H_
#define FORGE_COMPILER_CODEGEN_REDUCTION_COLUMN_EMITTER_H_

#include <string>
#include <vector>

#include "compiler/codegen/reduction/reduction_emitter.h"

namespace forge::codegen::reduction {

class ColumnReduceEmitter : public ReductionEmitter {
 public:
  // `point` must be a valid col_reduce point of `analysis` (ValidatePoint).
  ColumnReduceEmitter(const ReductionTask& analysis, const SchedulePoint& point)
      : ReductionEmitter(analysis, point) {}

 private:
  absl::string_view TemplateName() const override { return "col_reduce"; }
  std::vector<std::string> ThreadIndices() const override;
  void Combine(int index, const std::string& acc_type, const std::string& op,
               const std::string& accumulator, std::vector<std::string>& lines) override;
};

}  // namespace forge::codegen::reduction

#endif  // FORGE_COMPILER_CODEGEN_REDUCTION_COLUMN_EMITTER_H_
