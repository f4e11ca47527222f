#include "compiler/codegen/reduction/layout.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/dtype/dtype.h"
#include "compiler/codegen/cost_hints.h"
#include "compiler/codegen/reduction/reduction.h"

namespace forge::codegen::reduction {
namespace {

using forge::v1::TensorSpec;

absl::Status ValidateColumnPoint(const ReductionTask& analysis, const SchedulePoint& point,
                                 const Layout& layout) {
  const int64_t threads_per_block = Parameter(point, "threads_per_block", 256);
  if (layout.threads_per_row > threads_per_block) {
    return absl::InvalidArgumentError(absl::StrCat("reduce_threads ", layout.threads_per_row,
                                                   " exceeds threads_per_block ",
                                                   threads_per_block));
  }
  if (layout.threads_per_row > 1 && analysis.columns <= layout.threads_per_row / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reduce_threads ", layout.threads_per_row, " leaves half of them idle for ",
        analysis.columns, " reduced elements"));
  }
  if (layout.rows_per_block > 1 && analysis.rows <= layout.rows_per_block / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "threads_per_block ", threads_per_block, " / reduce_threads ", layout.threads_per_row,
        " = ", layout.rows_per_block, " rows per block leaves half the block idle for ",
        analysis.rows, " rows"));
  }
  return absl::OkStatus();
}

absl::Status ValidateClusterPoint(const ReductionTask& analysis, const Layout& layout) {
  const int64_t blocks = layout.cluster_blocks;
  if (layout.rows_per_block != 1) {
    return absl::InvalidArgumentError(absl::StrCat("cluster_blocks ", blocks,
                                                   " gives each block part of one row: needs "
                                                   "rows_per_block 1, not ",
                                                   layout.rows_per_block));
  }
  if ((blocks - 1) * layout.segment >= analysis.columns) {
    return absl::InvalidArgumentError(absl::StrCat("cluster_blocks ", blocks,
                                                   " leaves a block without columns of the ",
                                                   analysis.columns, "-column row"));
  }
  if (const int64_t bytes = SharedCacheOf(analysis, layout).bytes; bytes > kMaxClusterCacheBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster_blocks ", blocks, " leaves each block ", bytes,
        " bytes of the row to keep in shared memory; more than ", kMaxClusterCacheBytes));
  }
  if (!layout.SharedCache()) return absl::OkStatus();
  // cp.async copies 4, 8 or 16 bytes from an address aligned to them.
  for (const TensorSpec& spec : analysis.view.task().inputs()) {
    if (ShapeOf(spec) != analysis.row_shape) continue;
    if (layout.width * ElementBytes(spec.dtype()) < 4 ||
        !AlignedAlongTheRow(analysis, spec, layout.width)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cache_row with cluster_blocks ", blocks, " copies the row in vectors of vector_width ",
          layout.width, ": needs row-sized inputs of unit stride along the row, aligned to the "
          "vector, of at least 4 bytes per vector"));
    }
  }
  return absl::OkStatus();
}

bool TransposePoint(const SchedulePoint& point) {
  return point.template_name == ReductionFamily::kTransposeTemplateName;
}

// The strides of row-shaped value `name` as the kernel reads it: a group input's own, or a group
// input's permuted by the permute or transpose node producing `name`; nullopt otherwise.
std::optional<std::vector<int64_t>> RowValueStrides(const ReductionTask& analysis,
                                                    const std::string& name) {
  const GroupView& view = analysis.view;
  const int rank = static_cast<int>(analysis.row_shape.size());
  auto strides_of = [&](int position) {
    const TensorSpec& spec = view.InputSpec(position);
    return std::vector<int64_t>(spec.strides().begin(), spec.strides().end());
  };
  if (const int position = view.InputPosition(name); position >= 0) {
    if (ShapeOf(view.InputSpec(position)) != analysis.row_shape) return std::nullopt;
    return strides_of(position);
  }
  const forge::v1::Node* node = view.Producer(name);
  if (node == nullptr || (node->op() != "aten::permute" && node->op() != "aten::transpose")) {
    return std::nullopt;
  }
  const int position = view.InputPosition(TensorArgument(*node, "self"));
  if (position < 0 || view.InputSpec(position).shape_size() != rank ||
      static_cast<int>(view.InputSpec(position).strides_size()) != rank) {
    return std::nullopt;
  }
  auto normalize = [rank](int64_t dim) { return dim < 0 ? dim + rank : dim; };
  std::vector<int64_t> source(rank);  // dim j of `name` is dim source[j] of the input
  for (int j = 0; j < rank; ++j) source[j] = j;
  if (node->op() == "aten::permute") {
    const forge::v1::Argument* dims = FindArgument(*node, "dims");
    if (dims == nullptr || !dims->has_ints() || dims->ints().values_size() != rank) {
      return std::nullopt;
    }
    for (int j = 0; j < rank; ++j) source[j] = normalize(dims->ints().values(j));
  } else {
    const forge::v1::Argument* dim0 = FindArgument(*node, "dim0");
    const forge::v1::Argument* dim1 = FindArgument(*node, "dim1");
    if (dim0 == nullptr || dim1 == nullptr) return std::nullopt;
    const int64_t a = normalize(dim0->int_value()), b = normalize(dim1->int_value());
    if (a < 0 || b < 0 || a >= rank || b >= rank) return std::nullopt;
    std::swap(source[a], source[b]);
  }
  const std::vector<int64_t> input = strides_of(position);
  std::vector<int64_t> strides(rank);
  for (int j = 0; j < rank; ++j) {
    if (source[j] < 0 || source[j] >= rank) return std::nullopt;
    strides[j] = input[source[j]];
  }
  return strides;
}

