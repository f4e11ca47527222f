// The partitioner: a model graph -> kernel tasks (fusion groups with fixed shapes) and the ordered
// task instances that, run in turn, compute the whole model.
//
// Fusion rules, applied in this order (op classes: op_classes.h):
//  0. Explicit attention (attention_pattern.h: matmul, scale, mask, softmax, matmul, with GQA
//     repeats and the in-graph causal mask's builders) becomes one ATTENTION group anchored at
//     its output matmul, which takes its epilogue as in 1. A near miss (a softmax of a matmul
//     that breaks a rule) is left to the rules below, and its reason becomes a note of the task
//     its softmax lands in ("not attention: ...").
//  1. Anchors, in graph order: every reduction, scan, GEMM, convolution and attention node starts
//     a group of its family. A GEMM that is one projection of a gated product (SwiGLU:
//     silu(A W_gate) * (A W_up), bfloat16 or float16, no biases, each intermediate read once)
//     makes one GEMM group of both projections, the silu and the mul, with no epilogue (the gated
//     kernel writes the mul's result); a float32 one keeps separate GEMM groups, and a near miss
//     (a bias, different inputs, a second reader) too, with a note on the gate's task.
//     - A reduction or scan takes its pointwise prologue: pointwise producers whose every use is inside the
//       group (RMSNorm's pow feeding mean), transitively.
//     - Every anchor takes its pointwise epilogue: while the group's last node has exactly one used
//       output, read by exactly one pointwise (or eval batch-norm) node and not a graph output,
//       that node joins (bias add, activation, scale, residual add, batch norm, layer_norm+gelu).
//  2. Pointwise chains: each remaining pointwise or eval batch-norm node joins the pointwise
//     groups of its producers, merging them (any DAG of elementwise ops, with broadcasts, becomes
//     one POINTWISE group), unless that would make the groups depend on each other in a cycle.
//  3. Every other node (opaque ATen ops) is one ATEN task.
//  4. Views are free and folded: a view joins the one group that reads its result (directly or
//     through more views) when there is exactly one such group and the result is not a graph
//     output; otherwise it joins the group that produced its input; a view of a graph input read
//     by several groups becomes an ATEN task of its own (an ATen view call: no data moves).
// "Reads through views": when deciding single use, views are transparent.
// Size: a group takes at most kMaxFusedNodes nodes other than views; a longer chain continues in
// a new group (a client chooses how long a chain is, and generators walk it).
// Every node lands in exactly one group. Identical groups (same task digest) share one task.
#ifndef FORGE_COMPILER_GRAPH_PARTITION_H_
#define FORGE_COMPILER_GRAPH_PARTITION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "forge/v1/graph.pb.h"
#include "forge/v1/task.pb.h"

namespace forge::graph {

// One occurrence of a task in the model: which model values it reads and writes.
struct TaskInstance {
  int task_index = 0;       // into PartitionResult::tasks
  std::string task_digest;  // the task's digest, for convenience
  // Model nodes the instance covers, in graph order.
  std::vector<std::string> node_names;
  // The model value bound to each input / output of the task's group, in the group's order.
  std::vector<std::string> input_values;
  std::vector<std::string> output_values;
};

inline constexpr int kMaxFusedNodes = 256;

struct PartitionResult {
  // Distinct tasks, in the order of their first instance; occurrences counts the instances.
  std::vector<forge::v1::KernelTask> tasks;
  // Every instance, in an order that respects data dependencies.
  std::vector<TaskInstance> instances;
};

// Partitions `graph`. InvalidArgument, naming the node or value, for a malformed graph: a value
// described twice or defined twice, a node reading or an output naming an undefined value, a node
// output without a Value entry, duplicate node names, or a dependency cycle.
absl::StatusOr<PartitionResult> Partition(const forge::v1::Graph& graph);

}  // namespace forge::graph

#endif  // FORGE_COMPILER_GRAPH_PARTITION_H_
