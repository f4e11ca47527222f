#include "compiler/codegen/stencil/layout.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/codegen/cost_hints.h"

namespace forge::codegen::stencil {
namespace {


int64_t Blocks(int64_t count, int64_t per_block) { return (count + per_block - 1) / per_block; }

int64_t AccBytes(const StencilTask& analysis) { return analysis.acc_type == "double" ? 8 : 4; }

// The smallest power of two >= `value`, at least 1 and at most `cap`.
int64_t PowerOfTwoCover(int64_t value, int64_t cap) {
  int64_t power = 1;
  while (power < value && power < cap) power *= 2;
  return power;
}

// The widest vector of at most 16 bytes (of the task's widest element) that `accepts`.
template <typename Accepts>
int64_t WidestVector(const StencilTask& analysis, Accepts accepts) {
  int64_t width = 8;
  while (width > 1 && (width * analysis.widest_access > 16 || !accepts(width))) width /= 2;
  return width;
}

// channels_last_tiled's input and accumulator registers per thread.
int64_t ChannelsLastTileRegisters(const StencilTask& analysis, int64_t columns, int64_t width) {
  const int64_t input_columns =
      (columns - 1) * analysis.stride[1] + (analysis.kernel[1] - 1) * analysis.dilation[1] + 1;
  return (input_columns + columns) * width;
}

// Keeps `space`'s default when it is valid, else makes the first valid point (in EnumeratePoints
// order) its default; false when no point is valid (the template cannot run the task).
bool SettleDefault(const StencilTask& analysis, TemplateSpace& space) {
  if (ValidateInSpace(analysis, space, DefaultPoint(space)).ok()) return true;
  for (const SchedulePoint& point : EnumeratePoints(space)) {
    if (!ValidateInSpace(analysis, space, point).ok()) continue;
    for (ScheduleParameter& parameter : space.parameters) {
      parameter.default_value = point.parameters.at(parameter.name);
    }
    return true;
  }
  return false;
}

bool TiledApplies(const StencilTask& analysis) {
  return analysis.kernel[0] <= kMaxTiledTaps && analysis.kernel[1] <= kMaxTiledTaps;
}

int64_t WindowTaps(const StencilTask& analysis) { return analysis.kernel[0] * analysis.kernel[1]; }

// Windows that share no input (global and adaptive pools) of at least kMinWindowReduceTaps.
bool WindowReduceApplies(const StencilTask& analysis) {
  for (int d = 0; d < 2; ++d) {
    if (analysis.stride[d] < (analysis.kernel[d] - 1) * analysis.dilation[d] + 1) return false;
  }
  return WindowTaps(analysis) >= kMinWindowReduceTaps;
}

// Why window_reduce cannot load `width` columns of a window at a time, empty when it can: every
// vector must start at a multiple of `width` in the input and lie inside a window row.
std::string WindowVectorObstacle(const StencilTask& analysis, int64_t width) {
  if (width == 1) return "";
  if (analysis.dilation[1] != 1) return "a dilated window";
  if (analysis.kernel[1] % width != 0) return absl::StrCat("a window ", analysis.kernel[1], " wide");
  if (analysis.w % width != 0) return absl::StrCat("an input ", analysis.w, " wide");
  if (analysis.ow > 1 && analysis.stride[1] % width != 0) {
    return absl::StrCat("a stride of ", analysis.stride[1]);
  }
  if (analysis.padding[1] % width != 0) return absl::StrCat("a padding of ", analysis.padding[1]);
  return "";
}

// tiled's default: 8 (or fewer) columns and 4 rows per thread, a block's threads across the
// output's width and about 128 threads, planes added up to a warp; vectors as wide as divide the
// columns.
TemplateSpace TiledSpace(const StencilTask& analysis) {
  const int64_t columns = analysis.ow >= 32 ? 8 : analysis.ow >= 8 ? 4 : 1;
  const int64_t rows = analysis.oh >= 16 ? 4 : analysis.oh >= 4 ? 2 : 1;
  const int64_t threads_x = PowerOfTwoCover((analysis.ow + columns - 1) / columns, 32);
  const int64_t threads_y = PowerOfTwoCover((analysis.oh + rows - 1) / rows, 128 / threads_x);
  const int64_t planes = std::min<int64_t>(8, std::max<int64_t>(1, 32 / (threads_x * threads_y)));
  const int64_t width = WidestVector(analysis, [&](int64_t v) {
    return columns % v == 0 && analysis.w % v == 0 && analysis.ow % v == 0;
  });
  return {kTiledTemplate,
          {{"threads_x", {1, 2, 4, 8, 16, 32}, threads_x},
           {"threads_y", {1, 2, 4, 8, 16, 32}, threads_y},
           {"columns_per_thread", {1, 2, 4, 8}, columns},
           {"rows_per_thread", {1, 2, 4}, rows},
           {"planes_per_block", {1, 2, 4, 8}, planes},
           {"vector_width", {1, 2, 4, 8}, width}}};
}

// channels_last_tiled's default: channel vectors as wide as divide C, 4 (or fewer) columns a
// thread, a chunk of up to 16 vectors, column and row threads up to about 128 threads a block.
TemplateSpace ChannelsLastTiledSpace(const StencilTask& analysis) {
  const int64_t width = WidestVector(analysis, [&](int64_t v) { return analysis.c % v == 0; });
  int64_t columns = analysis.ow >= 8 ? 4 : 1;
  while (columns > 1 && ChannelsLastTileRegisters(analysis, columns, width) >
                            kMaxChannelsLastTileRegisters) {
    columns /= 2;
  }
  int64_t channel_threads = PowerOfTwoCover(analysis.c / width, 16);
  Layout layout;
  layout.kind = Template::kChannelsLastTiled;
  layout.width = width;
  layout.threads_x = channel_threads;
  while (layout.threads_x > 4 && StagedBytes(analysis, layout) > kMaxStagedBytes) {
    layout.threads_x /= 2;
  }
  const int64_t column_threads =
      PowerOfTwoCover((analysis.ow + columns - 1) / columns, std::max<int64_t>(1, 32 / layout.threads_x));
  const int64_t row_threads = PowerOfTwoCover(
      analysis.oh, std::max<int64_t>(1, 128 / (layout.threads_x * column_threads)));
  return {kChannelsLastTiledTemplate,
          {{"channel_threads", {4, 8, 16, 32}, std::max<int64_t>(4, layout.threads_x)},
           {"column_threads", {1, 2, 4, 8}, std::min<int64_t>(8, column_threads)},
           {"row_threads", {1, 2, 4, 8}, std::min<int64_t>(8, row_threads)},
           {"columns_per_thread", {1, 2, 4, 8}, columns},
           {"vector_width", {1, 2, 4, 8}, width}}};
}

// window_reduce's default: the widest vector the window takes, about four vectors a thread
// (32 to 512 threads a window), windows added up to 128 threads a block.
TemplateSpace WindowReduceSpace(const StencilTask& analysis) {
  const int64_t width =
      WidestVector(analysis, [&](int64_t v) { return WindowVectorObstacle(analysis, v).empty(); });
  const int64_t vectors = WindowTaps(analysis) / width;
  int64_t threads = 32;
  while (threads < 512 && threads * 4 < vectors) threads *= 2;
  const int64_t outputs = analysis.n * analysis.c * analysis.oh * analysis.ow;
  int64_t windows = 1;
  while (windows < 8 && threads * windows < 128 && windows * 2 <= outputs) windows *= 2;
  return {kWindowReduceTemplate,
          {{"threads_per_window", {32, 64, 128, 256, 512}, threads},
           {"windows_per_block", {1, 2, 4, 8}, windows},
           {"vector_width", {1, 2, 4, 8}, width}}};
}

// planar's default: a warp (or the narrowest row of threads that covers the output) across a
// row, 256 threads per block (fewer rows for a short output, down to a warp), the input staged
// when windows overlap and the tile fits.
TemplateSpace PlanarSpace(const StencilTask& analysis) {
  int64_t threads_x = 8;
  while (threads_x < 32 && threads_x < analysis.ow) threads_x *= 2;
  int64_t threads_y = std::min<int64_t>(16, 256 / threads_x);
  while (threads_y / 2 >= analysis.oh && threads_x * threads_y / 2 >= 32) threads_y /= 2;
  const bool overlap = analysis.kernel[0] * analysis.dilation[0] > analysis.stride[0] ||
                       analysis.kernel[1] * analysis.dilation[1] > analysis.stride[1];
  Layout layout;
  layout.threads_x = threads_x;
  layout.threads_y = threads_y;
  layout.stage_in_shared = true;
  const bool fits = StagedBytes(analysis, layout) <= kMaxStagedBytes;
  return {kPlanarTemplate,
          {{"threads_x", {8, 16, 32}, threads_x},
           {"threads_y", {1, 2, 4, 8, 16}, threads_y},
           {"outputs_per_thread", {1, 2, 4}, 1},
           {"stage_in_shared", {0, 1}, overlap && fits ? 1 : 0}}};
}

// channels_last's default: the widest vector of at most 16 bytes that divides C.
TemplateSpace ChannelsLastSpace(const StencilTask& analysis) {
  int64_t width = 8;
  while (width > 1 && (analysis.c % width != 0 || width * analysis.widest_access > 16)) width /= 2;
  return {kChannelsLastTemplate,
          {{"vector_width", {1, 2, 4, 8}, width},
           {"outputs_per_thread", {1, 2, 4}, 1},
           {"threads_per_block", {64, 128, 256, 512}, 128}}};
}

int64_t LaunchBlocks(const StencilTask& analysis, const Layout& layout) {
  switch (layout.kind) {
    case Template::kPlanar:
      return analysis.n * analysis.c * Blocks(analysis.oh, layout.threads_y) *
             Blocks(analysis.ow, layout.threads_x * layout.outputs);
    case Template::kTiled:
      return Blocks(analysis.n * analysis.c, layout.planes) *
             Blocks(analysis.oh, layout.threads_y * layout.rows) *
             Blocks(analysis.ow, layout.threads_x * layout.outputs);
    case Template::kWindowReduce:
      return Blocks(analysis.n * analysis.c * analysis.oh * analysis.ow, layout.planes);
    case Template::kChannelsLastTiled:
      return analysis.n * Blocks(analysis.c, layout.threads_x * layout.width) *
             Blocks(analysis.oh, layout.threads_z) *
             Blocks(analysis.ow, layout.threads_y * layout.outputs);
    case Template::kChannelsLast:
      break;
  }
  return Blocks(
      analysis.n * analysis.oh * Blocks(analysis.ow, layout.outputs) * (analysis.c / layout.width),
      layout.threads);
}

// A point's staged tiles or weights (`what`) within kMaxStagedBytes of shared memory.
absl::Status ValidateStagedBytes(const StencilTask& analysis, const Layout& layout,
                                 absl::string_view what) {
  if (const int64_t bytes = StagedBytes(analysis, layout); bytes > kMaxStagedBytes) {
    return absl::InvalidArgumentError(absl::StrCat("staging the ", what, " takes ", bytes,
                                                   " bytes of shared memory, more than ",
                                                   kMaxStagedBytes));
  }
  return absl::OkStatus();
}

// A vector of the task's widest element within a 16-byte access.
absl::Status ValidateVectorBytes(const StencilTask& analysis, const Layout& layout) {
  if (layout.width * analysis.widest_access > 16) {
    return absl::InvalidArgumentError(absl::StrCat("vector_width ", layout.width, " of ",
                                                   analysis.widest_access,
                                                   "-byte elements exceeds a 16-byte access"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePlanar(const StencilTask& analysis, const Layout& layout) {
  if (layout.BlockThreads() < 32) {
    return absl::InvalidArgumentError(absl::StrCat("threads_x ", layout.threads_x, " x threads_y ",
                                                   layout.threads_y,
                                                   " is less than a warp per block"));
  }
  if (layout.outputs > 1 && (layout.outputs - 1) * layout.threads_x >= analysis.ow) {
    return absl::InvalidArgumentError(absl::StrCat("outputs_per_thread ", layout.outputs,
                                                   " leaves a thread's last outputs past the ",
                                                   analysis.ow, " output columns of every tile"));
  }
  if (layout.threads_y / 2 >= analysis.oh && layout.BlockThreads() / 2 >= 32) {
    return absl::InvalidArgumentError(absl::StrCat("threads_y ", layout.threads_y,
                                                   " leaves most rows of the tile past the ",
                                                   analysis.oh, " output rows"));
  }
  if (absl::Status status = ValidateStagedBytes(analysis, layout, "input tile"); !status.ok()) {
    return status;
  }
  return absl::OkStatus();
}

absl::Status ValidateChannelsLast(const StencilTask& analysis, const Layout& layout) {
  if (analysis.c % layout.width != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vector_width ", layout.width, " does not divide the ", analysis.c, " channels"));
  }
  if (absl::Status status = ValidateVectorBytes(analysis, layout); !status.ok()) return status;
  if (layout.outputs > 1 && layout.outputs / 2 >= analysis.ow) {
    return absl::InvalidArgumentError(absl::StrCat("outputs_per_thread ", layout.outputs,
                                                   " exceeds twice the ", analysis.ow,
                                                   " output columns"));
  }
  return absl::OkStatus();
}

absl::Status ValidateBlockThreads(const Layout& layout) {
  if (layout.BlockThreads() < 32 || layout.BlockThreads() > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a block of ", layout.BlockThreads(), " threads: needs a warp to 1024 threads"));
  }
  return absl::OkStatus();
}

absl::Status ValidateTiled(const StencilTask& analysis, const Layout& layout) {
  if (absl::Status status = ValidateBlockThreads(layout); !status.ok()) return status;
  if (layout.rows * layout.outputs > kMaxTiledOutputs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rows_per_thread ", layout.rows, " x columns_per_thread ", layout.outputs,
        " accumulators per thread exceed ", kMaxTiledOutputs));
  }
  if (layout.width > 1) {
    if (absl::Status status = ValidateVectorBytes(analysis, layout); !status.ok()) return status;
    if (layout.outputs % layout.width != 0 || analysis.w % layout.width != 0 ||
        analysis.ow % layout.width != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "vector_width ", layout.width, " must divide columns_per_thread ", layout.outputs,
          ", the input's ", analysis.w, " columns and the output's ", analysis.ow));
    }
  }
  if (layout.threads_x > 1 && layout.threads_x / 2 * layout.outputs >= analysis.ow) {
    return absl::InvalidArgumentError(absl::StrCat(
        "threads_x ", layout.threads_x, " x columns_per_thread ", layout.outputs,
        " leaves half the threads of every tile past the ", analysis.ow, " output columns"));
  }
  if (layout.threads_y > 1 && layout.threads_y / 2 * layout.rows >= analysis.oh) {
    return absl::InvalidArgumentError(absl::StrCat(
        "threads_y ", layout.threads_y, " x rows_per_thread ", layout.rows,
        " leaves half the threads of every tile past the ", analysis.oh, " output rows"));
  }
  if (layout.planes > 1 && layout.planes / 2 >= analysis.n * analysis.c) {
    return absl::InvalidArgumentError(absl::StrCat("planes_per_block ", layout.planes,
                                                   " exceeds twice the ",
                                                   analysis.n * analysis.c, " planes"));
  }
  if (absl::Status status = ValidateStagedBytes(analysis, layout, "input tiles"); !status.ok()) {
    return status;
  }
  return absl::OkStatus();
}

absl::Status ValidateChannelsLastTiled(const StencilTask& analysis, const Layout& layout) {
  if (absl::Status status = ValidateBlockThreads(layout); !status.ok()) return status;
  if (absl::Status status = ValidateChannelsLast(analysis, layout); !status.ok()) return status;
  if (const int64_t registers = ChannelsLastTileRegisters(analysis, layout.outputs, layout.width);
      registers > kMaxChannelsLastTileRegisters) {
    return absl::InvalidArgumentError(absl::StrCat(
        "columns_per_thread ", layout.outputs, " x vector_width ", layout.width, " keeps ",
        registers, " inputs and accumulators per thread; more than ",
        kMaxChannelsLastTileRegisters));
  }
  const int64_t vectors = analysis.c / layout.width;
  if (layout.threads_x > 4 && layout.threads_x / 2 >= vectors) {
    return absl::InvalidArgumentError(absl::StrCat("channel_threads ", layout.threads_x,
                                                   " leaves half of them idle for ", vectors,
                                                   " channel vectors"));
  }
  if (layout.threads_y > 1 && layout.threads_y / 2 * layout.outputs >= analysis.ow) {
    return absl::InvalidArgumentError(absl::StrCat(
        "column_threads ", layout.threads_y, " x columns_per_thread ", layout.outputs,
        " leaves half of them past the ", analysis.ow, " output columns"));
  }
  if (layout.threads_z > 1 && layout.threads_z / 2 >= analysis.oh) {
    return absl::InvalidArgumentError(absl::StrCat("row_threads ", layout.threads_z,
                                                   " leaves half of them past the ", analysis.oh,
                                                   " output rows"));
  }
  if (absl::Status status = ValidateStagedBytes(analysis, layout, "weights"); !status.ok()) {
    return status;
  }
  return absl::OkStatus();
}

absl::Status ValidateWindowReduce(const StencilTask& analysis, const Layout& layout) {
  if (absl::Status status = ValidateBlockThreads(layout); !status.ok()) return status;
  if (absl::Status status = ValidateVectorBytes(analysis, layout); !status.ok()) return status;
  if (const std::string obstacle = WindowVectorObstacle(analysis, layout.width);
      !obstacle.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("vector_width ", layout.width,
                                                   " cannot load the windows' columns: ",
                                                   obstacle));
  }
  const int64_t vectors = WindowTaps(analysis) / layout.width;
  if (layout.threads > 32 && layout.threads / 2 >= vectors) {
    return absl::InvalidArgumentError(absl::StrCat("threads_per_window ", layout.threads,
                                                   " leaves half of them idle for ", vectors,
                                                   " vectors of a window"));
  }
  const int64_t outputs = analysis.n * analysis.c * analysis.oh * analysis.ow;
  if (layout.planes > 1 && layout.planes / 2 >= outputs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "windows_per_block ", layout.planes, " exceeds twice the ", outputs, " windows"));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t InputTileRows(const StencilTask& analysis, const Layout& layout) {
  return (layout.threads_y * layout.rows - 1) * analysis.stride[0] +
         (analysis.kernel[0] - 1) * analysis.dilation[0] + 1;
}

int64_t InputTileColumns(const StencilTask& analysis, const Layout& layout) {
  return (layout.threads_x * layout.outputs - 1) * analysis.stride[1] +
         (analysis.kernel[1] - 1) * analysis.dilation[1] + 1;
}

int64_t StagedBytes(const StencilTask& analysis, const Layout& layout) {
  switch (layout.kind) {
    case Template::kPlanar:
      return layout.stage_in_shared ? InputTileRows(analysis, layout) *
                                          InputTileColumns(analysis, layout) * AccBytes(analysis)
                                    : 0;
    case Template::kTiled:
      return layout.planes * InputTileRows(analysis, layout) * TiledStagedPitch(analysis, layout) *
             AccBytes(analysis);
    case Template::kChannelsLastTiled:
      return analysis.kind == StencilKind::kConv
                 ? WindowTaps(analysis) * layout.threads_x * layout.width * AccBytes(analysis)
                 : 0;
    case Template::kChannelsLast:
    case Template::kWindowReduce:
      break;
  }
  return 0;
}

int64_t TiledStagedPitch(const StencilTask& analysis, const Layout& layout) {
  // Up to width - 1 columns before the window (alignment), rounded up to whole vectors.
  const int64_t shift = (layout.width - analysis.padding[1] % layout.width) % layout.width;
  const int64_t columns =
      Blocks(shift + InputTileColumns(analysis, layout), layout.width) * layout.width;
  // A warp's lanes read their first inputs at these words of shared memory (4-byte banks); the
  // fewest lanes on distinct words of one bank wins, then the narrowest pitch.
  const int64_t words_per_element = AccBytes(analysis) / 4;
  const int64_t lanes = std::min<int64_t>(32, layout.BlockThreads());
  int64_t best_pitch = columns;
  int64_t best_conflicts = std::numeric_limits<int64_t>::max();
  for (int64_t pitch = columns; pitch < columns + 32; ++pitch) {
    std::map<int64_t, std::set<int64_t>> words_by_bank;
    for (int64_t lane = 0; lane < lanes; ++lane) {
      const int64_t tx = lane % layout.threads_x;
      const int64_t ty = lane / layout.threads_x % layout.threads_y;
      const int64_t tz = lane / (layout.threads_x * layout.threads_y);
      const int64_t element = (tz * InputTileRows(analysis, layout) +
                               ty * layout.rows * analysis.stride[0]) * pitch +
                              tx * layout.outputs * analysis.stride[1];
      const int64_t word = element * words_per_element;
      words_by_bank[word % 32].insert(word);
    }
    int64_t conflicts = 0;
    for (const auto& [bank, words] : words_by_bank) {
      conflicts = std::max<int64_t>(conflicts, static_cast<int64_t>(words.size()));
    }
    if (conflicts < best_conflicts) {
      best_conflicts = conflicts;
      best_pitch = pitch;
    }
  }
  return best_pitch;
}

int LaneAxis(const Layout& layout) {
  return layout.kind == Template::kChannelsLast || layout.kind == Template::kChannelsLastTiled ? 1
                                                                                               : 3;
}

namespace {

// Every template that may run the task, each space at its table default (not settled): what
// ValidatePoint checks a point against. A point valid in one of these makes its template offered
// (SpacesOf), so checking against them equals checking against SpacesOf's without enumerating
// any space (SettleDefault can walk a whole space; the search validates every point it builds).
std::vector<TemplateSpace> CandidateSpaces(const StencilTask& analysis) {
  std::vector<TemplateSpace> spaces;
  const bool reduce_first = WindowReduceApplies(analysis) && !analysis.channels_last &&
                            WindowTaps(analysis) >= kWindowReduceFirstTaps;
  if (reduce_first) spaces.push_back(WindowReduceSpace(analysis));
  if (analysis.channels_last) {
    spaces.push_back(ChannelsLastSpace(analysis));
    spaces.push_back(PlanarSpace(analysis));
  } else {
    spaces.push_back(PlanarSpace(analysis));
    spaces.push_back(ChannelsLastSpace(analysis));
  }
  if (TiledApplies(analysis)) {
    spaces.push_back(TiledSpace(analysis));
    spaces.push_back(ChannelsLastTiledSpace(analysis));
  }
  if (WindowReduceApplies(analysis) && !reduce_first) {
    spaces.push_back(WindowReduceSpace(analysis));
  }
  return spaces;
}

}  // namespace

std::vector<TemplateSpace> SpacesOf(const StencilTask& analysis) {
  // The added templates are offered only where some point of theirs is valid, at a valid default.
  std::vector<TemplateSpace> offered;
  for (TemplateSpace& space : CandidateSpaces(analysis)) {
    const bool added = space.template_name != kPlanarTemplate &&
                       space.template_name != kChannelsLastTemplate;
    if (!added || SettleDefault(analysis, space)) offered.push_back(std::move(space));
  }
  return offered;
}

Layout LayoutOf(const SchedulePoint& point) {
  static constexpr std::pair<const char*, Template> kTemplates[] = {
      {kPlanarTemplate, Template::kPlanar},
      {kChannelsLastTemplate, Template::kChannelsLast},
      {kTiledTemplate, Template::kTiled},
      {kChannelsLastTiledTemplate, Template::kChannelsLastTiled},
      {kWindowReduceTemplate, Template::kWindowReduce}};
  Layout layout;
  for (const auto& [name, kind] : kTemplates) {
    if (point.template_name == name) layout.kind = kind;
  }
  auto parameter = [&](const char* name, int64_t fallback) {
    auto it = point.parameters.find(name);
    return it == point.parameters.end() ? fallback : it->second;
  };
  layout.threads_x = parameter("threads_x", 32);
  layout.threads_y = parameter("threads_y", 8);
  layout.stage_in_shared = parameter("stage_in_shared", 0) != 0;
  layout.width = parameter("vector_width", 1);
  layout.outputs = parameter("outputs_per_thread", 1);
  if (layout.kind == Template::kTiled) {
    layout.outputs = parameter("columns_per_thread", 1);
    layout.rows = parameter("rows_per_thread", 1);
    layout.planes = parameter("planes_per_block", 1);
  } else if (layout.kind == Template::kChannelsLastTiled) {
    layout.outputs = parameter("columns_per_thread", 1);
    layout.threads_x = parameter("channel_threads", 4);
    layout.threads_y = parameter("column_threads", 1);
    layout.threads_z = parameter("row_threads", 1);
  } else if (layout.kind == Template::kWindowReduce) {
    layout.threads = parameter("threads_per_window", 32);
    layout.planes = parameter("windows_per_block", 1);
  } else {
    layout.threads = parameter("threads_per_block", 128);
  }
  return layout;
}

absl::Status ValidatePoint(const StencilTask& analysis, const SchedulePoint& point) {
  const std::vector<TemplateSpace> spaces = CandidateSpaces(analysis);
  const TemplateSpace* space = nullptr;
  for (const TemplateSpace& candidate : spaces) {
    if (candidate.template_name == point.template_name) space = &candidate;
  }
  if (space == nullptr) {
    std::vector<std::string> names;
    for (const TemplateSpace& candidate : spaces) names.push_back(candidate.template_name);
    return absl::InvalidArgumentError(absl::StrCat("template '", point.template_name,
                                                   "' is not one of the task's: ",
                                                   absl::StrJoin(names, ", ")));
  }
  return ValidateInSpace(analysis, *space, point);
}

absl::Status ValidateInSpace(const StencilTask& analysis, const TemplateSpace& space,
                             const SchedulePoint& point) {
  if (absl::Status status = CheckPointInSpace(space, point); !status.ok()) return status;
  const Layout layout = LayoutOf(point);
  if (LaunchBlocks(analysis, layout) > kMaxGridBlocks) {
    return absl::InvalidArgumentError(absl::StrCat("the launch needs more than 2^31-1 blocks of ",
                                                   layout.BlockThreads(), " threads"));
  }
  switch (layout.kind) {
    case Template::kPlanar:
      return ValidatePlanar(analysis, layout);
    case Template::kTiled:
      return ValidateTiled(analysis, layout);
    case Template::kWindowReduce:
      return ValidateWindowReduce(analysis, layout);
    case Template::kChannelsLastTiled:
      return ValidateChannelsLastTiled(analysis, layout);
    case Template::kChannelsLast:
      break;
  }
  return ValidateChannelsLast(analysis, layout);
}

bool VectorAlong(const forge::v1::TensorSpec& spec, int axis, int64_t width) {
  if (width <= 1 || ElementBytes(spec.dtype()) * width > 16) return false;
  if (spec.shape_size() != 4 || spec.strides_size() != 4) return false;
  for (int d = 0; d < 4; ++d) {
    if (d == axis ? spec.strides(d) != 1 : spec.strides(d) % width != 0) return false;
  }
  return spec.storage_offset() % width == 0;
}

LaunchDims LaunchOf(const StencilTask& analysis, const Layout& layout) {
  LaunchDims launch;
  launch.grid = {static_cast<uint32_t>(LaunchBlocks(analysis, layout)), 1, 1};
  switch (layout.kind) {
    case Template::kPlanar:
      launch.block = {static_cast<uint32_t>(layout.threads_x),
                      static_cast<uint32_t>(layout.threads_y), 1};
      break;
    case Template::kTiled:
      launch.block = {static_cast<uint32_t>(layout.threads_x),
                      static_cast<uint32_t>(layout.threads_y),
                      static_cast<uint32_t>(layout.planes)};
      break;
    case Template::kWindowReduce:
      launch.block = {static_cast<uint32_t>(layout.threads),
                      static_cast<uint32_t>(layout.planes), 1};
      break;
    case Template::kChannelsLastTiled:
      launch.block = {static_cast<uint32_t>(layout.threads_x),
                      static_cast<uint32_t>(layout.threads_y),
                      static_cast<uint32_t>(layout.threads_z)};
      break;
    case Template::kChannelsLast:
      launch.block = {static_cast<uint32_t>(layout.threads), 1, 1};
      break;
  }
  return launch;
}

CostHints CostHintsOf(const forge::v1::KernelTask& task, const StencilTask& analysis,
                      const Layout& layout) {
  const forge::v1::TensorSpec* largest = LargestInput(task);
  int bytes = largest == nullptr ? 0 : InputBytesPerIndex(task, Elements(*largest));
  if (bytes == 0) bytes = OutputBytesPerIndex(task, LargestOutputElements(task));
  CostHints hints;
  // The elements a thread loads before it uses them: planar's outputs' taps, channels_last's
  // vectors at each output, tiled's and window_reduce's one vector a step.
  int64_t loaded = layout.width;
  int64_t rows_per_block = 1;
  switch (layout.kind) {
    case Template::kPlanar:
      loaded = layout.outputs;
      rows_per_block = layout.threads_y;
      break;
    case Template::kChannelsLast:
      loaded = layout.width * layout.outputs;
      break;
    case Template::kTiled:
      rows_per_block = layout.threads_y * layout.rows * layout.planes;
      break;
    case Template::kWindowReduce:
      rows_per_block = layout.planes;
      break;
    case Template::kChannelsLastTiled:
      rows_per_block = layout.threads_z;
      break;
  }
  hints.vector_width = layout.kind == Template::kPlanar ? 1 : layout.width;
  hints.unrolled_elements = loaded;
  hints.bytes_in_flight_per_thread = static_cast<double>(loaded * bytes);
  hints.rows_per_block = rows_per_block;
  return hints;
}

}  // namespace forge::codegen::stencil
