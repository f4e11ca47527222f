// The cost model of a kernel task: floating-point operations and the fewest bytes of device
// memory one execution must move. Together with a GPU's peak rates they give the roofline floor.
#ifndef FORGE_COMPILER_GRAPH_COST_H_
#define FORGE_COMPILER_GRAPH_COST_H_

#include <cstdint>
#include <limits>

#include "absl/status/statusor.h"
#include "common/arch/arch.h"
#include "forge/v1/graph.pb.h"
#include "forge/v1/task.pb.h"

namespace forge::graph {

struct TaskCost {
  std::int64_t flops = 0;
  std::int64_t min_bytes = 0;
};

// Elements of a tensor (1 for a 0-d tensor). Both counts saturate at kSaturated rather than
// wrap around when they overflow int64 (SubmitJob refuses such shapes: server/intake.h).
inline constexpr std::int64_t kSaturated = std::numeric_limits<std::int64_t>::max();
std::int64_t NumElements(const forge::v1::TensorSpec& spec);

// Bytes of storage a tensor spans: its strides decide, so an expanded (stride 0) tensor spans
// less than its element count, and a transposed one the same.
std::int64_t SpannedBytes(const forge::v1::TensorSpec& spec);

// The cost of one execution of `group` (a kernel task's sub-graph):
// - flops, per node: pointwise and batch norm FlopsPerElement (op_classes.cc) per output element;
//   reductions FlopsPerElement per input element; GEMM 2*M*N*K (2 * output elements * the
//   contracted size, the first operand's last dimension); convolution 2*N*K*P*Q*(C/groups)*R*S
//   (2 * output elements * the weight's elements per output channel); attention
//   2*B*H*Lq*Lk*(D + Dv), which is 4*B*H*Lq*Lk*D for D = Dv, with no discount for causal masks;
//   views 0; opaque ATen ops 0 (unknown: their floor is the memory term alone).
// - min_bytes: every distinct group input read once plus every output written once, each as
//   SpannedBytes; outputs that are views of one another count once (the largest). A group made
//   only of views moves nothing: 0.
// InvalidArgument when a node names a value the group does not describe.
absl::StatusOr<TaskCost> ComputeTaskCost(const forge::v1::Graph& group);

// The arithmetic unit whose peak bounds `task`, for its roofline floor: fp64 when any tensor is
// float64; the tensor cores for GEMM, convolution and attention tasks on bf16/fp16 (kBf16) or
// fp8 data; the CUDA cores' fp32 otherwise (float32 never assumes TF32).
MathMode FloorMathMode(const forge::v1::KernelTask& task);

// The unit Forge's generated kernels compute `task` on: fp64 when any tensor is float64, the fp32
// CUDA cores otherwise (they compute 16-bit data in float32).
MathMode GeneratedKernelMathMode(const forge::v1::KernelTask& task);

}  // namespace forge::graph

#endif  // FORGE_COMPILER_GRAPH_COST_H_
