// The op table: everything Forge knows about an ATen operator, in one entry per op (per overload
// where the overload changes what the op is). Forge's registry of lowerings, in the way of
// Inductor's: adding an op is adding one entry to op_table.cc. An entry says
//   - its class and cost: which fusion group the partitioner (compiler/graph) lets it join, and
//     the flops per element the cost model charges;
//   - its element form: how the elementwise generator (ElementEmitter, compiler/codegen) produces
//     an element of its output: by the entry's CUDA emitter (pointwise_call.h), as the element of
//     `self` at the same index (a copy), or at a remapped index (a view). Ops without a form
//     reach the GPU through another family (reduction, GEMM library, ATen fallback);
//   - its reference support: the domain the judge draws the op's inputs from, where random
//     values would make the reference fail or meaningless (an index out of range, the log of a
//     negative), and the adversarial distributions the judge adds draws of (AdversarialDraw). The reference interpreter itself needs no entry: it runs every op its LibTorch's
//     dispatcher knows, by schema.
//
// Layering: this library is below compiler/graph, compiler/codegen and worker/judge, which read
// it, and depends on none of them (protos and Abseil only). That is why the emitters live here
// and speak PointwiseCall (operands by argument name, one expression out) rather than codegen's
// ElementEmitter: the table can then hold the emitter itself, and class and emitter stay one
// entry without compiler/graph depending on compiler/codegen.
//
// Class and element form are separate facts and may disagree: an op of class pointwise without a
// form (frac, lerp) joins a fused group whose generation then fails (the task runs through ATen);
// an op with a form but class opaque (acosh, floor_divide, the *_copy views) is never fused by
// the partitioner, so its emitter serves only tasks built by hand. op_table_test lists these
// disagreements, so that a new one is a decision.
#ifndef FORGE_COMPILER_OPS_OP_TABLE_H_
#define FORGE_COMPILER_OPS_OP_TABLE_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compiler/ops/pointwise_call.h"

