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
// Template "tiled" (NCHW, register-tiled; tiled.cuh): a block computes, for each of
// `planes_per_block` planes, a tile of `threads_y` x `rows_per_thread` output rows by `threads_x`
// x `columns_per_thread` output columns, its input window staged in shared memory in vectors of
// `vector_width` columns; a thread computes `rows_per_thread` x `columns_per_thread` adjacent
// outputs, reading each input row its windows need from shared memory once (inputs reused
// across outputs and taps in registers) and storing `vector_width` columns at a time. For
// kernels of at most kMaxTiledTaps taps a dim.
//
// Template "window_reduce" (a window as a reduction; window_reduce.cuh): `threads_per_window`
// threads reduce one output's window (its elements, `vector_width` columns at a time, then warp
// shuffles and shared memory in a fixed order), `windows_per_block` windows per block: global and
// other large-window pools, which planar computes a thread per window. For windows that share no
// input (stride at least the window) of at least kMinWindowReduceTaps elements.
//
// Template "channels_last_tiled" (channels_last.cuh's order, register-tiled;
// channels_last_tiled.cuh): a block covers `channel_threads` x `vector_width` consecutive channels
// of a spatial tile of `row_threads` output rows by `column_threads` x `columns_per_thread` output
// columns, its weights staged in shared memory tap-major; a thread computes `vector_width`
// channels at `columns_per_thread` adjacent output columns, loading each input vector its windows
// need once per kernel row. For kernels of at most kMaxTiledTaps taps a dim.
//
// planar and channels_last are offered for every task (both are correct for any strides), the
// one that matches the largest input's memory order first, its default the task's; then the tiled
// templates and window_reduce where they apply and some point of theirs is valid (their defaults
// valid points). A depthwise convolution over an NCHW input puts tiled first where it applies and
// has a valid point (the default: it ran the depthwise 7x7 bf16 anchor at 51% of its floor on the
// H200, planar at 8%; pools keep planar, tiled was not measured on them);
// a window of kWindowReduceFirstTaps elements or more over an NCHW input (a global pool) puts
// window_reduce before it.
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
inline constexpr char kTiledTemplate[] = "tiled";
inline constexpr char kChannelsLastTiledTemplate[] = "channels_last_tiled";
inline constexpr char kWindowReduceTemplate[] = "window_reduce";
inline constexpr char kKernelName[] = "forge_stencil";
// Static shared memory a staged input tile may take (the limit without an opt-in).
inline constexpr int64_t kMaxStagedBytes = 48 * 1024;
// Taps whose weights a thread keeps in registers; a larger kernel reads them per tap.
inline constexpr int64_t kMaxRegisterWeights = 64;
// tiled unrolls a thread's window rows and columns fully: kernels up to this many taps a dim.
inline constexpr int64_t kMaxTiledTaps = 16;
// tiled's accumulators per thread (rows_per_thread x columns_per_thread) at most.
inline constexpr int64_t kMaxTiledOutputs = 32;
// channels_last_tiled's input and accumulator registers per thread ((input columns + outputs) x
// vector_width) at most.
inline constexpr int64_t kMaxChannelsLastTileRegisters = 128;
// window_reduce is offered for windows of at least this many elements, and first (the default)
// over an NCHW input from kWindowReduceFirstTaps on.
inline constexpr int64_t kMinWindowReduceTaps = 32;
inline constexpr int64_t kWindowReduceFirstTaps = 64;

enum class Template { kPlanar, kChannelsLast, kTiled, kChannelsLastTiled, kWindowReduce };

struct Layout {
  Template kind = Template::kPlanar;
  int64_t threads_x = 32;        // planar, tiled; channels_last_tiled: channel_threads
  int64_t threads_y = 8;         // planar, tiled; channels_last_tiled: column_threads
  int64_t threads_z = 1;         // channels_last_tiled: row_threads
  bool stage_in_shared = false;  // planar (tiled always stages)
  int64_t width = 1;             // vector_width (planar: 1)
  int64_t threads = 128;         // channels_last: threads_per_block; window_reduce:
                                 // threads_per_window
  int64_t outputs = 1;           // outputs_per_thread (the tiled ones: columns_per_thread)
  int64_t rows = 1;              // tiled: rows_per_thread
  int64_t planes = 1;            // tiled: planes_per_block; window_reduce: windows_per_block

  int64_t BlockThreads() const {
    switch (kind) {
      case Template::kPlanar:
        return threads_x * threads_y;
      case Template::kTiled:
        return threads_x * threads_y * planes;
      case Template::kChannelsLastTiled:
        return threads_x * threads_y * threads_z;
      case Template::kWindowReduce:
        return threads * planes;
      case Template::kChannelsLast:
        break;
    }
    return threads;
  }
};

std::vector<TemplateSpace> SpacesOf(const StencilTask& analysis);
Layout LayoutOf(const SchedulePoint& point);
// Every constraint of a point: InvalidArgument naming the first one `point` violates.
absl::Status ValidatePoint(const StencilTask& analysis, const SchedulePoint& point);
// The same for a point of `space` (one of SpacesOf's, or one being built).
absl::Status ValidateInSpace(const StencilTask& analysis, const TemplateSpace& space,
                             const SchedulePoint& point);
// planar, tiled: the input rows and columns a tile's windows cover (what is staged; tiled stages
// up to vector_width - 1 columns more, StagedBytes).
int64_t InputTileRows(const StencilTask& analysis, const Layout& layout);
int64_t InputTileColumns(const StencilTask& analysis, const Layout& layout);
// tiled: the elements of a staged input row, the window's columns (from up to vector_width - 1
// before it, for aligned vectors) padded so that a warp's first reads of its rows fall into as
// few words of one shared-memory bank as any pitch up to 31 more gives.
int64_t TiledStagedPitch(const StencilTask& analysis, const Layout& layout);
// The shared memory a point stages its input tiles (channels_last_tiled: its weights) in.
int64_t StagedBytes(const StencilTask& analysis, const Layout& layout);
// The dim of (N, C, H, W) along which the element functions' vector lanes run: C for
// channels_last and channels_last_tiled, W for tiled and window_reduce (planar has one lane).
int LaneAxis(const Layout& layout);
// Whether `spec` (an input or output of shape (N, C, *, *)) is read or written a vector of
// `width` elements along dim `axis` at a time: unit stride along it, every other stride and the
// storage offset multiples of `width`, at most 16 bytes.
bool VectorAlong(const forge::v1::TensorSpec& spec, int axis, int64_t width);
// The launch of a valid point.
LaunchDims LaunchOf(const StencilTask& analysis, const Layout& layout);
// Its cost hints: vector width, the elements a thread loads before it uses them, the bytes it
// keeps in flight.
CostHints CostHintsOf(const forge::v1::KernelTask& task, const StencilTask& analysis,
                      const Layout& layout);

}  // namespace forge::codegen::stencil

#endif  // FORGE_COMPILER_CODEGEN_STENCIL_LAYOUT_H_
