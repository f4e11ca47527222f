// How a row_reduce, col_reduce or transpose_reduce schedule point maps a reduction task's rows
// onto threads and blocks, the constraints a point must meet (Validate), and the budgets behind
// them. A transpose_reduce point's Layout is col_reduce's over a tile: `rows_per_block` is its
// tile_rows, `threads_per_row` threads_per_block / tile_rows.
//
// Both templates are described in one Layout: a row is reduced by `threads_per_row` threads
// (col_reduce: reduce_threads), each taking `width` consecutive elements per step (col_reduce: 1),
// `rows_per_block` rows per block. row_reduce's thread block clusters split a row into
// `cluster_blocks` segments of whole vectors, one per block; with cache_row a cluster keeps each
// block's segment in shared memory (SharedCacheOf), otherwise cache_row keeps a thread's share of
// the row in registers. The cross_entropy template (cross_entropy.h) shares the row constraints
// (ValidateRowLayout) and the default-point score (RowLayoutScore).
#ifndef FORGE_COMPILER_CODEGEN_REDUCTION_LAYOUT_H_
#define FORGE_COMPILER_CODEGEN_REDUCTION_LAYOUT_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/generated_kernel.h"
#include "compiler/codegen/reduction/analysis.h"

namespace forge::codegen::reduction {

// Register budget of cache_row: elements of the row-sized inputs one thread keeps.
inline constexpr int64_t kMaxCachedElementsPerThread = 64;
// Shared-memory budget of cache_row with cluster_blocks > 1 (the row's part of one block): below
// the 227 KiB a block may opt into on sm_90, leaving room for the static scratch.
inline constexpr int64_t kMaxClusterCacheBytes = 200 * 1024;
// Rows of more elements (times row-sized inputs) than one block can keep in registers get the
// cluster_blocks parameter.
inline constexpr int64_t kClusterRowElements = kMaxCachedElementsPerThread * 1024;
// An H100-class GPU's SMs: fewer rows leave SMs idle with a block per row.
inline constexpr int64_t kRowsToFillTheGpu = 132;
// Rows of at least this many elements (times row-sized inputs), at most kFewRowsClusterRows of
// them, also get cluster_blocks. Fewer than two per SM (group norm's (sample, group) rows: 64 of
// 40960 for GroupNorm(32, 320) on (2, 320, 64, 64)): a block a row would leave SMs idle, and the
// default splits them. Up to four per SM (512 rows of 40960 for (16, 320, 64, 64)): a block a
// row of 1024 threads is one block per SM in 3.9 waves, its loads, statistics and stores not
// overlapped; a cluster of 2 or 4 smaller blocks, each with its part of the row in shared memory
// (several blocks per SM), is offered beside it, and the search decides (the default stays a
// block a row).
inline constexpr int64_t kFewRowsClusterElements = 16 * 1024;
inline constexpr int64_t kFewRowsClusterRows = 4 * 132;
// A cached cluster's first pass waits for each chunk's copies alone (cp.async.wait_group takes
// an immediate: the loop unrolls fully) up to this many chunks per thread; past it, for all.
inline constexpr int64_t kMaxPipelinedChunks = 32;
// Threads and shared memory of one SM of sm_90, which bound the blocks resident per SM.
inline constexpr int64_t kThreadsPerSm = 2048;
inline constexpr int64_t kSharedBytesPerSm = 228 * 1024;
// 32-bit registers of one SM (sm_80 to sm_100), which max_registers divides among blocks.
inline constexpr int64_t kRegistersPerSm = 64 * 1024;
// Registers a thread needs besides the row it caches: indices, accumulators, the statistics.
inline constexpr int64_t kRegistersBesidesTheCache = 16;

// point.parameters[name], or `fallback` when the template has no such parameter.
int64_t Parameter(const SchedulePoint& point, const std::string& name, int64_t fallback);

// col_reduce when the reduced dimension has inner elements after it.
bool ColumnTemplate(const ReductionTask& analysis);
// Rows too long for one block to keep in registers: row_reduce offers cluster_blocks.
bool LongRows(const ReductionTask& analysis);
// Long rows (kFewRowsClusterElements), at most kFewRowsClusterRows: row_reduce offers
// cluster_blocks too.
bool FewLongRows(const ReductionTask& analysis);
// Rows the default point splits over a cluster's blocks: LongRows, or FewLongRows too few to give
// each SM two blocks (then until the blocks fill the GPU).
bool SplitRowsByDefault(const ReductionTask& analysis);
// The one template's space for the task (row_reduce or col_reduce); defaults as declared, which
// ReductionFamily::ScheduleSpace replaces with its default point.
TemplateSpace SpaceOf(const ReductionTask& analysis);

// transpose_reduce (TransposeSpaceOf): a row_reduce task whose rows are read across memory (the
// reduced dim strided, the rows' innermost dim of unit stride: a layer norm over the channels of a
// permuted NCHW tensor, ConvNeXt's) and whose transposing tile fits shared memory.
// Whether some row-shaped value is read from a group input (itself, or a permute / transpose of
// it) with a stride other than 1 along the reduced dim and a unit stride along the innermost
// other dim larger than 1: consecutive rows are then consecutive in memory.
bool TransposedRows(const ReductionTask& analysis);
// The values transpose_reduce keeps in its shared-memory tile: the row-shaped values read from a
// group input (itself, or a permute / transpose of it) with a stride other than 1 along the
// reduced dim, in the group's order. Every other value the kernel reads straight from memory.
std::vector<std::string> TransposeTileValues(const ReductionTask& analysis);
// A tile row's stride in the tile (elements of `element_bytes`): at least the row length, and an
// odd number of 4-byte words where possible, so that a warp's lanes on consecutive rows hit
// distinct banks.
int64_t TransposeTileStride(int64_t columns, int64_t element_bytes);
// The bytes of one tile value's element (its register type's).
int64_t TransposeTileElementBytes(const ReductionTask& analysis, const std::string& value);
// transpose_reduce's dynamic shared memory: every tile value's rows_per_block x stride elements.
int64_t TransposeTileBytes(const ReductionTask& analysis, int64_t tile_rows);
TemplateSpace TransposeSpaceOf(const ReductionTask& analysis);
// transpose_reduce's tile: at most this many bytes of shared memory a block.
inline constexpr int64_t kMaxTransposeTileBytes = 160 * 1024;
// The default prefers tiles that leave several blocks resident per SM.
inline constexpr int64_t kTransposeTileBytesPreferred = 48 * 1024;

// How a point maps rows and their elements onto threads, in both templates' terms: a row is
// reduced by threads_per_row threads (col_reduce: reduce_threads), each taking vector_width
// consecutive elements per step (col_reduce: 1).
struct Layout {
  int64_t threads_per_row = 32;
  int64_t rows_per_block = 1;
  int64_t width = 1;
  bool cache_row = false;
  // row_reduce: blocks of one cluster that share a row, each taking `segment` consecutive columns
  // (the last one what is left); cache_row then keeps the row in shared memory.
  int64_t cluster_blocks = 1;
  int64_t segment = 0;
  // row_reduce: a cap on registers per thread (0: the compiler's choice), for more resident warps.
  int64_t max_registers = 0;
  bool SharedCache() const { return cache_row && cluster_blocks > 1; }
  int64_t BlockThreads() const { return threads_per_row * rows_per_block; }
  // The blocks per SM that __launch_bounds__ asks for to keep each thread under max_registers.
  int64_t MinBlocksPerSm() const {
    return max_registers == 0 ? 0 : kRegistersPerSm / (max_registers * BlockThreads());
  }
  int64_t ChunksPerThread() const {
    return (segment + threads_per_row * width - 1) / (threads_per_row * width);
  }
};

Layout LayoutOf(const ReductionTask& analysis, const SchedulePoint& point);

// The shared-memory row cache of a cluster point: each row-sized input's part of the row as
// stored in memory (copied there by cp.async), in input order.
struct SharedCache {
  std::map<int, int64_t> offsets;  // bytes, by input position
  int64_t bytes = 0;
};
SharedCache SharedCacheOf(const ReductionTask& analysis, const Layout& layout);

// Whether `spec` (row-shaped, or broadcast against the row from fewer or size-1 dims, but not
// along the reduced dim) has unit stride along the row and every chunk of `width` elements
// starts at a multiple of `width`.
bool AlignedAlongTheRow(const ReductionTask& analysis, const forge::v1::TensorSpec& spec,
                        int64_t width);

// Clusters of a cached-cluster launch: each takes rows until none is left, so the launch needs
// only as many as can be resident at once. Twice the estimate for an H100-class GPU covers larger
// GPUs; a cluster beyond those resident starts when the rows are gone and ends at once.
int64_t PersistentClusters(const ReductionTask& analysis, const Layout& layout);

// The row_reduce constraints, shared by the cross_entropy template (whose rows are the logits').
absl::Status ValidateRowLayout(int64_t rows, int64_t columns, int64_t widest_access,
                               const Layout& layout);
// Every constraint of a row_reduce, col_reduce or transpose_reduce point: InvalidArgument naming
// the first one `point` violates.
absl::Status ValidatePoint(const ReductionTask& analysis, const SchedulePoint& point);

// How close a row layout is to "widest vectors, about `chunks_per_thread` chunks per thread, 256
// threads per block": the default point of row_reduce (4 chunks) and cross_entropy maximizes it.
double RowLayoutScore(int64_t columns, int64_t chunks_per_thread, const Layout& layout);

// The preference of a valid point as the task's default (transpose_reduce: 32 tile rows, 256
// threads, a tile of at most kTransposeTileBytesPreferred, two passes); row_reduce,
// the point closest to "widest vectors, row in registers, about four chunks per thread, 256
// threads per block" (a row too long for that, or few long rows: in a cluster's shared memory,
// 512 threads per block; few rows split over enough blocks for two per SM); col_reduce, row in registers, 256 threads per block, and the fewest reduce_threads that
// still give about two blocks per SM of an H100-class GPU (264 blocks). No register cap: that is
// for the search to try.
double DefaultPointScore(const ReductionTask& analysis, const SchedulePoint& point);

// The cost hints of a valid point of `analysis` (an analysis of `task`) with layout `layout`: its
// vector width and unrolled loads, where its row is cached (transpose_reduce: its tile, in shared
// memory), the bytes a thread keeps in flight and, for an uncached row_reduce row, the passes
// that re-read it.
CostHints CostHintsOf(const forge::v1::KernelTask& task, const ReductionTask& analysis,
                      const SchedulePoint& point, const Layout& layout);

// Sets every parameter's default_value to the point of `space` that `score` rates highest (the
// first of equals, in EnumeratePoints order); `score` gives nullopt for an invalid point. Leaves
// the declared defaults when no point is valid.
void DefaultToBestPoint(TemplateSpace& space,
                        absl::FunctionRef<std::optional<double>(const SchedulePoint&)> score);

}  // namespace forge::codegen::reduction

#endif  // FORGE_COMPILER_CODEGEN_REDUCTION_LAYOUT_H_
