// How a stencil schedule point maps a stencil task onto threads and blocks, the constraints a
// point must meet (ValidatePoint), its default, its launch and its cost hints.
//
// Template "planar" (NCHW-friendly: consecutive threads on consecutive output columns of one
// (n, c) plane): a block computes a tile of `threads_y` output rows x `threads_x` x
// `outputs_per_thread` output columns of one plane, a thread the outputs threads_x apart in its
// row (coalesced stores). With `stage_in_shared` the block first computes the tile's input
// window (the fused prologue once per input element, the padding as the op's identity) into
// shared memory and the taps read it there; without, every tap reads its input through L1.
//
// Template "channels_last" (consecutive threads on consecutive channel vectors: the coalesced
// order when C is the innermost dim in memory): a thread computes `vector_width` consecutive
// channels at `outputs_per_thread` consecutive output columns of one output row, its inputs read
// through L1 as vectors where the tensor allows; `threads_per_block`.
//
// Both are offered for every task (both are correct for any strides); the one that matches the
// largest input's memory order comes first, its default the task's.
#ifndef FORGE_COMPILER_CODEGEN_STENCIL_LAYOUT_H_
#define FORGE_COMPILER_CODEGEN_STENCIL_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/generated_kernel.h"
#include "compiler/codegen/stencil/analysis.h"

namespace forge::codegen::stencil {

inline constexpr char kPlanarTemplate[] = "planar";
inline constexpr char kChannelsLastTemplate[] = "channels_last";
inline constexpr char kKernelName[] = "forge_stencil";
// Static shared memory a staged input tile may take (the limit without an opt-in).
inline constexpr int64_t kMaxStagedBytes = 48 * 1024;
// Taps whose weights a thread keeps in registers; a larger kernel reads them per tap.
inline constexpr int64_t kMaxRegisterWeights = 64;

enum class Template { kPlanar, kChannelsLast };

struct Layout {
  Template kind = Template::kPlanar;
  int64_t threads_x = 32;        // planar
  int64_t threads_y = 8;         // planar
  bool stage_in_shared = false;  // planar
  int64_t width = 1;             // channels_last: vector_width
  int64_t threads = 128;         // channels_last: threads_per_block
  int64_t outputs = 1;           // outputs_per_thread

  int64_t BlockThreads() const {
    return kind == Template::kPlanar ? threads_x * threads_y : threads;
  }
};

std::vector<TemplateSpace> SpacesOf(const StencilTask& analysis);
Layout LayoutOf(const SchedulePoint& point);
// Every constraint of a point: InvalidArgument naming the first one `point` violates.
absl::Status ValidatePoint(const StencilTask& analysis, const SchedulePoint& point);
// planar: the input rows and columns a tile's windows cover (what stage_in_shared stages).
int64_t InputTileRows(const StencilTask& analysis, const Layout& layout);
int64_t InputTileColumns(const StencilTask& analysis, const Layout& layout);
// Whether `spec` (an input or output of shape (N, C, *, *)) is read or written a vector of
// `width` channels at a time: unit stride along C, every other stride and the storage offset
// multiples of `width`, at most 16 bytes.
bool VectorAlongChannels(const forge::v1::TensorSpec& spec, int64_t width);
// The launch of a valid point.
LaunchDims LaunchOf(const StencilTask& analysis, const Layout& layout);
// Its cost hints: vector width, the elements a thread loads before it uses them, the bytes it
// keeps in flight.
CostHints CostHintsOf(const forge::v1::KernelTask& task, const StencilTask& analysis,
                      const Layout& layout);

}  // namespace forge::codegen::stencil

#endif  // FORGE_COMPILER_CODEGEN_STENCIL_LAYOUT_H_
