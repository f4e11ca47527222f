// The scan family's task analysis: what a scan kernel needs to know about a task, checked once.
// A task is one scan node (aten::cumsum, cumprod, cummax, cummin, logcumsumexp) along one dim,
// with elementwise and view ops fused before it (its input computed from the task's inputs) and
// after it (the task's outputs computed from the scan's result at the same element); every task
// output has the scanned tensor's shape.
//
// Analyze fails with Unimplemented naming the first obstacle when the family cannot implement the
// task (no scan, two scans, a reduction or opaque op in the group, an output of another shape, a
// dtype the scan does not take), and with InvalidArgument when the task is malformed (no dim, an
// output whose TensorSpec disagrees with its Value).
#ifndef FORGE_COMPILER_CODEGEN_SCAN_ANALYSIS_H_
#define FORGE_COMPILER_CODEGEN_SCAN_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/codegen/cuda_expr.h"
#include "forge/v1/task.pb.h"

namespace forge::codegen::scan {

// One scan op: its ATen name, the combine operation of scan_prelude.cuh that computes it, and
// what it takes.
struct ScanOp {
  absl::string_view op;        // "aten::cumsum"
  absl::string_view functor;   // "ForgeScanSum"
  bool with_indices = false;   // cummax / cummin: a second output, the int64 positions
  bool floating_only = false;  // integer inputs are rejected (cumsum / cumprod take them: int64)
  bool sum = false;            // float32 sums get a compensated (Kahan) carry
};

// The entry of `op` ("aten::cumsum"), or nullptr when it is not a scan the family computes.
const ScanOp* FindScanOp(absl::string_view op);

struct ScanTask {
  explicit ScanTask(GroupView group_view) : view(std::move(group_view)) {}
  GroupView view;
  const forge::v1::Node* node = nullptr;
  const ScanOp* op = nullptr;
  std::string input;           // the scanned value
  std::string values;          // the scan's result (cummax / cummin: the values)
  std::string indices;         // cummax / cummin's positions; empty otherwise
  std::vector<int64_t> shape;  // of the scanned tensor (and of every task output)
  int axis = 0;                // the scanned dim
  int64_t length = 0;          // shape[axis]
  int64_t rows = 0;            // elements / length: the scans one launch computes
  int64_t inner = 1;           // elements of the dims after axis: 1 for row_scan
  forge::v1::DType value_dtype = forge::v1::DTYPE_UNSPECIFIED;  // of `values`
  std::string value_type;     // C++ type the scan combines in: float, double or long long
  bool wide_index = false;    // some tensor reaches past 2^30 elements: 64-bit index math
  int64_t widest_access = 1;  // bytes of the widest element of a row-shaped input or output
};

absl::StatusOr<ScanTask> Analyze(const forge::v1::KernelTask& task);

// `shape` without dim `axis`.
std::vector<int64_t> ShapeWithout(const std::vector<int64_t>& shape, int axis);

}  // namespace forge::codegen::scan

#endif  // FORGE_COMPILER_CODEGEN_SCAN_ANALYSIS_H_
