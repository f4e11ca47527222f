// The transpose_reduce template's emitter, for rows read across memory: the reduced dim strided
// and consecutive rows consecutive in memory (a layer norm over the channels of a permuted NCHW
// tensor, ConvNeXt's). A block takes a tile of `tile_rows` consecutive rows. Its threads first
// compute the tile's values (TransposeTileValues: those read strided along the row) with
// col_reduce's mapping, lanes on consecutive rows (so every load of a warp is coalesced), into a
// shared-memory tile in their register type; the passes read the tile in the same mapping and combine a row's threads as
// col_reduce does (forge_col_allreduce: deterministic), then leave each row's statistics in shared
// memory. The final pass walks the tile in the outputs' order: along the row where every
// row-shaped output has unit stride along the reduced dim (a contiguous NHWC output, stored
// coalesced), across rows otherwise. Numerics are the row templates' (the same passes, Welford or
// two-pass, online or two-pass softmax). reduction.h describes the template and its parameters.
#ifndef FORGE_COMPILER_CODEGEN_REDUCTION_TRANSPOSE_EMITTER_H_
#define FORGE_COMPILER_CODEGEN_REDUCTION_TRANSPOSE_EMITTER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/codegen/reduction/column_emitter.h"

namespace forge::codegen::reduction {

class TransposeReduceEmitter : public ColumnReduceEmitter {
 public:
  // `point` must be a valid transpose_reduce point of `analysis` (ValidatePoint).
  TransposeReduceEmitter(const ReductionTask& analysis, const SchedulePoint& point)
      : ColumnReduceEmitter(analysis, point) {}

 private:
  // A value of the tile: its array's name, register type and row stride (elements).
  struct TileValue {
    std::string array;
    std::string type;
    int64_t stride = 0;
    int64_t offset = 0;  // bytes into the dynamic shared memory
  };

  // The fill loop unrolls fully up to this many columns a thread, this deep past it.
  static constexpr int64_t kMaxFillUnroll = 32;

  absl::string_view TemplateName() const override { return "transpose_reduce"; }
  std::string LayoutNotes() const override;
  absl::Status Prepare() override;
  std::optional<Term> CachedValue(absl::string_view value, const Index& index,
                                  ElementEmitter& emitter) override;
  std::string FinalLoopHeader() const override;
  void Body(const std::vector<std::string>& passes, const std::vector<std::string>& final_pass,
            const std::vector<std::string>& row_outputs, std::vector<std::string>& lines) override;

  // Whether the final pass walks the tile along its rows (every row-shaped output has unit stride
  // along the reduced dim) rather than across them.
  bool OutputsAlongTheRow() const;
  // The statements naming the current row (row_wide, active, row and its coordinates) for the
  // tile row `row_in_block`.
  std::vector<std::string> CurrentRow() const;
  std::string TileElement(const TileValue& tile) const;

  std::map<std::string, TileValue, std::less<>> tile_;  // by value name
  std::vector<std::string> fill_;  // the statements computing the tile
  bool filling_ = false;
};

}  // namespace forge::codegen::reduction

#endif  // FORGE_COMPILER_CODEGEN_REDUCTION_TRANSPOSE_EMITTER_H_
