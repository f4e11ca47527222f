// The glue element forms of the op table (compiler/ops/op_table.h, kCat ... kEmbedding): how
// ElementEmitter produces an element of cat, stack, flip, roll, repeat, repeat_interleave, triu,
// tril, arange, index_select, gather and embedding inside a fused kernel, as index arithmetic on
// their operands, so that no copy of theirs materializes (RoPE's `x * cos + cat(-x2, x1) * sin`
// is one kernel that reads x once per element it needs).
//
// What each form reads, for the output element at index i (every index component an expression of
// the emitter's index type; dims as the op normalizes them):
//   kCat               the input whose range along `dim` holds i[dim], at i[dim] - its start: an
//                      if / else-if chain (ElementEmitter::EmitChoice), so only that input is
//                      read; inputs of other dtypes are converted to the output's (ATen promotes);
//                      legacy 1-d empty inputs are skipped, as ATen does.
//   kStack             input i[dim] at i without dim (the same chain).
//   kFlip              size - 1 - i[d] for each d of `dims`.
//   kRoll              (i[d] - shift) mod size for each (shift, d) of `shifts`, `dims`; without
//                      `dims`, the flattened tensor's row-major position rolled.
//   kRepeat            i[d] mod size, the leading dims `repeats` adds dropped.
//   kRepeatInterleave  i[dim] / repeats (the self_int overload: `repeats` an int; without `dim`,
//                      the flattened tensor's position i[0] / repeats).
//   kTriu, kTril       `self` at i where column - row >= `diagonal` (triu) or <= (tril), else 0.
//   kArange            start + i[0] * step, in double for a floating result, long long otherwise.
//   kIndexSelect       `self` at `index`[i[dim]] along `dim` (a 0-d `index`: its one element).
//   kGather            `self` at `index`[i] along `dim`.
//   kEmbedding         `weight` at (`indices`[i[0..r-2]], i[r-1]).
// The index ops read the index tensor's element inside the kernel; an index out of range is the
// caller's error, as in ATen (the judge draws index inputs in range: InputDomainRule).
//
// Errors: InvalidArgument naming the node for a missing or malformed argument (a cat input of
// another rank, repeats that do not cover the rank, a triu of a vector); Unimplemented for a form
// of an argument the generator does not read (repeat_interleave's tensor of repeats).
#ifndef FORGE_COMPILER_CODEGEN_GLUE_FORMS_H_
#define FORGE_COMPILER_CODEGEN_GLUE_FORMS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/codegen/cuda_expr.h"
#include "compiler/ops/op_table.h"
#include "forge/v1/graph.pb.h"

namespace forge::codegen {

// Whether `form` is one of the glue forms above.
bool IsGlueForm(ops::ElementForm form);

// The element of `node`'s output at `index`, of the output's dtype; `node`'s form is `form`, a
// glue form; operands come from `emitter`, whose group `view` holds `node`.
absl::StatusOr<Term> EmitGlue(const GroupView& view, const forge::v1::Node& node,
                              ops::ElementForm form, const Index& index, ElementEmitter& emitter);

// Argument helpers the element forms share.
// `dim` counted from the front: a negative dim counts from the back of `rank` dims.
int64_t NormalizeDim(int64_t dim, int64_t rank);
// The integer argument `name` of `node`, or `fallback` when it is absent or not an integer.
int64_t IntArgument(const forge::v1::Node& node, absl::string_view name, int64_t fallback);

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_GLUE_FORMS_H_
