#include "compiler/codegen/reduction/transpose_emitter.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/reduction/analysis.h"
#include "compiler/codegen/reduction/layout.h"

namespace forge::codegen::reduction {

using forge::v1::KernelTask;
using forge::v1::TensorSpec;

bool TransposeReduceEmitter::OutputsAlongTheRow() const {
  const KernelTask& task = view_.task();
  for (const TensorSpec& spec : task.outputs()) {
    if (ShapeOf(spec) != analysis_.row_shape) continue;
    if (spec.strides(analysis_.axis) != 1) return false;
  }
  return true;
}

std::string TransposeReduceEmitter::LayoutNotes() const {
  return absl::StrCat(", a tile of ", rows_per_block_, " rows in shared memory, stored ",
                      OutputsAlongTheRow() ? "along the rows" : "across the rows");
}

std::string TransposeReduceEmitter::TileElement(const TileValue& tile) const {
  return absl::StrCat(tile.array, "[row_in_block * ", tile.stride, " + c0]");
}

absl::Status TransposeReduceEmitter::Prepare() {
  int64_t offset = 0;
  for (const std::string& value : TransposeTileValues(analysis_)) {
    absl::StatusOr<std::string> type = RegisterType(view_.DType(value));
    if (!type.ok()) return type.status();
    const int64_t element = TransposeTileElementBytes(analysis_, value);
    TileValue tile{absl::StrCat("tile", tile_.size()), *type,
                   TransposeTileStride(analysis_.columns, element), offset};
    offset += (rows_per_block_ * tile.stride * element + 15) / 16 * 16;
    tile_.emplace(value, std::move(tile));
  }
  // The tile's values, computed by each thread at its columns of its row (lanes on consecutive
  // rows: coalesced where the rows are consecutive in memory).
  filling_ = true;
  ElementEmitter emitter = NewEmitter("f_");
  for (const auto& [value, tile] : tile_) {
    absl::StatusOr<Term> term = emitter.Emit(value, ElementIndex(0));
    if (!term.ok()) return term.status();
    emitter.AddStatement(
        absl::StrCat(TileElement(tile), " = (", tile.type, ")", term->expr, ";"));
  }
  filling_ = false;
  // Unrolled, so that a thread's loads are in flight together (a 2-byte load each).
  fill_ = {absl::StrCat("#pragma unroll", chunks_per_thread_ <= kMaxFillUnroll
                                              ? ""
                                              : absl::StrCat(" ", kMaxFillUnroll),
                        "\n  ", ChunkLoopHeader())};
  for (const std::string& statement : emitter.statements()) fill_.push_back("      " + statement);
  fill_.push_back("    }\n  }");
  return absl::OkStatus();
}

std::optional<Term> TransposeReduceEmitter::CachedValue(absl::string_view value,
                                                        const Index& index,
                                                        ElementEmitter& emitter) {
  if (filling_) return std::nullopt;
  auto it = tile_.find(value);
  if (it == tile_.end() || index != ElementIndex(0)) return std::nullopt;
  const std::string variable = emitter.NewVariable();
  emitter.AddStatement(absl::StrCat("const ", it->second.type, " ", variable, " = ",
                                    TileElement(it->second), ";"));
  return Term{variable, view_.DType(value)};
}

std::vector<std::string> TransposeReduceEmitter::CurrentRow() const {
  std::vector<std::string> lines = {
      absl::StrCat("const long long row_wide = (long long)blockIdx.x * ", rows_per_block_,
                   " + row_in_block;"),
      absl::StrCat("const bool active = row_wide < ", analysis_.rows, "LL;"),
      absl::StrCat("const ", index_type_, " row = active ? (", index_type_, ")row_wide : (",
                   index_type_, ")", analysis_.rows - 1, ";")};
  const std::vector<std::string> coordinates = RowCoordinates();
  lines.insert(lines.end(), coordinates.begin(), coordinates.end());
  return lines;
}

std::string TransposeReduceEmitter::FinalLoopHeader() const {
  const int64_t columns = analysis_.columns;
  const bool along = OutputsAlongTheRow();
  // Each element of the tile once; consecutive threads on consecutive columns of a row (along)
  // or on consecutive rows of a column (across). The names shadow the thread's own row.
  std::string header = absl::StrCat(
      "for (int i = threadIdx.x; i < ", rows_per_block_ * columns, "; i += ",
      layout_.BlockThreads(), ") {\n",
      "    const int row_in_block = i ", along ? absl::StrCat("/ ", columns)
                                               : absl::StrCat("% ", rows_per_block_),
      ";\n    const int c0 = i ", along ? absl::StrCat("% ", columns)
                                         : absl::StrCat("/ ", rows_per_block_),
      ";\n");
  for (const std::string& line : CurrentRow()) absl::StrAppend(&header, "    ", line, "\n");
  for (const std::string& variable : row_variables_) {
    absl::StrAppend(&header, "    const ", analysis_.acc_type, " ", variable, " = tile_", variable,
                    "[row_in_block];\n");
  }
  return absl::StrCat(header, "    {");
}

void TransposeReduceEmitter::Body(const std::vector<std::string>& passes,
                                  const std::vector<std::string>& final_pass,
                                  const std::vector<std::string>& row_outputs,
                                  std::vector<std::string>& lines) {
  lines.push_back("extern __shared__ __align__(16) unsigned char forge_tile[];");
  for (const auto& [value, tile] : tile_) {
    lines.push_back(absl::StrCat(tile.type, "* const ", tile.array, " = reinterpret_cast<",
                                 tile.type, "*>(forge_tile + ", tile.offset, ");"));
  }
  for (const std::string& variable : row_variables_) {
    lines.push_back(absl::StrCat("__shared__ ", analysis_.acc_type, " tile_", variable, "[",
                                 rows_per_block_, "];"));
  }
  const std::vector<std::string> row = CurrentRow();
  lines.insert(lines.end(), row.begin(), row.end());
  lines.push_back("// The tile: each thread computes its columns of its row.");
  lines.insert(lines.end(), fill_.begin(), fill_.end());
  lines.insert(lines.end(), passes.begin(), passes.end());
  if (!final_pass.empty()) {
    lines.push_back("// The row statistics, for the final pass's threads (other rows' too).");
    std::string store = "if (lane == 0) {";
    for (const std::string& variable : row_variables_) {
      absl::StrAppend(&store, " tile_", variable, "[row_in_block] = ", variable, ";");
    }
    lines.push_back(store + " }");
    lines.push_back("__syncthreads();");
    lines.insert(lines.end(), final_pass.begin(), final_pass.end());
  }
  lines.insert(lines.end(), row_outputs.begin(), row_outputs.end());
}

}  // namespace forge::codegen::reduction
