#include "compiler/codegen/stencil/layout.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/cost_hints.h"

namespace forge::codegen::stencil {
namespace {

constexpr int64_t kMaxGridBlocks = std::numeric_limits<int32_t>::max();

int64_t Blocks(int64_t count, int64_t per_block) { return (count + per_block - 1) / per_block; }

int64_t AccBytes(const StencilTask& analysis) { return analysis.acc_type == "double" ? 8 : 4; }

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
  const bool fits =
      InputTileRows(analysis, layout) * InputTileColumns(analysis, layout) * AccBytes(analysis) <=
      kMaxStagedBytes;
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
  if (layout.kind == Template::kPlanar) {
    return analysis.n * analysis.c * Blocks(analysis.oh, layout.threads_y) *
           Blocks(analysis.ow, layout.threads_x * layout.outputs);
  }
  return Blocks(
      analysis.n * analysis.oh * Blocks(analysis.ow, layout.outputs) * (analysis.c / layout.width),
      layout.threads);
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
  if (layout.stage_in_shared) {
    const int64_t bytes =
        InputTileRows(analysis, layout) * InputTileColumns(analysis, layout) * AccBytes(analysis);
    if (bytes > kMaxStagedBytes) {
      return absl::InvalidArgumentError(absl::StrCat("the staged input tile takes ", bytes,
                                                     " bytes of shared memory, more than ",
                                                     kMaxStagedBytes));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateChannelsLast(const StencilTask& analysis, const Layout& layout) {
  if (analysis.c % layout.width != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vector_width ", layout.width, " does not divide the ", analysis.c, " channels"));
  }
  if (layout.width * analysis.widest_access > 16) {
    return absl::InvalidArgumentError(absl::StrCat("vector_width ", layout.width, " of ",
                                                   analysis.widest_access,
                                                   "-byte elements exceeds a 16-byte access"));
  }
  if (layout.outputs > 1 && layout.outputs / 2 >= analysis.ow) {
    return absl::InvalidArgumentError(absl::StrCat("outputs_per_thread ", layout.outputs,
                                                   " exceeds twice the ", analysis.ow,
                                                   " output columns"));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t InputTileRows(const StencilTask& analysis, const Layout& layout) {
  return (layout.threads_y - 1) * analysis.stride[0] +
         (analysis.kernel[0] - 1) * analysis.dilation[0] + 1;
}

int64_t InputTileColumns(const StencilTask& analysis, const Layout& layout) {
  return (layout.threads_x * layout.outputs - 1) * analysis.stride[1] +
         (analysis.kernel[1] - 1) * analysis.dilation[1] + 1;
}

std::vector<TemplateSpace> SpacesOf(const StencilTask& analysis) {
  if (analysis.channels_last) return {ChannelsLastSpace(analysis), PlanarSpace(analysis)};
  return {PlanarSpace(analysis), ChannelsLastSpace(analysis)};
}

Layout LayoutOf(const SchedulePoint& point) {
  Layout layout;
  layout.kind =
      point.template_name == kPlanarTemplate ? Template::kPlanar : Template::kChannelsLast;
  auto parameter = [&](const char* name, int64_t fallback) {
    auto it = point.parameters.find(name);
    return it == point.parameters.end() ? fallback : it->second;
  };
  layout.threads_x = parameter("threads_x", 32);
  layout.threads_y = parameter("threads_y", 8);
  layout.stage_in_shared = parameter("stage_in_shared", 0) != 0;
  layout.width = parameter("vector_width", 1);
  layout.threads = parameter("threads_per_block", 128);
  layout.outputs = parameter("outputs_per_thread", 1);
  return layout;
}

absl::Status ValidatePoint(const StencilTask& analysis, const SchedulePoint& point) {
  const std::vector<TemplateSpace> spaces = SpacesOf(analysis);
  const TemplateSpace* space = nullptr;
  for (const TemplateSpace& candidate : spaces) {
    if (candidate.template_name == point.template_name) space = &candidate;
  }
  if (space == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("template '", point.template_name,
                                                   "' is not one of the task's: ", kPlanarTemplate,
                                                   ", ", kChannelsLastTemplate));
  }
  if (absl::Status status = CheckPointInSpace(*space, point); !status.ok()) return status;
  const Layout layout = LayoutOf(point);
  if (LaunchBlocks(analysis, layout) > kMaxGridBlocks) {
    return absl::InvalidArgumentError(absl::StrCat("the launch needs more than 2^31-1 blocks of ",
                                                   layout.BlockThreads(), " threads"));
  }
  return layout.kind == Template::kPlanar ? ValidatePlanar(analysis, layout)
                                          : ValidateChannelsLast(analysis, layout);
}

bool VectorAlongChannels(const forge::v1::TensorSpec& spec, int64_t width) {
  if (width <= 1 || ElementBytes(spec.dtype()) * width > 16) return false;
  if (spec.shape_size() != 4 || spec.strides_size() != 4) return false;
  for (int d = 0; d < 4; ++d) {
    if (d == 1 ? spec.strides(d) != 1 : spec.strides(d) % width != 0) return false;
  }
  return spec.storage_offset() % width == 0;
}

LaunchDims LaunchOf(const StencilTask& analysis, const Layout& layout) {
  LaunchDims launch;
  launch.grid = {static_cast<uint32_t>(LaunchBlocks(analysis, layout)), 1, 1};
  if (layout.kind == Template::kPlanar) {
    launch.block = {static_cast<uint32_t>(layout.threads_x),
                    static_cast<uint32_t>(layout.threads_y), 1};
  } else {
    launch.block = {static_cast<uint32_t>(layout.threads), 1, 1};
  }
  return launch;
}

CostHints CostHintsOf(const forge::v1::KernelTask& task, const StencilTask& analysis,
                      const Layout& layout) {
  const forge::v1::TensorSpec* largest = LargestInput(task);
  int bytes = largest == nullptr ? 0 : InputBytesPerIndex(task, Elements(*largest));
  if (bytes == 0) bytes = OutputBytesPerIndex(task, LargestOutputElements(task));
  CostHints hints;
  const int64_t loaded =
      layout.kind == Template::kPlanar ? layout.outputs : layout.width * layout.outputs;
  hints.vector_width = layout.kind == Template::kPlanar ? 1 : layout.width;
  hints.unrolled_elements = loaded;
  hints.bytes_in_flight_per_thread = static_cast<double>(loaded * bytes);
  hints.rows_per_block = layout.kind == Template::kPlanar ? layout.threads_y : 1;
  return hints;
}

}  // namespace forge::codegen::stencil
