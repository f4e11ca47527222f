#include "compiler/codegen/pointwise/pointwise.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/codegen/cost_hints.h"
#include "compiler/codegen/cuda_expr.h"
#include "compiler/codegen/kernel_abi.h"
#include "compiler/codegen/pointwise/lane_vectors.h"
#include "compiler/ops/pointwise_call.h"

namespace forge::codegen {
namespace {

using forge::v1::KernelTask;
using forge::v1::TensorSpec;


// What Generate needs to know about a task, checked once.
struct PointwiseTask {
  GroupView view;
  int64_t elements = 0;       // of every output
  bool wide_index = false;    // some tensor of the group reaches past 2^31 elements
  int64_t widest_access = 1;  // bytes per element of the widest input or output
};

std::vector<int64_t> ShapeOf(const TensorSpec& spec) {
  return {spec.shape().begin(), spec.shape().end()};
}

absl::StatusOr<PointwiseTask> Analyze(const KernelTask& task) {
  absl::StatusOr<GroupView> view = GroupView::Create(task);
  if (!view.ok()) return view.status();
  PointwiseTask analysis{*std::move(view)};
  const forge::v1::Graph& group = task.group();
  for (const forge::v1::Node& node : group.nodes()) {
    if (!IsElementOp(node)) {
      return absl::UnimplementedError(absl::StrCat("pointwise: ", DescribeNode(node),
                                                   " is not an elementwise, view or glue op"));
    }
  }
  if (group.outputs_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("pointwise: task ", task.digest(),
                                                   " has no outputs"));
  }
  int64_t largest = 0;
  for (const forge::v1::Value& value : group.values()) {
    if (!StorageType(value.tensor().dtype()).ok()) {
      return absl::UnimplementedError(absl::StrCat("pointwise: value '", value.name(),
                                                   "' has dtype ",
                                                   DTypeName(value.tensor().dtype()),
                                                   ", which the generator does not support"));
    }
    largest = std::max(largest, NumElements(value.tensor().shape()));
  }
  for (int i = 0; i < task.outputs_size(); ++i) {
    const TensorSpec& spec = task.outputs(i);
    const std::string& name = group.outputs(i).value_name();
    if (ShapeOf(spec) != analysis.view.Shape(name) || spec.dtype() != analysis.view.DType(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pointwise: output ", i, " ('", name, "') TensorSpec disagrees with its Value in shape or dtype"));
    }
    const int64_t elements = NumElements(spec.shape());
    if (i == 0) analysis.elements = elements;
    if (elements != analysis.elements) {
      return absl::UnimplementedError(absl::StrCat(
          "pointwise: outputs have different element counts (", analysis.elements, " and ",
          elements, " for output ", i, "); one kernel writes outputs of one size"));
    }
    largest = std::max(largest, MaxOffset(spec) + 1);
    analysis.widest_access = std::max(analysis.widest_access, ElementBytes(spec.dtype()));
  }
  for (int i = 0; i < task.inputs_size(); ++i) {
    largest = std::max(largest, MaxOffset(task.inputs(i)) + 1);
    analysis.widest_access = std::max(analysis.widest_access, ElementBytes(task.inputs(i).dtype()));
  }
  // Leaves room for the last block's overhang past the element count.
  analysis.wide_index = largest >= (int64_t{1} << 30);
  return analysis;
}

// The one template's space; defaults are chosen per task by ScheduleSpace.
TemplateSpace FlatSpace() {
  return {PointwiseFamily::kTemplateName,
          {{"threads_per_block", {128, 256, 512, 1024}, 256},
           {"elements_per_thread", {1, 2, 4, 8}, 1},
           {"vector_width", {1, 2, 4, 8}, 1}}};
}

// pointwise_tile: a 32 x 32 tile of (tile_dim, inner) coordinates per block, computed with the
// lanes along tile_dim (where a transposed input is contiguous) and stored through shared memory
// with the lanes along the inner block (where the outputs are contiguous).
constexpr int64_t kTile = 32;

// The outputs' logical shape split at tile_dim: outer x tile x inner.
struct TileExtents {
  int64_t outer = 1;
  int64_t tile = 1;
  int64_t inner = 1;
  // 32-wide tiles along tile_dim and along the inner block; one block per tile pair per outer.
  int64_t TilesAlong() const { return (tile + kTile - 1) / kTile; }
  int64_t TilesInner() const { return (inner + kTile - 1) / kTile; }
  int64_t Blocks() const { return outer * TilesAlong() * TilesInner(); }
};

TileExtents ExtentsAt(const std::vector<int64_t>& shape, int64_t tile_dim) {
  TileExtents extents;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    int64_t& extent = d < tile_dim ? extents.outer : d == tile_dim ? extents.tile : extents.inner;
    extent *= shape[d];
  }
  return extents;
}

TemplateSpace TileSpace(int rank, int64_t default_dim) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d + 1 < rank; ++d) dims.push_back(d);
  return {PointwiseFamily::kTileTemplateName,
          {{"tile_dim", dims, default_dim}, {"threads_y", {4, 8}, 8}}};
}

