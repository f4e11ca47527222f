#include "compiler/codegen/scan/layout.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/codegen/cost_hints.h"

namespace forge::codegen::scan {
namespace {

// The block size the defaults aim at: enough warps per block to hide a row's barriers.
constexpr int64_t kDefaultBlockThreads = 256;
// Elements a thread of the default row_scan point takes per tile: four 16-byte float32 vectors.
constexpr int64_t kDefaultItems = 16;

TemplateSpace RowSpace() {
  return {kRowTemplate,
          {{"threads_per_row", {32, 64, 128, 256, 512, 1024}, 32},
           {"rows_per_block", {1, 2, 4, 8}, 1},
           {"vector_width", {1, 2, 4, 8}, 1},
           {"elements_per_thread", {1, 2, 4, 8}, 1}}};
}

TemplateSpace ColumnSpace() {
  return {kColumnTemplate,
          {{"threads_per_block", {32, 64, 128, 256, 512}, 128}, {"unroll", {1, 2, 4, 8}, 1}}};
}

TemplateSpace ChainedSpace() {
  return {kChainedTemplate,
          {{"threads_per_block", {128, 256, 512, 1024}, 256},
           {"vector_width", {1, 2, 4, 8}, 1},
           {"elements_per_thread", {1, 2, 4, 8}, 1},
           {"tiles_per_lane", {1, 2, 4, 8}, 1}}};
}

int64_t Blocks(int64_t count, int64_t per_block) { return (count + per_block - 1) / per_block; }

int64_t LaunchBlocks(const ScanTask& analysis, const Layout& layout) {
  switch (layout.kind) {
    case Template::kRow:
      return Blocks(analysis.rows, layout.rows_per_block);
    case Template::kColumn:
      return Blocks(analysis.rows, layout.threads);
    case Template::kChained:
      return analysis.rows * TilesPerRow(analysis, layout);
  }
  return 0;
}

// What row_scan and chained_scan share: a tile's vectors and elements per thread.
absl::Status ValidateTile(const ScanTask& analysis, const Layout& layout) {
  const int64_t length = analysis.length;
  if (layout.width > 1 && length % layout.width != 0) {
    return absl::InvalidArgumentError(absl::StrCat("vector_width ", layout.width,
                                                   " does not divide the scanned length ", length));
  }
  if (layout.width * analysis.widest_access > 16) {
    return absl::InvalidArgumentError(absl::StrCat("vector_width ", layout.width, " of ",
                                                   analysis.widest_access,
                                                   "-byte elements exceeds a 16-byte access"));
  }
  if (layout.width * layout.chunks > kMaxItemsPerThread) {
    return absl::InvalidArgumentError(
        absl::StrCat("vector_width ", layout.width, " x elements_per_thread ", layout.chunks,
                     " exceeds ", kMaxItemsPerThread, " elements per thread and tile"));
  }
  if (layout.chunks > 1 && (layout.chunks - 1) * layout.width * layout.threads_per_row >= length) {
    return absl::InvalidArgumentError(
        absl::StrCat("elements_per_thread ", layout.chunks, " leaves chunks empty: a row of ",
                     length, " fits in ", layout.chunks - 1, " of ", layout.threads_per_row,
                     " threads x ", layout.width));
  }
  return absl::OkStatus();
}

absl::Status ValidateRow(const ScanTask& analysis, const Layout& layout) {
  if (layout.BlockThreads() > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("threads_per_row ", layout.threads_per_row,
                                                   " x rows_per_block ", layout.rows_per_block,
                                                   " exceeds 1024 threads per block"));
  }
  if (absl::Status status = ValidateTile(analysis, layout); !status.ok()) return status;
  if (layout.threads_per_row > 32 &&
      (layout.threads_per_row / 2) * layout.width * layout.chunks >= analysis.length) {
    return absl::InvalidArgumentError(absl::StrCat("threads_per_row ", layout.threads_per_row,
                                                   " leaves half the row's threads idle for ",
                                                   analysis.length, " elements"));
  }
  if (layout.rows_per_block > 1 && analysis.rows <= layout.rows_per_block / 2) {
    return absl::InvalidArgumentError(absl::StrCat("rows_per_block ", layout.rows_per_block,
                                                   " leaves half the block idle for ",
                                                   analysis.rows, " rows"));
  }
  return absl::OkStatus();
}

absl::Status ValidateChained(const ScanTask& analysis, const Layout& layout) {
  if (absl::Status status = ValidateTile(analysis, layout); !status.ok()) return status;
  if (TilesPerRow(analysis, layout) < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a tile of ", layout.Tile(), " elements holds the whole row of ", analysis.length,
        "; chained_scan needs two tiles or more (row_scan scans a row in one block)"));
  }
  if (layout.tiles_per_lane > 1 &&
      kLanesPerGroup * (layout.tiles_per_lane / 2) >= TilesPerRow(analysis, layout)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tiles_per_lane ", layout.tiles_per_lane, ": groups of half as many already hold the ",
        TilesPerRow(analysis, layout), " tiles of a row"));
  }
  return absl::OkStatus();
}