absl::Status ValidateTransposePoint(const ReductionTask& analysis, const SchedulePoint& point,
                                    const Layout& layout) {
  if (!TransposedRows(analysis)) {
    return absl::InvalidArgumentError(
        "transpose_reduce: no row-shaped value is read with a unit stride across rows and a "
        "strided reduced dim; the row templates read it coalesced as it is");
  }
  const int64_t tile_rows = layout.rows_per_block;
  const int64_t threads = Parameter(point, "threads_per_block", 256);
  if (layout.threads_per_row > 1 && analysis.columns <= layout.threads_per_row / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transpose_reduce: threads_per_block ", threads, " / tile_rows ", tile_rows, " = ",
        layout.threads_per_row, " threads per row leaves half of them idle for ",
        analysis.columns, " reduced elements"));
  }
  if (tile_rows > 16 && analysis.rows <= tile_rows / 2) {
    return absl::InvalidArgumentError(absl::StrCat("transpose_reduce: tile_rows ", tile_rows,
                                                   " leaves half the tile empty for ",
                                                   analysis.rows, " rows"));
  }
  if (const int64_t bytes = TransposeTileBytes(analysis, tile_rows);
      bytes > kMaxTransposeTileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transpose_reduce: a tile of ", tile_rows, " rows of ", analysis.columns, " keeps ", bytes,
        " bytes in shared memory; more than ", kMaxTransposeTileBytes));
  }
  if ((analysis.rows + tile_rows - 1) / tile_rows > kMaxGridBlocks) {
    return absl::InvalidArgumentError(
        absl::StrCat(analysis.rows, " rows need more than 2^31-1 blocks"));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// The innermost dim of the row shape other than the reduced one, of more than one element; -1
// when there is none.
int InnerRowDim(const ReductionTask& analysis) {
  for (int d = static_cast<int>(analysis.row_shape.size()) - 1; d >= 0; --d) {
    if (d != analysis.axis && analysis.row_shape[d] > 1) return d;
  }
  return -1;
}

}  // namespace

bool TransposedRows(const ReductionTask& analysis) {
  if (ColumnTemplate(analysis) || analysis.columns < 2 || InnerRowDim(analysis) < 0) return false;
  for (const std::string& value : TransposeTileValues(analysis)) {
    if ((*RowValueStrides(analysis, value))[InnerRowDim(analysis)] == 1) return true;
  }
  return false;
}

std::vector<std::string> TransposeTileValues(const ReductionTask& analysis) {
  std::vector<std::string> values;
  if (ColumnTemplate(analysis)) return values;
  for (const forge::v1::Value& value : analysis.view.group().values()) {
    if (analysis.view.Shape(value.name()) != analysis.row_shape) continue;
    const std::optional<std::vector<int64_t>> strides = RowValueStrides(analysis, value.name());
    if (strides.has_value() && (*strides)[analysis.axis] != 1) values.push_back(value.name());
  }
  return values;
}

int64_t TransposeTileStride(int64_t columns, int64_t element_bytes) {
  for (int64_t stride = columns; stride < columns + 8; ++stride) {
    const int64_t bytes = stride * element_bytes;
    if (bytes % 4 == 0 && (bytes / 4) % 2 == 1) return stride;
  }
  // 8-byte elements: an odd number of them (two-way conflicts at most).
  return columns % 2 == 1 ? columns : columns + 1;
}