// The outputs' dim whose coordinate a full-size value is contiguous along, when that value reaches
// the outputs through one permute or transpose that moves its last dim away from theirs (NHWC read
// as NCHW: a GEMM's output permuted back, x.permute(...).contiguous()); nullopt otherwise.
std::optional<int64_t> TransposedDim(const PointwiseTask& analysis) {
  const KernelTask& task = analysis.view.task();
  const std::vector<int64_t> shape = ShapeOf(task.outputs(0));
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank < 2) return std::nullopt;
  for (const forge::v1::Node& node : task.group().nodes()) {
    std::vector<int64_t> source_dim(rank);  // output dim j reads the source's dim source_dim[j]
    for (int64_t j = 0; j < rank; ++j) source_dim[j] = j;
    auto normalize = [rank](int64_t dim) { return dim < 0 ? dim + rank : dim; };
    if (node.op() == "aten::permute") {
      const forge::v1::Argument* dims = forge::ops::FindArgument(node, "dims");
      if (dims == nullptr || !dims->has_ints() || dims->ints().values_size() != rank) continue;
      for (int64_t j = 0; j < rank; ++j) source_dim[j] = normalize(dims->ints().values(j));
    } else if (node.op() == "aten::transpose") {
      const forge::v1::Argument* dim0 = forge::ops::FindArgument(node, "dim0");
      const forge::v1::Argument* dim1 = forge::ops::FindArgument(node, "dim1");
      if (dim0 == nullptr || dim1 == nullptr) continue;
      const int64_t a = normalize(dim0->int_value()), b = normalize(dim1->int_value());
      if (a < 0 || b < 0 || a >= rank || b >= rank) continue;
      std::swap(source_dim[a], source_dim[b]);
    } else {
      continue;
    }
    if (node.outputs_size() != 1 || analysis.view.Shape(node.outputs(0)) != shape) continue;
    const std::vector<int64_t> source = analysis.view.Shape(TensorArgument(node, "self"));
    int64_t source_elements = 1;
    for (int64_t extent : source) source_elements *= extent;
    if (static_cast<int64_t>(source.size()) != rank || source_elements != analysis.elements) {
      continue;
    }
    for (int64_t j = 0; j + 1 < rank; ++j) {
      if (source_dim[j] == rank - 1) return j;
    }
  }
  return std::nullopt;
}

