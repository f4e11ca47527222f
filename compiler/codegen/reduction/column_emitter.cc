#include "compiler/codegen/reduction/column_emitter.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace forge::codegen::reduction {

std::vector<std::string> ColumnReduceEmitter::ThreadIndices() const {
  // Consecutive threads take consecutive rows: adjacent inner positions, coalesced loads.
  return {absl::StrCat("const int lane = threadIdx.x / ", rows_per_block_, ";"),
          absl::StrCat("const int row_in_block = threadIdx.x % ", rows_per_block_, ";")};
}

void ColumnReduceEmitter::Combine(int index, const std::string& acc_type, const std::string& op,
                                  const std::string& accumulator,
                                  std::vector<std::string>& lines) {
  std::string scratch = absl::StrCat("static_cast<", acc_type, "*>(nullptr)");
  if (threads_per_row_ > 1) {
    scratch = absl::StrCat("scratch", index);
    scratch_.push_back(absl::StrCat("__shared__ ", acc_type, " ", scratch, "[",
                                    threads_per_row_ * rows_per_block_, "];"));
  }
  lines.push_back(absl::StrCat(accumulator, " = forge_col_allreduce<", threads_per_row_, ", ",
                               rows_per_block_, ">(", accumulator, ", ", op, "(), ", scratch,
                               ");"));
}

}  // namespace forge::codegen::reduction