absl::Status ValidateColumn(const ScanTask& analysis, const Layout& layout) {
  if (layout.threads > 32 && analysis.rows <= layout.threads / 2) {
    return absl::InvalidArgumentError(absl::StrCat("threads_per_block ", layout.threads,
                                                   " leaves half the block idle for ",
                                                   analysis.rows, " rows"));
  }
  if (layout.unroll > 1 && layout.unroll / 2 >= analysis.length) {
    return absl::InvalidArgumentError(
        absl::StrCat("unroll ", layout.unroll, " exceeds the scanned length ", analysis.length));
  }
  return absl::OkStatus();
}

// row_scan's default: the widest vector, about kDefaultItems elements per thread, enough threads
// for a row to take one tile (up to kDefaultBlockThreads), and rows filling the block.
int64_t DefaultWidth(const ScanTask& analysis) {
  for (int64_t width : {8, 4, 2}) {
    if (analysis.length % width == 0 && width * analysis.widest_access <= 16) return width;
  }
  return 1;
}

SchedulePoint DefaultRowPoint(const ScanTask& analysis) {
  const int64_t width = DefaultWidth(analysis);
  int64_t chunks = std::min<int64_t>(8, std::max<int64_t>(1, kDefaultItems / width));
  int64_t threads = 32;
  while (threads < kDefaultBlockThreads && threads * width * chunks < analysis.length) {
    threads *= 2;
  }
  // Then as few chunks and threads as leave none of them empty (ValidateRow's rules).
  while (chunks > 1 && (chunks - 1) * width * threads >= analysis.length) chunks /= 2;
  while (threads > 32 && (threads / 2) * width * chunks >= analysis.length) threads /= 2;
  int64_t rows_per_block = std::min<int64_t>(8, kDefaultBlockThreads / threads);
  while (rows_per_block > 1 && analysis.rows <= rows_per_block / 2) rows_per_block /= 2;
  return {kRowTemplate,
          {{"threads_per_row", threads},
           {"rows_per_block", rows_per_block},
           {"vector_width", width},
           {"elements_per_thread", chunks}}};
}

// chained_scan's default: 256 threads of about kDefaultItems elements (4096 float32 a tile), and
// the fewest tiles per lane that still give groups of 256 tiles (a wait between groups per million
// float32 elements).
SchedulePoint DefaultChainedPoint(const ScanTask& analysis) {
  Layout layout;
  layout.kind = Template::kChained;
  layout.threads_per_row = kDefaultBlockThreads;
  layout.width = DefaultWidth(analysis);
  layout.chunks = std::min<int64_t>(8, std::max<int64_t>(1, kDefaultItems / layout.width));
  int64_t tiles_per_lane = 8;
  while (tiles_per_lane > 1 &&
         kLanesPerGroup * (tiles_per_lane / 2) >= TilesPerRow(analysis, layout)) {
    tiles_per_lane /= 2;
  }
  return {kChainedTemplate,
          {{"threads_per_block", layout.threads_per_row},
           {"vector_width", layout.width},
           {"elements_per_thread", layout.chunks},
           {"tiles_per_lane", tiles_per_lane}}};
}

SchedulePoint DefaultColumnPoint(const ScanTask& analysis) {
  int64_t threads = 128;
  while (threads > 32 && analysis.rows <= threads / 2) threads /= 2;
  int64_t unroll = 4;
  while (unroll > 1 && unroll / 2 >= analysis.length) unroll /= 2;
  return {kColumnTemplate, {{"threads_per_block", threads}, {"unroll", unroll}}};
}

// The templates: their spaces, constraints and default points.
struct TemplateEntry {
  absl::string_view name;
  Template kind;
  TemplateSpace (*space)();
  absl::Status (*validate)(const ScanTask&, const Layout&);
  SchedulePoint (*default_point)(const ScanTask&);
};
constexpr TemplateEntry kTemplates[] = {
    {kRowTemplate, Template::kRow, RowSpace, ValidateRow, DefaultRowPoint},
    {kColumnTemplate, Template::kColumn, ColumnSpace, ValidateColumn, DefaultColumnPoint},
    {kChainedTemplate, Template::kChained, ChainedSpace, ValidateChained, DefaultChainedPoint},
};

const TemplateEntry* FindTemplate(absl::string_view name) {
  for (const TemplateEntry& entry : kTemplates) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

// The templates offered for the task, the first one's default the task's.
std::vector<const TemplateEntry*> TemplatesOf(const ScanTask& analysis) {
  if (analysis.inner > 1) return {FindTemplate(kColumnTemplate)};
  const TemplateEntry* row = FindTemplate(kRowTemplate);
  if (analysis.length < kChainedMinLength) return {row};
  const TemplateEntry* chained = FindTemplate(kChainedTemplate);
  if (analysis.rows < kRowsToFillTheGpu) return {chained, row};
  return {row, chained};
}

}  // namespace

