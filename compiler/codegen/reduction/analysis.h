// The reduction family's task analysis: what a row_reduce or col_reduce kernel needs to know about
// a task, checked once. A task is one or more reductions (sum, mean, amax, amin, var / var_mean,
// logsumexp, softmax, log_softmax, layer_norm) along one dimension of tensors of one shape, with elementwise
// and view ops fused before and after them (reduction.h says which groups qualify).
//
// Analyze fails with Unimplemented naming the first obstacle when the family cannot implement the
// task, and with InvalidArgument when the task is malformed. Layer norm over k > 1 trailing dims
// is analysed as layer norm over one dim of their product, on a rewritten copy of the task that
// the analysis owns (ReductionTask::flattened), when every tensor is contiguous across them; so
// are sum, mean, amax, amin, var / var_mean and logsumexp with keepdim over k > 1 trailing dims
// (x.mean((2, 3), keepdim=True)).
// Group norm (aten::group_norm, aten::native_group_norm, and aten::instance_norm without running
// statistics: a group per channel) over x of shape (N, C, *spatial) is layer norm over the last
// dim of the task rewritten to (N, G, C/G * spatial) the same way, with the affine weight and
// bias read per channel (Reduction::channels_per_group); every tensor of the group but those two
// must be contiguous across (C, *spatial) (or broadcast from size-1 dims there), and the group
// holds no other reduction and no view. native_group_norm's mean and rstd ((N, G)) are per-row
// outputs.
//
// The cross_entropy template has its own analysis (cross_entropy.h).
#ifndef FORGE_COMPILER_CODEGEN_REDUCTION_ANALYSIS_H_
#define FORGE_COMPILER_CODEGEN_REDUCTION_ANALYSIS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/codegen/cuda_expr.h"
#include "forge/v1/task.pb.h"

namespace forge::codegen::reduction {

enum class ReductionKind {
  kSum, kMean, kMax, kMin, kSoftmax, kLogSoftmax, kLayerNorm, kVar,
  kLogSumExp,  // softmax's statistics (max, sum of exps), one value per row: max + log(sum)
};

struct Reduction {
  const forge::v1::Node* node = nullptr;
  ReductionKind kind = ReductionKind::kSum;
  std::string input;
  std::string weight, bias;  // layer_norm's, empty when None
  double eps = 1e-5;
  double correction = 1;  // var's: the variance divides by (length - correction)
  // Group norm's (analysed as layer norm over each (sample, group) row of the task rewritten to
  // (N, G, C/G * spatial)): column c of group g normalizes channel g * channels_per_group +
  // c / spatial, whose weight and bias it reads. 0 for every other reduction.
  int64_t channels_per_group = 0;
  int64_t spatial = 1;
  std::vector<int> depends_on;  // indices of reductions whose results its input reads
};

struct ReductionTask {
  explicit ReductionTask(GroupView group_view) : view(std::move(group_view)) {}
  // The task the view reads when Analyze rewrote it (layer norm over several trailing dims, seen
  // as over their product); null when the view reads the caller's task.
  std::shared_ptr<const forge::v1::KernelTask> flattened;
  GroupView view;
  std::vector<int64_t> row_shape;  // the reduced tensor's shape
  int axis = -1;                   // the reduced dimension of row_shape
  int64_t columns = 0;             // row_shape[axis]: elements reduced per row
  int64_t rows = 0;
  int64_t inner = 1;               // elements of the dims after axis: 1 for row_reduce
  std::vector<Reduction> reductions;
  std::map<std::string, int, std::less<>> reduction_of_value;  // output value -> reduction
  std::string acc_type;  // "float" or "double"
  bool wide_index = false;
  int64_t widest_access = 1;
  int row_sized_inputs = 0;  // inputs of the row tensor's shape: what cache_row keeps
  bool has_softmax = false, has_moments = false;  // softmax / layer_norm or var present
};

// The analysis of `task` (see the file comment).
absl::StatusOr<ReductionTask> Analyze(const forge::v1::KernelTask& task);

// Layer norm and var: a mean and a sum of squared deviations (Welford, or two passes).
bool Moments(ReductionKind kind);
// Softmax, log_softmax and layer_norm: a result per element of the row, from row statistics.
bool ElementwiseInRow(ReductionKind kind);
// Softmax, log_softmax and logsumexp: a row's max and sum of exps (online, or two passes).
bool Softmax(ReductionKind kind);

std::vector<int64_t> ShapeOf(const forge::v1::TensorSpec& spec);

}  // namespace forge::codegen::reduction

#endif  // FORGE_COMPILER_CODEGEN_REDUCTION_ANALYSIS_H_