absl::Status ValidateTile(const PointwiseTask& analysis, const SchedulePoint& point) {
  const KernelTask& task = analysis.view.task();
  const int64_t tile_dim = point.parameters.at("tile_dim");
  const std::vector<int64_t> shape = ShapeOf(task.outputs(0));
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (tile_dim + 1 >= rank) {
    return absl::InvalidArgumentError(absl::StrCat("pointwise_tile: tile_dim ", tile_dim,
                                                   " leaves no inner dims of a rank-", rank,
                                                   " output"));
  }
  for (int o = 0; o < task.outputs_size(); ++o) {
    const TensorSpec& spec = task.outputs(o);
    if (ShapeOf(spec) != shape) {
      return absl::InvalidArgumentError("pointwise_tile: the outputs differ in shape");
    }
    int64_t expected = 1;
    for (int64_t d = rank - 1; d > tile_dim; --d) {
      if (spec.shape(d) != 1 && spec.strides(d) != expected) {
        return absl::InvalidArgumentError(absl::StrCat(
            "pointwise_tile: output ", o, "'s dims after tile_dim ", tile_dim,
            " are not one contiguous block"));
      }
      expected *= spec.shape(d);
    }
  }
  const TileExtents extents = ExtentsAt(shape, tile_dim);
  if (extents.tile < kTile / 2 || extents.inner < kTile / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pointwise_tile: a ", extents.tile, " x ", extents.inner,
        " tile plane is too small to gain from a shared-memory transpose"));
  }
  const int64_t blocks = extents.Blocks();
  if (blocks > kMaxGridBlocks) {
    return absl::InvalidArgumentError(absl::StrCat("pointwise_tile: ", blocks, " blocks"));
  }
  return absl::OkStatus();
}

int64_t ParameterOf(const SchedulePoint& point, const std::string& name) {
  return point.parameters.at(name);
}

// The vector variable lane `lane` of a chunk reads input `position` (laid out by `spec`, stored
// as `storage`) from at `index`, when the chunk's lanes read it as one aligned vector through
// views (lane_vectors.h): declared by lane 0 (outside an EmitChoice alternative, whose variables
// the later lanes could not see), found by the others in `vectors`. nullopt: a scalar load.
std::optional<std::string> ViewVector(
    const std::optional<pointwise::ChunkLanes>& lanes,
    std::map<std::pair<int, std::string>, std::string>& vectors, int position,
    const TensorSpec& spec, const std::string& storage, const Index& index, int lane,
    ElementEmitter& emitter) {
  if (!lanes.has_value() || emitter.in_choice()) return std::nullopt;
  const int64_t width = static_cast<int64_t>(lanes->width());
  if (ElementBytes(spec.dtype()) * width > 16) return std::nullopt;
  std::optional<std::string> key = lanes->VectorKey(index, lane, spec, emitter);
  if (!key.has_value()) return std::nullopt;
  auto it = vectors.find({position, *key});
  if (lane != 0) {
    if (it == vectors.end()) return std::nullopt;
    return it->second;
  }
  if (it != vectors.end()) return it->second;
  const std::string variable = emitter.NewVariable();
  emitter.AddStatement(absl::StrCat("const ForgeVec<", storage, ", ", width, "> ", variable,
                                    " = *reinterpret_cast<const ForgeVec<", storage, ", ", width,
                                    ">*>(in", position, " + ", ElementOffset(index, spec, emitter),
                                    ");"));
  vectors[{position, *key}] = variable;
  return variable;
}