std::vector<TemplateSpace> SpacesOf(const ScanTask& analysis) {
  std::vector<TemplateSpace> spaces;
  for (const TemplateEntry* entry : TemplatesOf(analysis)) {
    TemplateSpace space = entry->space();
    const SchedulePoint point = entry->default_point(analysis);
    if (ValidatePoint(analysis, point).ok()) {  // else the declared defaults
      for (ScheduleParameter& parameter : space.parameters) {
        parameter.default_value = point.parameters.at(parameter.name);
      }
    }
    spaces.push_back(std::move(space));
  }
  return spaces;
}

Layout LayoutOf(const SchedulePoint& point) {
  auto parameter = [&](const std::string& name, int64_t fallback) {
    auto it = point.parameters.find(name);
    return it == point.parameters.end() ? fallback : it->second;
  };
  const TemplateEntry* entry = FindTemplate(point.template_name);
  Layout layout;
  layout.kind = entry == nullptr ? Template::kRow : entry->kind;
  layout.threads_per_row = layout.kind == Template::kChained ? parameter("threads_per_block", 256)
                                                             : parameter("threads_per_row", 32);
  layout.rows_per_block = parameter("rows_per_block", 1);
  layout.width = layout.column() ? 1 : parameter("vector_width", 1);
  layout.chunks = parameter("elements_per_thread", 1);
  layout.threads = parameter("threads_per_block", 128);
  layout.unroll = parameter("unroll", 1);
  layout.tiles_per_lane = parameter("tiles_per_lane", 1);
  return layout;
}

absl::Status ValidatePoint(const ScanTask& analysis, const SchedulePoint& point) {
  const std::vector<const TemplateEntry*> offered = TemplatesOf(analysis);
  const TemplateEntry* entry = nullptr;
  std::vector<std::string> names;
  for (const TemplateEntry* candidate : offered) {
    if (candidate->name == point.template_name) entry = candidate;
    names.emplace_back(candidate->name);
  }
  if (entry == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("template '", point.template_name,
                     "' is not one of the task's: ", absl::StrJoin(names, ", ")));
  }
  if (absl::Status status = CheckPointInSpace(entry->space(), point); !status.ok()) return status;
  const Layout layout = LayoutOf(point);
  if (LaunchBlocks(analysis, layout) > kMaxGridBlocks) {
    return absl::InvalidArgumentError(absl::StrCat("the launch needs more than 2^31-1 blocks of ",
                                                   layout.BlockThreads(), " threads"));
  }
  return entry->validate(analysis, layout);
}

bool VectorAlongTheRow(const ScanTask& analysis, const forge::v1::TensorSpec& spec, int64_t width) {
  if (width <= 1 || ElementBytes(spec.dtype()) * width > 16) return false;
  if (spec.shape_size() != static_cast<int>(analysis.shape.size())) return false;
  for (int d = 0; d < spec.shape_size(); ++d) {
    if (spec.shape(d) != analysis.shape[d]) return false;
  }
  const std::vector<int64_t> strides =
      spec.strides_size() == spec.shape_size()
          ? std::vector<int64_t>(spec.strides().begin(), spec.strides().end())
          : ContiguousStrides(analysis.shape);
  for (int d = 0; d < spec.shape_size(); ++d) {
    if (d == analysis.axis ? strides[d] != 1 : strides[d] % width != 0) return false;
  }
  return spec.storage_offset() % width == 0;
}

int64_t TilesPerRow(const ScanTask& analysis, const Layout& layout) {
  return Blocks(analysis.length, layout.Tile());
}

int64_t GroupsPerRow(const ScanTask& analysis, const Layout& layout) {
  return Blocks(TilesPerRow(analysis, layout), kLanesPerGroup * layout.tiles_per_lane);
}

LaunchDims LaunchOf(const ScanTask& analysis, const Layout& layout) {
  LaunchDims launch;
  launch.grid = {static_cast<uint32_t>(LaunchBlocks(analysis, layout)), 1, 1};
  launch.block = {static_cast<uint32_t>(layout.BlockThreads()), 1, 1};
  return launch;
}

CostHints CostHintsOf(const forge::v1::KernelTask& task, const ScanTask& analysis,
                      const Layout& layout) {
  int64_t elements = 1;
  for (int64_t size : analysis.shape) elements *= size;
  int bytes = InputBytesPerIndex(task, elements);
  if (bytes == 0) bytes = OutputBytesPerIndex(task, elements);
  CostHints hints;
  const int64_t loaded = layout.column() ? layout.unroll : layout.width * layout.chunks;
  hints.vector_width = layout.width;
  hints.unrolled_elements = loaded;
  hints.bytes_in_flight_per_thread = static_cast<double>(loaded * bytes);
  hints.rows_per_block = layout.column() ? layout.threads : layout.rows_per_block;
  return hints;
}

}  // namespace forge::codegen::scan
