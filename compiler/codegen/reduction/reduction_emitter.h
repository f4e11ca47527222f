// What the row_reduce and col_reduce emitters share: the kernel of a reduction task as passes over
// each row (a reduction whose input reads another's result runs one pass after it; two-pass
// softmax and moments take two), the final pass that writes the row-shaped outputs, the per-row
// outputs, and the row cache in registers. The templates differ in how threads map onto rows and
// how a row's threads combine their partial results: RowReduceEmitter (row_emitter.h: a row per
// warp or block, or per thread block cluster), ColumnReduceEmitter (column_emitter.h:
// consecutive threads on consecutive rows) and TransposeReduceEmitter (transpose_emitter.h:
// col_reduce's threads over a shared-memory tile, the outputs written in their own order)
// supply those parts.
//
// Emitting is a pure function of (analysis, point): the same inputs give byte-identical source.
#ifndef FORGE_COMPILER_CODEGEN_REDUCTION_REDUCTION_EMITTER_H_
#define FORGE_COMPILER_CODEGEN_REDUCTION_REDUCTION_EMITTER_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "compiler/codegen/cuda_expr.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/reduction/analysis.h"
#include "compiler/codegen/reduction/layout.h"

namespace forge::codegen::reduction {

// The kernel source of a valid row_reduce or col_reduce point (the template the analysis calls
// for); fails when an op or a view of the group cannot be expressed.
absl::StatusOr<std::string> EmitReductionKernel(const ReductionTask& analysis,
                                                const SchedulePoint& point);

// One accumulation of a pass: a reduction's first or second stage.
struct Stage {
  int reduction = 0;
  int step = 0;  // 0, or 1 for the second pass of two-pass softmax / layer_norm
  std::string accumulator;
};

class ReductionEmitter {
 public:
  virtual ~ReductionEmitter() = default;

  absl::StatusOr<std::string> Write();

 protected:
  ReductionEmitter(const ReductionTask& analysis, const SchedulePoint& point)
      : ReductionEmitter(analysis, point, LayoutOf(analysis, point)) {}

  // ---- What the templates supply ----
  // Work before any pass is emitted (transpose_reduce: the statements filling its tile); an error
  // ends the emission.
  virtual absl::Status Prepare() { return absl::OkStatus(); }
  // The element of `value` at `index` where the template keeps it (transpose_reduce: its
  // shared-memory tile), read by statements added to `emitter`; nullopt to compute or load it.
  virtual std::optional<Term> CachedValue(absl::string_view /*value*/, const Index& /*index*/,
                                          ElementEmitter& /*emitter*/) {
    return std::nullopt;
  }
  // The loop header of the final pass (which writes the row-shaped outputs): the chunk loop, or
  // transpose_reduce's loop over its tile in the outputs' order. It opens two blocks.
  virtual std::string FinalLoopHeader() const { return ChunkLoopHeader(); }
  // "row_reduce" or "col_reduce", for the source's comment.
  virtual absl::string_view TemplateName() const = 0;
  // Source after the kernel prelude and reduction_prelude.cuh (the cluster helpers).
  virtual void AppendPreludes(std::string& /*source*/) const {}
  // Text after the layout's description in the source's comment, before its period.
  virtual std::string LayoutNotes() const { return ""; }
  // Declarations before the kernel (__device__ variables).
  virtual std::string DeviceGlobals() const { return ""; }
  // What stands between `__global__ void` and the kernel's name: __launch_bounds__ and more.
  virtual std::string KernelQualifiers() const {
    return absl::StrCat("__launch_bounds__(", layout_.BlockThreads(), ") ");
  }
  // The statements that define `lane` (the thread's place in its row) and `row_in_block`.
  virtual std::vector<std::string> ThreadIndices() const = 0;
  // Appends to `lines` the combination of `accumulator` (of `acc_type`, combined by `op`) across
  // the row's threads, declaring the shared memory it needs in scratch_ under names numbered
  // `index` (one per stage of the kernel).
  virtual void Combine(int index, const std::string& acc_type, const std::string& op,
                       const std::string& accumulator, std::vector<std::string>& lines) = 0;
  // Appends the kernel's body after ThreadIndices: a row per row group (and cluster), its row
  // cache, the passes, the final pass and the per-row outputs.
  virtual void Body(const std::vector<std::string>& passes,
                    const std::vector<std::string>& final_pass,
                    const std::vector<std::string>& row_outputs, std::vector<std::string>& lines);