// The statements that compute and store one chunk of `vector_width` elements starting at
// element `chunk_start`.
// `store_to`, when given, makes the statement that stores output o's value (already converted to
// its storage type) instead of the store to out<o> (pointwise_tile stores to shared memory).
using StoreTo = std::function<std::string(int output, const std::string& stored)>;
absl::StatusOr<std::vector<std::string>> ChunkBody(const PointwiseTask& analysis, int vector_width,
                                                   const std::string& index_type,
                                                   const StoreTo& store_to = nullptr) {
  const GroupView& view = analysis.view;
  const KernelTask& task = view.task();
  int lane = 0;  // the element of the chunk being emitted
  std::map<int, std::string> vector_loads;  // input position -> its vector variable
  // Vector reads through views (lane_vectors.h): the chunk's lanes, and each read's vector
  // variable, declared at lane 0, by input position and ChunkLanes key.
  std::vector<std::vector<int64_t>> output_shapes;
  for (const forge::v1::GraphOutput& output : task.group().outputs()) {
    output_shapes.push_back(view.Shape(output.value_name()));
  }
  const std::optional<pointwise::ChunkLanes> lanes =
      pointwise::ChunkLanes::Of(output_shapes, vector_width);
  std::map<std::pair<int, std::string>, std::string> view_vectors;
  auto element = [&](int v) { return v == 0 ? std::string("chunk_start") : absl::StrCat("(chunk_start + ", v, ")"); };

  ElementEmitter emitter(
      view, index_type, "t",
      [&](absl::string_view value, const Index& index,
          ElementEmitter& self) -> absl::StatusOr<std::optional<Term>> {
        const int position = view.InputPosition(value);
        if (position < 0) return std::optional<Term>();
        const TensorSpec& spec = view.InputSpec(position);
        absl::StatusOr<std::string> storage = StorageType(spec.dtype());
        if (!storage.ok()) return storage.status();
        absl::StatusOr<std::string> reg = RegisterType(spec.dtype());
        if (!reg.ok()) return reg.status();
        const bool in_place = NumElements(spec.shape()) == analysis.elements && IsContiguous(spec) &&
                              index == RowMajorCoordinates(element(lane), ShapeOf(spec));
        std::string loaded;
        if (in_place && vector_width > 1 && !self.in_choice() &&
            spec.storage_offset() % vector_width == 0 &&
            ElementBytes(spec.dtype()) * vector_width <= 16) {
          auto [it, inserted] = vector_loads.try_emplace(position, "");
          if (inserted) {
            it->second = self.NewVariable();
            self.AddStatement(absl::StrCat("const ForgeVec<", *storage, ", ", vector_width, "> ",
                                           it->second, " = *reinterpret_cast<const ForgeVec<",
                                           *storage, ", ", vector_width, ">*>(in", position,
                                           " + chunk_start);"));
          }
          loaded = LoadConversion(spec.dtype(), absl::StrCat(it->second, ".v[", lane, "]"));
        } else if (in_place) {
          loaded = LoadConversion(spec.dtype(), absl::StrCat("in", position, "[", element(lane), "]"));
        } else if (std::optional<std::string> vector_variable =
                       ViewVector(lanes, view_vectors, position, spec, *storage, index, lane,
                                  self);
                   vector_variable.has_value()) {
          loaded = LoadConversion(spec.dtype(), absl::StrCat(*vector_variable, ".v[", lane, "]"));
        } else {
          loaded = LoadConversion(spec.dtype(),
                                  absl::StrCat("in", position, "[", ElementOffset(index, spec, self), "]"));
        }
        const std::string variable = self.NewVariable();
        self.AddStatement(absl::StrCat("const ", *reg, " ", variable, " = ", loaded, ";"));
        return Term{variable, spec.dtype()};
      });

  // results[o][v]: output o's element v of the chunk, in its register type.
  std::vector<std::vector<Term>> results(task.outputs_size());
  for (lane = 0; lane < vector_width; ++lane) {
    for (int o = 0; o < task.outputs_size(); ++o) {
      const std::string& name = task.group().outputs(o).value_name();
      absl::StatusOr<Term> term = emitter.Emit(name, RowMajorCoordinates(element(lane), view.Shape(name)));
      if (!term.ok()) return term.status();
      results[o].push_back(*term);
    }
  }
  for (int o = 0; o < task.outputs_size(); ++o) {
    const TensorSpec& spec = task.outputs(o);
    // The computed term has the register type of its own dtype, which may differ from the
    // output's when the output is a group input passed through.
    auto converted = [&](const Term& term) {
      const std::string reg = *RegisterType(spec.dtype());
      return spec.dtype() == forge::v1::DTYPE_BOOL ? absl::StrCat("(", term.expr, " != 0)")
                                                   : absl::StrCat("((", reg, ")", term.expr, ")");
    };
    auto stored = [&](const Term& term) { return StoreConversion(spec.dtype(), converted(term)); };
    if (store_to) {
      emitter.AddStatement(store_to(o, stored(results[o][0])));
    } else if (vector_width > 1) {
      std::vector<std::string> values;
      for (const Term& term : results[o]) values.push_back(converted(term));
      for (const std::string& statement :
           VectorStore(spec.dtype(), values, emitter.NewVariable(),
                       absl::StrCat("out", o, " + chunk_start"), /*condition=*/"")) {
        emitter.AddStatement(statement);
      }
    } else if (IsContiguous(spec)) {
      emitter.AddStatement(absl::StrCat("out", o, "[chunk_start] = ", stored(results[o][0]), ";"));
    } else {
      const Index coordinates = RowMajorCoordinates("chunk_start", ShapeOf(spec));
      emitter.AddStatement(absl::StrCat("out", o, "[", ElementOffset(coordinates, spec, emitter),
                                        "] = ", stored(results[o][0]), ";"));
    }
  }
  return emitter.statements();
}

