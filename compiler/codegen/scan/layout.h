// How a scan schedule point maps a scan task onto threads and blocks, the constraints a point
// must meet (ValidatePoint), its default, its launch and its cost hints.
//
// row_scan (the scanned dim is the last): a row is scanned by `threads_per_row` threads (one warp,
// or 2-32 warps combining through shared memory), `rows_per_block` rows per block, each thread
// taking `elements_per_thread` consecutive vectors of `vector_width` elements per tile. col_scan
// (inner elements after the scanned dim): one thread per row, `threads_per_block` threads per
// block, `unroll` elements loaded before they are combined. chained_scan (a scanned last dim of
// kChainedMinLength elements or more): the tiles of a row go to `threads_per_block`-thread blocks,
// one tile each (threads x elements_per_thread x vector_width elements), and the prefix passes
// from group to group of 32 x `tiles_per_lane` tiles (chained_scan.cuh); offered first when the
// rows are too few to fill the GPU.
#ifndef FORGE_COMPILER_CODEGEN_SCAN_LAYOUT_H_
#define FORGE_COMPILER_CODEGEN_SCAN_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/generated_kernel.h"
#include "compiler/codegen/scan/analysis.h"

namespace forge::codegen::scan {

inline constexpr char kRowTemplate[] = "row_scan";
inline constexpr char kColumnTemplate[] = "col_scan";
inline constexpr char kChainedTemplate[] = "chained_scan";
inline constexpr char kKernelName[] = "forge_scan";
// Elements a thread of row_scan keeps in registers per tile (vector_width x elements_per_thread).
inline constexpr int64_t kMaxItemsPerThread = 32;
// Rows at least this long are offered chained_scan too.
inline constexpr int64_t kChainedMinLength = 16384;
// Fewer rows than this leave SMs idle with a block per row (twice an H100-class GPU's SMs):
// chained_scan's space comes first, its default the task's.
inline constexpr int64_t kRowsToFillTheGpu = 264;
// chained_scan's groups: a warp's lanes, tiles_per_lane tiles each.
inline constexpr int64_t kLanesPerGroup = 32;

enum class Template { kRow, kColumn, kChained };

struct Layout {
  Template kind = Template::kRow;
  // row_scan and chained_scan (threads_per_block: threads_per_row, one row per block)
  int64_t threads_per_row = 32;
  int64_t rows_per_block = 1;
  int64_t width = 1;   // vector_width; 1 for col_scan
  int64_t chunks = 1;  // elements_per_thread: vectors per thread and tile
  int64_t tiles_per_lane = 1;  // chained_scan
  // col_scan
  int64_t threads = 128;
  int64_t unroll = 1;

  bool column() const { return kind == Template::kColumn; }
  int64_t BlockThreads() const { return column() ? threads : threads_per_row * rows_per_block; }
  int64_t Tile() const { return threads_per_row * width * chunks; }
};

// col_scan when the scanned dim has inner elements after it; row_scan otherwise, and chained_scan
// too for rows of kChainedMinLength or more (first when there are fewer than kRowsToFillTheGpu).
// Each space's defaults are its default point for the task.
std::vector<TemplateSpace> SpacesOf(const ScanTask& analysis);
Layout LayoutOf(const SchedulePoint& point);
// Every constraint of a point: InvalidArgument naming the first one `point` violates.
absl::Status ValidatePoint(const ScanTask& analysis, const SchedulePoint& point);
// Whether `spec` (an input or output of the scanned shape) is read or written a vector of
// `width` elements at a time along the scanned dim: unit stride there, every other stride and
// the storage offset multiples of `width`, at most 16 bytes.
bool VectorAlongTheRow(const ScanTask& analysis, const forge::v1::TensorSpec& spec, int64_t width);
// chained_scan: the tiles of a row, and their groups of kLanesPerGroup x tiles_per_lane.
int64_t TilesPerRow(const ScanTask& analysis, const Layout& layout);
int64_t GroupsPerRow(const ScanTask& analysis, const Layout& layout);
// The launch of a valid point.
LaunchDims LaunchOf(const ScanTask& analysis, const Layout& layout);
// Its cost hints: one read of the inputs and one write of the outputs, vector width, the elements
// a thread loads before it combines them and the bytes it keeps in flight.
CostHints CostHintsOf(const forge::v1::KernelTask& task, const ScanTask& analysis,
                      const Layout& layout);

}  // namespace forge::codegen::scan

#endif  // FORGE_COMPILER_CODEGEN_SCAN_LAYOUT_H_