int64_t TransposeTileElementBytes(const ReductionTask& analysis, const std::string& value) {
  return std::max<int64_t>(4, ElementBytes(analysis.view.DType(value)));
}

int64_t TransposeTileBytes(const ReductionTask& analysis, int64_t tile_rows) {
  int64_t bytes = 0;
  for (const std::string& value : TransposeTileValues(analysis)) {
    const int64_t element = TransposeTileElementBytes(analysis, value);
    // Each value's part starts 16-byte aligned.
    bytes += (tile_rows * TransposeTileStride(analysis.columns, element) * element + 15) / 16 * 16;
  }
  return bytes;
}

TemplateSpace TransposeSpaceOf(const ReductionTask& analysis) {
  TemplateSpace space{ReductionFamily::kTransposeTemplateName,
                      {{"tile_rows", {16, 32, 64}, 32}, {"threads_per_block", {128, 256, 512}, 256}}};
  if (analysis.has_softmax) space.parameters.push_back({"online_softmax", {0, 1}, 1});
  if (analysis.has_moments) space.parameters.push_back({"welford", {0, 1}, 1});
  return space;
}

int64_t Parameter(const SchedulePoint& point, const std::string& name, int64_t fallback) {
  auto it = point.parameters.find(name);
  return it == point.parameters.end() ? fallback : it->second;
}

bool ColumnTemplate(const ReductionTask& analysis) { return analysis.inner > 1; }

bool LongRows(const ReductionTask& analysis) {
  return !ColumnTemplate(analysis) &&
         analysis.columns * std::max(1, analysis.row_sized_inputs) > kClusterRowElements;
}

bool FewLongRows(const ReductionTask& analysis) {
  return !ColumnTemplate(analysis) && analysis.rows <= kFewRowsClusterRows &&
         analysis.columns * std::max(1, analysis.row_sized_inputs) >= kFewRowsClusterElements;
}

bool SplitRowsByDefault(const ReductionTask& analysis) {
  return LongRows(analysis) || (FewLongRows(analysis) && analysis.rows < 2 * kRowsToFillTheGpu);
}

TemplateSpace SpaceOf(const ReductionTask& analysis) {
  TemplateSpace space =
      ColumnTemplate(analysis)
          ? TemplateSpace{ReductionFamily::kColumnTemplateName,
                          {{"threads_per_block", {64, 128, 256, 512}, 256},
                           {"reduce_threads", {1, 2, 4, 8, 16, 32, 64}, 1},
                           {"cache_row", {0, 1}, 0}}}
          : TemplateSpace{ReductionFamily::kTemplateName,
                          {{"threads_per_row", {32, 64, 128, 256, 512, 1024}, 32},
                           {"rows_per_block", {1, 2, 4, 8}, 1},
                           {"vector_width", {1, 2, 4, 8}, 1},
                           {"cache_row", {0, 1}, 0},
                           {"max_registers", {0, 64, 80, 96, 128}, 0}}};
  if (LongRows(analysis) || FewLongRows(analysis)) {
    space.parameters.push_back({"cluster_blocks", {1, 2, 4, 8}, 1});
  }
  if (analysis.has_softmax) space.parameters.push_back({"online_softmax", {0, 1}, 1});
  if (analysis.has_moments) space.parameters.push_back({"welford", {0, 1}, 1});
  return space;
}

Layout LayoutOf(const ReductionTask& analysis, const SchedulePoint& point) {
  Layout layout;
  layout.cache_row = Parameter(point, "cache_row", 0) == 1;
  if (TransposePoint(point)) {
    // A tile of tile_rows rows; the block's threads split each row's columns as col_reduce's
    // reduce_threads do.
    layout.rows_per_block = Parameter(point, "tile_rows", 32);
    layout.threads_per_row =
        std::max<int64_t>(1, Parameter(point, "threads_per_block", 256) / layout.rows_per_block);
  } else if (ColumnTemplate(analysis)) {
    layout.threads_per_row = Parameter(point, "reduce_threads", 1);
    layout.rows_per_block =
        std::max<int64_t>(1, Parameter(point, "threads_per_block", 256) / layout.threads_per_row);
  } else {
    layout.threads_per_row = Parameter(point, "threads_per_row", 32);
    layout.rows_per_block = Parameter(point, "rows_per_block", 1);
    layout.width = Parameter(point, "vector_width", 1);
    layout.cluster_blocks = Parameter(point, "cluster_blocks", 1);
    layout.max_registers = Parameter(point, "max_registers", 0);
  }
  // Whole vectors per block: a vector never straddles two blocks' parts.
  const int64_t vectors = (analysis.columns + layout.width - 1) / layout.width;
  layout.segment =
      (vectors + layout.cluster_blocks - 1) / layout.cluster_blocks * layout.width;
  return layout;
}