LaunchPlan PlanTile(const KernelTask& task, const SchedulePoint& point) {
  const int64_t tile_dim = point.parameters.at("tile_dim");
  const int64_t threads_y = point.parameters.at("threads_y");
  const TileExtents extents = ExtentsAt(ShapeOf(task.outputs(0)), tile_dim);
  LaunchPlan plan;
  plan.kernel_name = PointwiseFamily::kKernelName;
  plan.launch.grid = {static_cast<uint32_t>(extents.Blocks()), 1, 1};
  plan.launch.block = {static_cast<uint32_t>(kTile), static_cast<uint32_t>(threads_y), 1};
  plan.template_name = PointwiseFamily::kTileTemplateName;
  plan.parameters = point.parameters;
  plan.generator_version = std::string(PointwiseFamily().generator_version());
  const int64_t elements = LargestOutputElements(task);
  int bytes = InputBytesPerIndex(task, elements);
  if (bytes == 0) bytes = OutputBytesPerIndex(task, elements);
  plan.hints.vector_width = 1;
  plan.hints.unrolled_elements = kTile / threads_y;
  plan.hints.bytes_in_flight_per_thread = static_cast<double>(kTile / threads_y * bytes);
  return plan;
}

// Phase 1: lanes along tile_dim compute a 32 x 32 tile (coalesced where an input is contiguous
// along tile_dim) into shared memory; phase 2: lanes along the inner block store it (coalesced in
// the outputs). Both phases index the element by its row-major position in the outputs.
absl::StatusOr<std::string> EmitTile(const PointwiseTask& analysis, const LaunchPlan& plan) {
  const KernelTask& task = analysis.view.task();
  const int64_t tile_dim = plan.parameters.at("tile_dim");
  const int64_t threads_y = plan.parameters.at("threads_y");
  const std::vector<int64_t> shape = ShapeOf(task.outputs(0));
  const TileExtents extents = ExtentsAt(shape, tile_dim);
  const std::string index_type = analysis.wide_index ? "long long" : "int";
  std::vector<std::string> storage;
  for (const TensorSpec& output : task.outputs()) {
    absl::StatusOr<std::string> type = StorageType(output.dtype());
    if (!type.ok()) return type.status();
    storage.push_back(*type);
  }
  absl::StatusOr<std::vector<std::string>> body = ChunkBody(
      analysis, 1, index_type, [](int o, const std::string& stored) {
        return absl::StrCat("tile", o, "[row][threadIdx.x] = ", stored, ";");
      });
  if (!body.ok()) return body.status();
  const int64_t tiles_inner = extents.TilesInner();
  const int64_t tiles_dim = extents.TilesAlong();
  const int64_t rows = kTile / threads_y;

  std::string source(KernelPrelude());
  absl::StrAppend(&source, "\n// Task ", task.digest(), ": ", analysis.elements,
                  " elements; pointwise_tile over dim ", tile_dim, " (", extents.outer, " x ",
                  extents.tile, " x ", extents.inner, "), 32 x ", threads_y, " threads.\n");
  absl::StrAppend(&source, "extern \"C\" __global__ void __launch_bounds__(", kTile * threads_y,
                  ") ", PointwiseFamily::kKernelName, "(", KernelParameterList(task), ") {\n");
  for (int o = 0; o < task.outputs_size(); ++o) {
    absl::StrAppend(&source, "  __shared__ ", storage[o], " tile", o, "[", kTile, "][", kTile + 1,
                    "];\n");
  }
  absl::StrAppend(&source, "  const long long inner0 = (long long)(blockIdx.x % ", tiles_inner,
                  ") * ", kTile, ";\n");
  absl::StrAppend(&source, "  const long long dim0 = (long long)((blockIdx.x / ", tiles_inner,
                  ") % ", tiles_dim, ") * ", kTile, ";\n");
  absl::StrAppend(&source, "  const long long outer = (long long)blockIdx.x / ", tiles_inner * tiles_dim,
                  ";\n");
  // Phase 1: threadIdx.x runs along tile_dim.
  absl::StrAppend(&source, "#pragma unroll\n  for (int step = 0; step < ", rows, "; ++step) {\n");
  absl::StrAppend(&source, "    const int row = threadIdx.y + step * ", threads_y, ";\n");
  absl::StrAppend(&source, "    const long long along = dim0 + threadIdx.x, inner = inner0 + row;\n");
  absl::StrAppend(&source, "    if (along < ", extents.tile, "LL && inner < ", extents.inner,
                  "LL) {\n");
  absl::StrAppend(&source, "      const ", index_type, " chunk_start = (", index_type,
                  ")((outer * ", extents.tile, "LL + along) * ", extents.inner, "LL + inner);\n");
  for (const std::string& statement : *body) absl::StrAppend(&source, "      ", statement, "\n");
  absl::StrAppend(&source, "    }\n  }\n  __syncthreads();\n");
  // Phase 2: threadIdx.x runs along the inner block, where every output is contiguous.
  absl::StrAppend(&source, "#pragma unroll\n  for (int step = 0; step < ", rows, "; ++step) {\n");
  absl::StrAppend(&source, "    const int column = threadIdx.y + step * ", threads_y, ";\n");
  absl::StrAppend(&source, "    const long long along = dim0 + column, inner = inner0 + threadIdx.x;\n");
  absl::StrAppend(&source, "    if (along < ", extents.tile, "LL && inner < ", extents.inner,
                  "LL) {\n");
  for (int o = 0; o < task.outputs_size(); ++o) {
    const TensorSpec& spec = task.outputs(o);
    // The outer coordinates through their strides, then tile_dim's stride, then the inner block.
    std::string offset = absl::StrCat("along * ", spec.strides(tile_dim), "LL + inner");
    int64_t divisor = 1;
    for (int64_t d = tile_dim - 1; d >= 0; --d) {
      if (spec.shape(d) != 1 && spec.strides(d) != 0) {
        absl::StrAppend(&offset, " + ((outer / ", divisor, "LL) % ", spec.shape(d), "LL) * ",
                        spec.strides(d), "LL");
      }
      divisor *= spec.shape(d);
    }
    absl::StrAppend(&source, "      out", o, "[", offset, "] = tile", o,
                    "[threadIdx.x][column];\n");
  }
  absl::StrAppend(&source, "    }\n  }\n}\n");
  return source;
}

}  // namespace

