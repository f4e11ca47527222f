// The task of kernels/sanitizer_bugs.cuh's kernels, y = 2x + 1 over float32 [1000, 1003], and its
// float64 reference computed on the host: shared by tests/gpu/sanitizer_gpu_test and
// benchmarks/gpu/judge_cost_bench. Header-only (forge::judge's HostTensor).
#ifndef FORGE_TESTS_GPU_AFFINE_TASK_H_
#define FORGE_TESTS_GPU_AFFINE_TASK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "forge/v1/task.pb.h"
#include "worker/judge/host_tensor.h"

namespace forge::testing {

inline constexpr int64_t kAffineRows = 1000;
inline constexpr int64_t kAffineColumns = 1003;

// One float32 [kAffineRows, kAffineColumns] input and output; no nodes (the reference is
// AffineReference).
inline forge::v1::KernelTask AffineTask(const std::string& digest) {
  forge::v1::KernelTask task;
  task.set_digest(digest);
  for (forge::v1::TensorSpec* spec : {task.add_inputs(), task.add_outputs()}) {
    spec->set_dtype(forge::v1::DTYPE_FLOAT32);
    spec->add_shape(kAffineRows);
    spec->add_shape(kAffineColumns);
  }
  task.mutable_group()->add_inputs()->set_value_name("x");
  return task;
}

// y = 2x + 1 in float64.
inline absl::StatusOr<std::vector<std::vector<double>>> AffineReference(
    const forge::v1::KernelTask&, absl::Span<const judge::HostTensor> inputs) {
  std::vector<double> y = inputs[0].ToDoubles();
  for (double& value : y) value = 2 * value + 1;
  return std::vector<std::vector<double>>{y};
}

}  // namespace forge::testing

#endif  // FORGE_TESTS_GPU_AFFINE_TASK_H_