SharedCache SharedCacheOf(const ReductionTask& analysis, const Layout& layout) {
  SharedCache cache;
  if (!layout.SharedCache()) return cache;
  for (int i = 0; i < analysis.view.task().inputs_size(); ++i) {
    const TensorSpec& spec = analysis.view.task().inputs(i);
    if (ShapeOf(spec) != analysis.row_shape) continue;
    cache.offsets[i] = cache.bytes;
    cache.bytes += layout.ChunksPerThread() * layout.width * layout.threads_per_row *
                   ElementBytes(spec.dtype());
  }
  return cache;
}

bool AlignedAlongTheRow(const ReductionTask& analysis, const TensorSpec& spec, int64_t width) {
  const int rank = spec.shape_size();
  const int axis = analysis.axis - (static_cast<int>(analysis.row_shape.size()) - rank);
  if (axis < 0 || spec.shape(axis) != analysis.columns) return false;
  if (spec.strides(axis) != 1 || spec.storage_offset() % width != 0) return false;
  for (int d = 0; d < rank; ++d) {
    if (d != axis && spec.shape(d) > 1 && spec.strides(d) % width != 0) return false;
  }
  return true;
}

int64_t PersistentClusters(const ReductionTask& analysis, const Layout& layout) {
  const int64_t shared_bytes = SharedCacheOf(analysis, layout).bytes + 1024;
  const int64_t resident_per_sm = std::max<int64_t>(
      1, std::min(kThreadsPerSm / layout.BlockThreads(), kSharedBytesPerSm / shared_bytes));
  return std::min(analysis.rows,
                  2 * kRowsToFillTheGpu * resident_per_sm / layout.cluster_blocks + 1);
}

absl::Status ValidateRowLayout(int64_t rows, int64_t columns, int64_t widest_access,
                               const Layout& layout) {
  const int64_t threads_per_row = layout.threads_per_row;
  const int64_t rows_per_block = layout.rows_per_block;
  const int64_t width = layout.width;
  if (layout.BlockThreads() > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("threads_per_row ", threads_per_row,
                                                   " x rows_per_block ", rows_per_block,
                                                   " exceeds 1024 threads per block"));
  }
  if (columns % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat("vector_width ", width,
                                                   " does not divide the row length ", columns));
  }
  if (width * widest_access > 16) {
    return absl::InvalidArgumentError(absl::StrCat("vector_width ", width, " of ",
                                                   widest_access,
                                                   "-byte elements exceeds a 16-byte vector access"));
  }
  // With cluster_blocks a block's threads share only its part of the row.
  const int64_t block_columns = layout.cluster_blocks > 1 ? layout.segment : columns;
  if (threads_per_row > 32 && block_columns <= (threads_per_row / 2) * width) {
    return absl::InvalidArgumentError(absl::StrCat("threads_per_row ", threads_per_row,
                                                   " leaves half the row's threads idle for ",
                                                   block_columns, " columns of vector_width ",
                                                   width));
  }
  if (rows_per_block > 1 && rows <= rows_per_block / 2) {
    return absl::InvalidArgumentError(absl::StrCat("rows_per_block ", rows_per_block,
                                                   " leaves half the block idle for ",
                                                   rows, " rows"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePoint(const ReductionTask& analysis, const SchedulePoint& point) {
  if (TransposePoint(point)) {
    if (absl::Status status = CheckPointInSpace(TransposeSpaceOf(analysis), point); !status.ok()) {
      return status;
    }
    return ValidateTransposePoint(analysis, point, LayoutOf(analysis, point));
  }
  if (absl::Status status = CheckPointInSpace(SpaceOf(analysis), point); !status.ok()) {
    return status;
  }
  const Layout layout = LayoutOf(analysis, point);
  if (absl::Status status = ColumnTemplate(analysis)
                                ? ValidateColumnPoint(analysis, point, layout)
                                : ValidateRowLayout(analysis.rows, analysis.columns,
                                                    analysis.widest_access, layout);
      !status.ok()) {
    return status;
  }
  if (layout.cluster_blocks > 1) {
    if (absl::Status status = ValidateClusterPoint(analysis, layout); !status.ok()) return status;
  }
  const int64_t chunks_per_thread = layout.ChunksPerThread();
  const int64_t cached_in_registers =
      layout.cache_row && !layout.SharedCache()
          ? chunks_per_thread * layout.width * std::max(1, analysis.row_sized_inputs)
          : 0;
  if (cached_in_registers > kMaxCachedElementsPerThread) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cache_row keeps ", chunks_per_thread * layout.width, " elements of each of ",
        analysis.row_sized_inputs, " row-sized inputs per thread; more than ",
        kMaxCachedElementsPerThread, " registers"));
  }
  if (layout.max_registers > 0) {
    // One block per SM already caps a thread at the SM's registers over the block's threads.
    if (layout.MinBlocksPerSm() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "max_registers ", layout.max_registers, " with ", layout.BlockThreads(),
          "-thread blocks leaves room for fewer than two blocks per SM: no cap beyond the "
          "block size's own"));
    }
    if (cached_in_registers * (analysis.acc_type == "double" ? 2 : 1) + kRegistersBesidesTheCache >
        layout.max_registers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "max_registers ", layout.max_registers, " is too few for the ", cached_in_registers,
          " cached row elements per thread: the cache would spill"));
    }
  }
  if ((analysis.rows + layout.rows_per_block - 1) / layout.rows_per_block *
          layout.cluster_blocks >
      kMaxGridBlocks) {
    return absl::InvalidArgumentError(
        absl::StrCat(analysis.rows, " rows need more than 2^31-1 blocks"));
  }
  return absl::OkStatus();
}