absl::Status PointwiseFamily::Applies(const KernelTask& task) const {
  absl::StatusOr<PointwiseTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  // Emitting one element proves every op and argument is expressible.
  return ChunkBody(*analysis, 1, "int").status();
}

absl::StatusOr<std::vector<TemplateSpace>> PointwiseFamily::ScheduleSpace(
    const KernelTask& task) const {
  absl::StatusOr<PointwiseTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  TemplateSpace space = FlatSpace();
  // Default: the widest vector that is valid, then more elements per thread for scalar code.
  for (int64_t width : {8, 4, 2}) {
    SchedulePoint point = DefaultPoint(space);
    point.parameters["vector_width"] = width;
    if (Validate(task, point).ok()) {
      space.parameters[2].default_value = width;
      break;
    }
  }
  if (space.parameters[2].default_value == 1) {
    for (int64_t elements : {4, 2}) {
      SchedulePoint point = DefaultPoint(space);
      point.parameters["elements_per_thread"] = elements;
      if (Validate(task, point).ok()) {
        space.parameters[1].default_value = elements;
        break;
      }
    }
  }
  // Small tasks: the default block must not be mostly idle.
  while (space.parameters[0].default_value > 128) {
    SchedulePoint point = DefaultPoint(space);
    if (Validate(task, point).ok()) break;
    space.parameters[0].default_value /= 2;
  }
  std::vector<TemplateSpace> spaces;
  // A transposed read: the tile template first, so that it is the default (a GEMM's epilogue
  // kernel takes the first space's default point), with the flat template still searched.
  if (std::optional<int64_t> dim = TransposedDim(*analysis); dim.has_value()) {
    TemplateSpace tile = TileSpace(static_cast<int>(task.outputs(0).shape_size()), *dim);
    if (ValidateTile(*analysis, DefaultPoint(tile)).ok()) spaces.push_back(std::move(tile));
  }
  spaces.push_back(std::move(space));
  return spaces;
}