  // ---- Shared helpers ----
  bool TwoStep(const Reduction& reduction) const {
    if (Moments(reduction.kind)) return !welford_;
    if (Softmax(reduction.kind)) return !online_softmax_;
    return false;
  }
  std::string RowVariable(int reduction, absl::string_view what) const {
    return absl::StrCat("row", reduction, "_", what);
  }
  // The index of the row tensor's element in column chunk lane `lane`.
  Index ElementIndex(int lane) const;
  // Whether `index` (of a row-shaped value) names an element of the current row.
  bool InCurrentRow(const Index& index) const;
  // The index a value of one-per-row `shape` (keepdim, or without the reduced dim) is read at in
  // the current row.
  Index RowIndex(const std::vector<int64_t>& shape) const;
  // Whether a chunk's width_ elements of `spec` are one aligned vector access.
  bool VectorAccess(const forge::v1::TensorSpec& spec) const {
    return width_ > 1 && ElementBytes(spec.dtype()) * width_ <= 16 &&
           AlignedAlongTheRow(analysis_, spec, width_);
  }
  ElementEmitter NewEmitter(const std::string& prefix);
  absl::StatusOr<std::vector<std::string>> Pass(int pass, const std::vector<Stage>& stages);
  absl::StatusOr<std::vector<std::string>> FinalPass();
  absl::StatusOr<std::vector<std::string>> RowOutputs();
  // The row cache in registers: each cached input's chunks loaded up front.
  std::vector<std::string> CacheRowInputs();
  // A cached cluster's copy of chunk j of the next row (inside a chunk loop).
  std::string RefillChunk() const;
  // The coordinates o<d> of row `row` in the row shape without the reduced dim.
  std::vector<std::string> RowCoordinates() const;
  // Whether every chunk of every thread lies in the row (its block's part): no bounds check.
  bool ChunksCoverExactly() const;
  // The first column of chunk j of this thread, and the check that it lies in the row (its
  // block's part), opening a block either way.
  std::string ChunkColumn() const;
  std::string ChunkGuard() const;
  bool PipelinedCache() const {
    return layout_.SharedCache() && chunks_per_thread_ <= kMaxPipelinedChunks;
  }
  std::string ChunkLoopHeader() const;
  // Element `vector_lane` of chunk j in input `position`'s row cache.
  std::string CachedElement(int position, absl::string_view vector_lane) const;

  const ReductionTask& analysis_;
  const Layout layout_;
  const GroupView& view_;
  const int64_t threads_per_row_, rows_per_block_, width_;
  const bool cache_row_, online_softmax_, welford_;
  const std::string index_type_;
  const int64_t chunks_per_thread_;
  int lane_ = 0;  // lane of the column chunk being emitted
  int pass_ = -1;  // the pass being emitted; FinalPass and RowOutputs are past every pass
  // Inputs kept in the row cache (registers, or shared memory with cluster_blocks), filled up
  // front by CacheRowInputs.
  std::set<int> cached_inputs_;
  std::vector<std::string> scratch_;  // shared-memory declarations
  // The row statistics the passes define (RowVariable names, acc_type), in order.
  std::vector<std::string> row_variables_;
  int scratch_count_ = 0;

 private:
  ReductionEmitter(const ReductionTask& analysis, const SchedulePoint& point, const Layout& layout)
      : analysis_(analysis),
        layout_(layout),
        view_(analysis.view),
        threads_per_row_(layout.threads_per_row),
        rows_per_block_(layout.rows_per_block),
        width_(layout.width),
        cache_row_(layout.cache_row),
        online_softmax_(Parameter(point, "online_softmax", 1) == 1),
        welford_(Parameter(point, "welford", 1) == 1),
        index_type_(analysis.wide_index ? "long long" : "int"),
        chunks_per_thread_(layout.ChunksPerThread()) {}
};

}  // namespace forge::codegen::reduction

#endif  // FORGE_COMPILER_CODEGEN_REDUCTION_REDUCTION_EMITTER_H_