double RowLayoutScore(int64_t columns, int64_t chunks_per_thread, const Layout& layout) {
  const double target_threads = std::clamp<double>(
      static_cast<double>(columns) / static_cast<double>(chunks_per_thread), 32, 1024);
  const double threads = static_cast<double>(layout.threads_per_row);
  const double width = static_cast<double>(layout.width);
  const double block = threads * static_cast<double>(layout.rows_per_block);
  return 100 * std::log2(width) - 10 * std::abs(std::log2(threads * width / target_threads)) -
         5 * std::abs(std::log2(block / 256));
}

double DefaultPointScore(const ReductionTask& analysis, const SchedulePoint& point) {
  const Layout layout = LayoutOf(analysis, point);
  const double threads = static_cast<double>(layout.threads_per_row);
  const double block = static_cast<double>(layout.BlockThreads());
  // No register cap by default: that is for the search to try.
  double score = 50 * layout.cache_row + Parameter(point, "online_softmax", 0) +
                 Parameter(point, "welford", 0) - (layout.max_registers > 0 ? 1 : 0);
  // Rows that fill the GPU a block a row keep that default; their clusters are the search's.
  if (layout.cluster_blocks > 1 && !SplitRowsByDefault(analysis)) score -= 1000;
  if (TransposePoint(point)) {
    // A warp's lanes on 32 consecutive rows (one coalesced 32-element load), 256 threads, and a
    // tile small enough for several blocks per SM.
    const double bytes =
        static_cast<double>(TransposeTileBytes(analysis, layout.rows_per_block));
    // Two passes over the tile (in shared memory: no second read of DRAM) where the row
    // templates default to one: with a thread's columns one at a time, Welford would divide per
    // element and an online softmax take two exps per element.
    score -= 2 * (Parameter(point, "online_softmax", 0) + Parameter(point, "welford", 0));
    score += -10 * std::abs(std::log2(static_cast<double>(layout.rows_per_block) / 32)) -
             5 * std::abs(std::log2(static_cast<double>(Parameter(point, "threads_per_block", 256)) /
                                    256)) -
             20 * std::max(0.0, std::log2(bytes / kTransposeTileBytesPreferred));
  } else if (ColumnTemplate(analysis)) {
    const double blocks = std::ceil(static_cast<double>(analysis.rows) /
                                    static_cast<double>(layout.rows_per_block));
    score += -5 * std::abs(std::log2(block / 256)) -
             20 * std::max(0.0, std::log2(264 / blocks)) - 2 * std::log2(threads);
  } else if (layout.SharedCache()) {
    // Reading the row once, the persistent cached cluster ran the (4096, 393216) softmax in
    // 3.50 ms on the H200, streaming rows (read twice) in 4.75; with 512 threads per block
    // (1024: 3.76, 256: 3.88), as with few rows ((32, 393216): 45.9 us; 1024 threads: 52.6).
    score += 100 * std::log2(static_cast<double>(layout.width)) -
             5 * std::abs(std::log2(block / 512));
    if (!LongRows(analysis)) {
      // Few rows that one block each could hold: as many blocks per row as give two per SM.
      const double blocks = static_cast<double>(analysis.rows * layout.cluster_blocks);
      score -= 20 * std::max(0.0, std::log2(2 * static_cast<double>(kRowsToFillTheGpu) / blocks));
    }
  } else {
    score += RowLayoutScore(analysis.columns, /*chunks_per_thread=*/4, layout);
    if (LongRows(analysis)) {
      // Long rows too few to give every SM 512 threads are shared by the blocks of a cluster,
      // in larger blocks; otherwise a block a row. Layer norm over (64, 256, 256), 16 rows of
      // 4 M float32, on the H200: 8 blocks of 512 threads a row 0.329 ms, of 1024 0.392, 4 of
      // 1024 0.332; a block a row (ATen's way) 8.3 ms.
      const double threads_launched = static_cast<double>(analysis.rows) *
                                      static_cast<double>(layout.cluster_blocks) * block;
      score -= 20 * std::max(0.0, std::log2(static_cast<double>(kRowsToFillTheGpu) * 512 /
                                            threads_launched)) +
               (layout.cluster_blocks > 1 ? 1 : 0);
    }
  }
  return score;
}