absl::Status PointwiseFamily::Validate(const KernelTask& task, const SchedulePoint& point) const {
  absl::StatusOr<PointwiseTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  if (point.template_name == kTileTemplateName) {
    const TemplateSpace tile = TileSpace(static_cast<int>(task.outputs(0).shape_size()), 0);
    if (absl::Status status = CheckPointInSpace(tile, point); !status.ok()) return status;
    return ValidateTile(*analysis, point);
  }
  if (absl::Status status = CheckPointInSpace(FlatSpace(), point); !status.ok()) return status;
  const int64_t threads = ParameterOf(point, "threads_per_block");
  const int64_t per_thread = ParameterOf(point, "elements_per_thread");
  const int64_t width = ParameterOf(point, "vector_width");
  const int64_t elements = analysis->elements;
  if (width > 1) {
    if (elements % width != 0) {
      return absl::InvalidArgumentError(absl::StrCat("vector_width ", width,
                                                     " does not divide the ", elements,
                                                     " elements of the outputs"));
    }
    for (int o = 0; o < task.outputs_size(); ++o) {
      const TensorSpec& spec = task.outputs(o);
      if (!IsContiguous(spec)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "vector_width ", width, " needs contiguous outputs; output ", o, " is strided"));
      }
      if (spec.storage_offset() % width != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("vector_width ", width, " needs 16-byte aligned outputs; output ", o,
                         " starts at storage offset ", spec.storage_offset()));
      }
    }
    if (width * analysis->widest_access > 16) {
      return absl::InvalidArgumentError(absl::StrCat(
          "vector_width ", width, " of ", analysis->widest_access,
          "-byte elements exceeds a 16-byte vector access"));
    }
  }
  // Every thread of a block but the last one's slots must have work, or the point is only a
  // slower copy of a smaller one.
  if (per_thread > 1 && elements <= threads * width * (per_thread - 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "elements_per_thread ", per_thread, " leaves slots empty: the ", elements,
        " elements fit in ", per_thread - 1, " slots of ", threads, " threads x ", width));
  }
  if (threads > 128 && elements <= (threads / 2) * width * per_thread) {
    return absl::InvalidArgumentError(absl::StrCat("threads_per_block ", threads,
                                                   " leaves half the block idle for ", elements,
                                                   " elements"));
  }
  const int64_t per_block = threads * per_thread * width;
  if ((elements + per_block - 1) / per_block > kMaxGridBlocks) {
    return absl::InvalidArgumentError(
        absl::StrCat(elements, " elements need more than 2^31-1 blocks of ", per_block));
  }
  return absl::OkStatus();
}

