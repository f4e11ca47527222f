// The reduction family's "cross_entropy" template, for a task that is one aten::cross_entropy_loss
// node (or aten::nll_loss / nll_loss_nd, on log-probabilities: no pass over the row): its analysis (which losses it computes), layout (threads_per_row threads a row,
// rows_per_block rows a block, vector_width-element loads; blocks stride over the rows, at most
// kMaxCrossEntropyBlocks of them), constraints and emitter. The kernel itself is
// cross_entropy.cuh; reduction.h describes the template.
#ifndef FORGE_COMPILER_CODEGEN_REDUCTION_CROSS_ENTROPY_H_
#define FORGE_COMPILER_CODEGEN_REDUCTION_CROSS_ENTROPY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/reduction/layout.h"
#include "forge/v1/task.pb.h"

namespace forge::codegen::reduction {

// Blocks of one cross_entropy launch at most: blocks stride over the rows, so this caps the
// per-block partial sums the last block adds up (and the __device__ arrays that hold them).
inline constexpr int64_t kMaxCrossEntropyBlocks = 4096;

struct CrossEntropyTask {
  const forge::v1::Node* node = nullptr;
  int logits_position = 0, target_position = 0;
  forge::v1::TensorSpec logits, target, output;
  int64_t rows = 0, classes = 0;
  bool mean = true;  // reduction 1 (mean over the counted rows), else 2 (sum) or 0 (none)
  bool none = false;  // reduction 0: one loss per row (0 for an ignored row), output (N)
  bool nll = false;   // aten::nll_loss / nll_loss_nd: the input rows are log-probabilities
  // Class weights ((C), the logits' dtype), or -1: a row's loss is weighted by its target's, and
  // the mean divides by the counted rows' weights.
  int weight_position = -1;
  forge::v1::TensorSpec weight;
  int64_t ignore_index = -100;
  // A counted row's loss with label smoothing e: (1 - e) (lse - x[target]) + e/C sum_c (lse -
  // x_c) = lse - (1 - e) x[target] - e/C sum_c x_c, so the pass also sums the row's logits.
  double label_smoothing = 0;
  std::string acc_type;  // "float", or "double" for float64 logits
};


// The task's aten::cross_entropy_loss (or nll_loss, nll_loss_nd) node, or nullptr: a task with one
// is the cross_entropy template's (and AnalyzeCrossEntropy says whether the template can compute
// it).
const forge::v1::Node* FindCrossEntropyNode(const forge::v1::KernelTask& task);
// Unimplemented naming the first obstacle (class weights with label smoothing,
// other nodes in the group, logits that are not (N, C) floats, targets that are not int64 class
// indices); InvalidArgument for a malformed task.
absl::StatusOr<CrossEntropyTask> AnalyzeCrossEntropy(const forge::v1::KernelTask& task,
                                                     const forge::v1::Node& node);

// The template's space with its declared defaults, and with the task's default point: the valid
// layout closest to about 32 chunks per thread (RowLayoutScore).
TemplateSpace CrossEntropySpace();
TemplateSpace CrossEntropyScheduleSpace(const CrossEntropyTask& ce);
Layout CrossEntropyLayout(const SchedulePoint& point);
int64_t CrossEntropyGridBlocks(const CrossEntropyTask& ce, const Layout& layout);
// The row constraints (ValidateRowLayout) over the logits, and aligned rows for vector loads.
absl::Status ValidateCrossEntropyPoint(const CrossEntropyTask& ce, const SchedulePoint& point);

// The kernel source of a valid point's layout.
std::string CrossEntropySource(const forge::v1::KernelTask& task, const CrossEntropyTask& ce,
                               const Layout& layout);

}  // namespace forge::codegen::reduction

#endif  // FORGE_COMPILER_CODEGEN_REDUCTION_CROSS_ENTROPY_H_