namespace forge::ops {

enum class OpClass {
  // Elementwise with broadcasting: arithmetic, comparisons, unary math, activations, casts,
  // copies (clone, contiguous: the identity op).
  kPointwise,
  // Batch norm in eval mode: elementwise with per-channel parameters (scale and shift).
  kBatchNormEval,
  // Re-reads storage without computing: view, reshape, transpose, slice, expand, split, ...
  kView,
  // Reduces along dimensions: softmax, norms, sum, mean, losses, ...
  kReduction,
  // Prefix scans along one dimension: cumsum, cumprod, cummax, cummin, logcumsumexp. Like a
  // reduction they anchor a group and take its elementwise prologue and epilogue; unlike one, the
  // output has the input's shape.
  kScan,
  // Matrix products: linear, mm, bmm, addmm, matmul, baddbmm.
  kGemm,
  // Convolutions.
  kConv,
  // Sliding windows over (H, W), channel by channel: max / average pooling (and depthwise
  // convolutions, which the partitioner moves here from kConv by their weight's shape). Like a
  // reduction they anchor a group and take its elementwise prologue and epilogue.
  kStencil,
  // Scaled dot-product attention and its backend variants.
  kAttention,
  // Anything else: runs as one ATen call.
  kOpaque,
};

// Lower-case name of the class, e.g. "pointwise".
absl::string_view OpClassName(OpClass op_class);

// How ElementEmitter produces an element of the op's output at an index.
enum class ElementForm {
  // It does not: the op is not elementwise, or the generator does not have it.
  kNone,
  // The entry's emitter computes it from the operands at the same (broadcast) index.
  kCompute,
  // The element of `self` at the same index: clone, alias, detach.
  kCopy,
  // Views: the element of `self` at a remapped index.
  kReshape,          // any reshape (view, squeeze, unsqueeze, flatten): row-major order kept
  kPermute,          // by `dims`
  kTranspose,        // `dim0` and `dim1` swapped
  kMatrixTranspose,  // t: the two dims of a matrix swapped; the identity below rank 2
  kExpand,           // broadcast: size-1 dims pinned to 0
  kSlice,            // `start` + index * `step` along `dim`
  kSelect,           // `index` inserted at `dim`
  kSplit,            // output k of split/chunk: a slice along `dim` after outputs 0..k-1
  kUnbind,           // output k of unbind: k inserted at `dim`
  // Glue: copies that move or pick elements, and sources, as index arithmetic inside the kernel
  // (no copy materializes; compiler/codegen/glue_forms.h says how each reads its operands).
  kCat,               // `tensors` joined along `dim`: the input whose range holds the index
  kStack,             // `tensors` joined along a new `dim`
  kFlip,              // `dims` reversed
  kRoll,              // rotated by `shifts` along `dims` (no `dims`: the flattened tensor)
  kRepeat,            // tiled `repeats` times per dim (leading dims added)
  kRepeatInterleave,  // each element `repeats` (an int) times along `dim` (none: flattened)
  kTriu,              // `self` where column - row >= `diagonal`, else 0
  kTril,              // `self` where column - row <= `diagonal`, else 0
  kArange,            // `start` + index * `step`: a source, no tensor read
  kIndexSelect,       // `self` at position `index`[i] along `dim`
  kGather,            // `self` at `index`'s element along `dim`
  kEmbedding,         // row `indices`[i...] of `weight`
};

// The domain the judge draws an input of the op from (worker/judge/inputs.h says how).
enum class InputDomainRule {
  kAny,
  // `target` holds class indices of `self` (the class dim: 1, or 0 for a 1-d `self`).
  kClassTarget,
  // `index` holds positions along `dim` of `self`.
  kDimIndex,
  // `indices` holds rows of `weight`.
  kEmbeddingIndices,
  // The k-th tensor of `indices` holds positions along dim k of `self`.
  kIndexPositions,
  // `running_var` is positive.
  kPositiveRunningVar,
  // `self` is positive.
  kPositiveSelf,
};

// The adversarial distributions the judge adds a draw of for the op's data operands (the
// arguments `self`, `input` and `other`; kIntegerEdges for its index arguments), where they expose wrong-but-plausible kernels that
// normal(0, 1)-like draws never do (worker/judge/inputs.h says what each draws). Bits of
// OpEntry::adversarial.
enum AdversarialDraw : unsigned {
  // Logits of scale 10^3 (what the dtype represents): softmax without the max subtracted
  // overflows.
  kLargeLogits = 1u << 0,
  // Rows with a large mean: a variance as E[x^2] - E[x]^2 cancels.
  kLargeMean = 1u << 1,
  // Rows with a tiny variance: 1 / (sqrt(var) + eps) in place of rsqrt(var + eps) shows.
  kTinyVariance = 1u << 2,
  // Pairs of terms that cancel, mixed signs: a sum kept in too little precision shows.
  kCancellation = 1u << 3,
  // Values at and near the kinks of the piecewise activations (0, +-1, +-3, 6).
  kActivationKinks = 1u << 4,
  // +0, -0 and subnormals among normal values.
  kZerosAndSubnormals = 1u << 5,
  // The ends of an index input's valid range (its InputDomainRule's), for ops that read with the
  // index (gather, embedding, the losses' targets); not for the scatters, where repeated indices
  // leave the result to the order of the writes.
  kIntegerEdges = 1u << 6,
};

struct OpEntry {
  absl::string_view name = {};  // without "aten::": "add"
  // The overload this entry is for; empty: every overload without an entry of its own. An
  // empty overload in a graph is "default".
  absl::string_view overload = {};
  OpClass op_class = OpClass::kOpaque;
  // Cost-model flops per element: per output element for pointwise and batch-norm ops, per input
  // element for reductions; 0 where shapes give the count (GEMM, conv, attention) or the op is
  // not costed (views, opaque ops).
  double flops_per_element = 0;
  ElementForm form = ElementForm::kNone;
  PointwiseEmitter emitter = nullptr;  // set exactly when form is kCompute
  InputDomainRule domain = InputDomainRule::kAny;
  unsigned adversarial = 0;  // AdversarialDraw bits
  // For an entry no family generates (class opaque): why, as `forge inspect` and the report say
  // it ("the repeat counts are a tensor: ..."). Empty: the generic reason, that no kernel family
  // generates the op.
  absl::string_view opaque_reason = {};
};

// The entry of `op` ("aten::add", with its namespace) at `overload` ("Tensor"; "" is "default"):
// the overload's own entry, else the op's entry for every overload; nullptr for ops outside the
// aten namespace and ops the table does not have (class opaque, no element form).
const OpEntry* FindOp(absl::string_view op, absl::string_view overload);
const OpEntry* FindOp(const forge::v1::Node& node);

// Every entry, in the table's order.
absl::Span<const OpEntry> AllOps();

}  // namespace forge::ops

#endif  // FORGE_COMPILER_OPS_OP_TABLE_H_