absl::StatusOr<LaunchPlan> PointwiseFamily::Plan(const KernelTask& task,
                                                 const SchedulePoint& point) const {
  if (absl::Status status = Validate(task, point); !status.ok()) return status;
  absl::StatusOr<PointwiseTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  if (point.template_name == kTileTemplateName) return PlanTile(task, point);
  const int64_t threads = ParameterOf(point, "threads_per_block");
  const int64_t per_thread = ParameterOf(point, "elements_per_thread");
  const int64_t width = ParameterOf(point, "vector_width");
  const int64_t chunks = analysis->elements / width;
  const int64_t per_block = threads * per_thread;
  const int64_t blocks = std::max<int64_t>(1, (chunks + per_block - 1) / per_block);

  LaunchPlan plan;
  plan.kernel_name = kKernelName;
  plan.launch.grid = {static_cast<uint32_t>(blocks), 1, 1};
  plan.launch.block = {static_cast<uint32_t>(threads), 1, 1};
  plan.template_name = kTemplateName;
  plan.parameters = point.parameters;
  plan.generator_version = std::string(generator_version());
  // Each thread loads elements_per_thread chunks of vector_width elements of every full-size
  // input before it uses them (of the outputs, when nothing full-size is read).
  const int64_t elements = LargestOutputElements(task);
  int bytes = InputBytesPerIndex(task, elements);
  if (bytes == 0) bytes = OutputBytesPerIndex(task, elements);
  plan.hints.vector_width = width;
  plan.hints.unrolled_elements = width * per_thread;
  plan.hints.bytes_in_flight_per_thread = static_cast<double>(per_thread * width * bytes);
  return plan;
}

absl::StatusOr<std::string> PointwiseFamily::Emit(const KernelTask& task,
                                                  const LaunchPlan& plan) const {
  absl::StatusOr<PointwiseTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  if (plan.template_name == kTileTemplateName) return EmitTile(*analysis, plan);
  const int64_t threads = plan.parameters.at("threads_per_block");
  const int64_t per_thread = plan.parameters.at("elements_per_thread");
  const int64_t width = plan.parameters.at("vector_width");
  const std::string index_type = analysis->wide_index ? "long long" : "int";
  absl::StatusOr<std::vector<std::string>> body =
      ChunkBody(*analysis, static_cast<int>(width), index_type);
  if (!body.ok()) return body.status();
  const int64_t chunks = analysis->elements / width;

  std::string source(KernelPrelude());
  absl::StrAppend(&source, "\n// Task ", task.digest(), ": ", analysis->elements,
                  " elements; pointwise_flat, ", threads, " threads x ", per_thread, " chunks x ",
                  width, " elements.\n");
  absl::StrAppend(&source, "extern \"C\" __global__ void __launch_bounds__(", threads, ") ",
                  kKernelName, "(", KernelParameterList(task), ") {\n");
  absl::StrAppend(&source, "#pragma unroll\n  for (int slot = 0; slot < ", per_thread,
                  "; ++slot) {\n");
  absl::StrAppend(&source, "    const long long chunk = ((long long)blockIdx.x * ", per_thread,
                  " + slot) * ", threads, " + threadIdx.x;\n");
  absl::StrAppend(&source, "    if (chunk >= ", chunks, "LL) break;\n");
  absl::StrAppend(&source, "    const ", index_type, " chunk_start = (", index_type, ")chunk * ",
                  width, ";\n");
  for (const std::string& statement : *body) absl::StrAppend(&source, "    ", statement, "\n");
  absl::StrAppend(&source, "  }\n}\n");
  return source;
}

}  // namespace forge::codegen
