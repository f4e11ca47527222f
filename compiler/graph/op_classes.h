// What the partitioner knows about an ATen operator: the class that decides which fusion group it
// can join, and the per-element cost constants of the cost model. The rules are entries of the op
// table (compiler/ops/op_table.cc); batch norm's training flag is the one rule that reads a node.
#ifndef FORGE_COMPILER_GRAPH_OP_CLASSES_H_
#define FORGE_COMPILER_GRAPH_OP_CLASSES_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "compiler/ops/op_table.h"
#include "forge/v1/graph.pb.h"

namespace forge::graph {

// The classes, their names and the rules live in the op table (compiler/ops/op_table.h), shared
// with the generators; this header is the partitioner's view of it.
using OpClass = ops::OpClass;
using ops::OpClassName;

// The class of `op` ("aten::add") in its `overload` ("Tensor"). Some names change class with the
// overload: aten::where.default (the one-argument nonzero form) is opaque, aten::max.other is
// pointwise while aten::max.dim reduces.
OpClass ClassifyOp(absl::string_view op, absl::string_view overload);

// The class of a node: ClassifyOp, except that aten::batch_norm with training=True is opaque (it
// updates running statistics).
OpClass ClassifyNode(const forge::v1::Node& node);

// True for a depthwise 2-d convolution with channel multiplier 1: aten::conv2d whose `groups`
// equals its output channels and whose weight (`weight_shape`) is (C, 1, kh, kw). The partitioner
// gives it class stencil (the stencil family computes it; denser convolutions stay conv).
bool IsDepthwiseConv2d(const forge::v1::Node& node, const std::vector<int64_t>& weight_shape);

// Floating-point operations per element the cost model charges for a pointwise, batch-norm or
// reduction node (per output element for the first two, per input element for reductions).
// 0 for other classes, whose flops follow from their shapes.
double FlopsPerElement(const forge::v1::Node& node);

// Why `node`, alone in an ATen task, runs as an ATen call: its op-table entry's opaque_reason, a
// view's or batch norm in training's own reason, else that no kernel family generates the op.
std::string AtenReason(const forge::v1::Node& node);

// Names of the values `node` reads, in argument order (list elements in order, Nones skipped);
// a value read twice appears twice.
std::vector<std::string> TensorArgumentNames(const forge::v1::Node& node);

}  // namespace forge::graph

#endif  // FORGE_COMPILER_GRAPH_OP_CLASSES_H_