CostHints CostHintsOf(const forge::v1::KernelTask& task, const ReductionTask& analysis,
                      const SchedulePoint& point, const Layout& layout) {
  CostHints hints;
  hints.vector_width = layout.width;
  // A cluster's chunk loops unroll kClusterChunkUnroll deep.
  hints.unrolled_elements =
      layout.width * (layout.cluster_blocks > 1 ? ReductionFamily::kClusterChunkUnroll : 1);
  hints.row_cache = !layout.cache_row            ? RowCache::kNone
                    : layout.cluster_blocks > 1 ? RowCache::kSharedMemory
                                                : RowCache::kRegisters;
  hints.rows_per_block = layout.rows_per_block;
  hints.max_registers = layout.max_registers;
  const TensorSpec* largest = LargestInput(task);  // the row tensor
  if (largest == nullptr) return hints;
  if (TransposePoint(point)) {
    // One element a thread and step, into the shared-memory tile.
    hints.row_cache = RowCache::kSharedMemory;
    hints.bytes_in_flight_per_thread = static_cast<double>(DTypeBytes(largest->dtype()));
    return hints;
  }
  if (ColumnTemplate(analysis) || largest->shape_size() == 0) {
    // One element of the row tensor per thread and step.
    hints.bytes_in_flight_per_thread =
        static_cast<double>(layout.width * DTypeBytes(largest->dtype()));
    return hints;
  }
  // A vector of every row-sized input per step; a row cached in registers loads all of its
  // chunks (counted over the whole row) up front.
  const int row_bytes_per_element = InputBytesPerIndex(task, Elements(*largest));
  const int64_t chunks_per_thread = (analysis.columns + layout.threads_per_row * layout.width - 1) /
                                    (layout.threads_per_row * layout.width);
  hints.bytes_in_flight_per_thread = static_cast<double>(
      layout.width * row_bytes_per_element * (layout.cache_row ? chunks_per_thread : 1));
  if (layout.cache_row) return hints;
  // Without the cache, a second statistics pass and the pass writing row-shaped outputs read the
  // row again.
  hints.row_rereads = (LargestOutputElements(task) == Elements(*largest)) +
                      (Parameter(point, "online_softmax", 1) == 0) +
                      (Parameter(point, "welford", 1) == 0);
  hints.row_bytes = static_cast<double>(analysis.columns) * row_bytes_per_element;
  hints.row_input_bytes = static_cast<double>(Elements(*largest)) * row_bytes_per_element;
  return hints;
}

void DefaultToBestPoint(TemplateSpace& space,
                        absl::FunctionRef<std::optional<double>(const SchedulePoint&)> score) {
  std::optional<SchedulePoint> best;
  double best_score = 0;
  for (const SchedulePoint& point : EnumeratePoints(space)) {
    const std::optional<double> point_score = score(point);
    if (!point_score.has_value()) continue;
    if (!best.has_value() || *point_score > best_score) {
      best = point;
      best_score = *point_score;
    }
  }
  if (!best.has_value()) return;
  for (ScheduleParameter& parameter : space.parameters) {
    parameter.default_value = best->parameters.at(parameter.name);
  }
}

}  // namespace forge::codegen::reduction
