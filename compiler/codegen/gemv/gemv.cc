#include "compiler/codegen/gemv/gemv.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/cuda_expr.h"
#include "compiler/codegen/gemm_analysis/gemm_analysis.h"
#include "compiler/codegen/gemv/cuda_sources.h"
#include "compiler/codegen/kernel_abi.h"

namespace forge::codegen {
namespace {

using forge::v1::KernelTask;
using forge::v1::Node;
using forge::v1::TensorSpec;

constexpr int64_t kMaxVectorBytes = 16;
// Accumulators plus the registers of the loads in flight a thread may hold: past this, ptxas
// spills (a thread has 255 registers; the index arithmetic and the epilogue need the rest).
constexpr int64_t kMaxDataRegisters = 128;

absl::Status Prefixed(const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("gemv: ", status.message()));
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// What the family needs to know about a task, checked once.
struct GemvTask {
  GroupView view;
  GemmProduct product;
  std::string product_value;  // the product node's output
  std::string addend;         // linear's bias or addmm's self, added to the product; or ""
};

absl::StatusOr<GemvTask> Analyze(const KernelTask& task) {
  absl::StatusOr<GroupView> view = GroupView::Create(task);
  if (!view.ok()) return view.status();
  absl::StatusOr<ProductAnalysis> product = AnalyzeProduct(*view, {.broadcast_batch = true});
  if (!product.ok()) return Prefixed(product.status());
  GemvTask analysis{*std::move(view), product->product, product->matmul->outputs(0), ""};
  const GemmProduct& p = analysis.product;
  if (p.m > GemvFamily::kMaxRows) {
    return Prefixed(absl::UnimplementedError(absl::StrCat(
        "M = ", p.m, " rows per product; the family takes M <= ", GemvFamily::kMaxRows,
        " (bandwidth-bound products), a tiled GEMM runs the rest")));
  }
  const Node& matmul = *product->matmul;
  const absl::string_view op = OpName(matmul);
  if (op == "addmm" && (!IsUnitScalar(matmul, "beta") || !IsUnitScalar(matmul, "alpha"))) {
    return Prefixed(absl::UnimplementedError(
        absl::StrCat(DescribeNode(matmul), " scales by beta or alpha")));
  }
  if (op == "linear" || op == "addmm") {
    analysis.addend = TensorArgument(matmul, op == "linear" ? "bias" : "self");
  }
  if (task.outputs_size() == 0) return Prefixed(absl::InvalidArgumentError("the task has no outputs"));
  for (int o = 0; o < task.outputs_size(); ++o) {
    const TensorSpec& spec = task.outputs(o);
    if (!IsContiguous(spec) || spec.storage_offset() != 0 ||
        NumElements(spec.shape()) != p.output_elements() || !StorageType(spec.dtype()).ok()) {
      return Prefixed(absl::UnimplementedError(absl::StrCat(
          "output ", o, " is not a contiguous tensor of the product's ", p.output_elements(),
          " elements at storage offset 0 in a supported dtype")));
    }
  }
  return analysis;
}

// The statements that finish (epilogue) and store element `e` of every output, given the
// product's float32 sum `acc` at that element: ElementEmitter over the group's nodes after the
// product.
absl::StatusOr<std::vector<std::string>> EpilogueBody(const GemvTask& analysis) {
  const GroupView& view = analysis.view;
  const KernelTask& task = view.task();
  const Index product_index = RowMajorCoordinates("e", view.Shape(analysis.product_value));
  ElementEmitter emitter(
      view, "long long", "t",
      [&](absl::string_view value, const Index& index,
          ElementEmitter& self) -> absl::StatusOr<std::optional<Term>> {
        if (value == analysis.product_value) {
          if (index != product_index) {
            return Prefixed(absl::UnimplementedError(
                "the epilogue reads the product at another element than it writes (a transpose, "
                "broadcast or slice after the product)"));
          }
          if (analysis.addend.empty()) return Term{"acc", analysis.product.dtype};
          absl::StatusOr<Term> addend = self.Emit(
              analysis.addend, ElementEmitter::Broadcast(index, view.Shape(analysis.addend)));
          if (!addend.ok()) return addend.status();
          const std::string variable = self.NewVariable();
          self.AddStatement(
              absl::StrCat("const float ", variable, " = acc + (float)", addend->expr, ";"));
          return Term{variable, analysis.product.dtype};
        }
        const int position = view.InputPosition(value);
        if (position < 0) return std::optional<Term>();
        const TensorSpec& spec = view.InputSpec(position);
        absl::StatusOr<std::string> reg = RegisterType(spec.dtype());
        if (!reg.ok()) return reg.status();
        const std::string variable = self.NewVariable();
        self.AddStatement(absl::StrCat(
            "const ", *reg, " ", variable, " = ",
            LoadConversion(spec.dtype(), absl::StrCat("in", position, "[",
                                                      ElementOffset(index, spec, self), "]")),
            ";"));
        return Term{variable, spec.dtype()};
      });
  for (int o = 0; o < task.outputs_size(); ++o) {
    const std::string& name = task.group().outputs(o).value_name();
    absl::StatusOr<Term> term = emitter.Emit(name, RowMajorCoordinates("e", view.Shape(name)));
    if (!term.ok()) return term.status();
    const TensorSpec& spec = task.outputs(o);
    const std::string converted =
        spec.dtype() == forge::v1::DTYPE_BOOL
            ? absl::StrCat("(", term->expr, " != 0)")
            : absl::StrCat("((", *RegisterType(spec.dtype()), ")", term->expr, ")");
    emitter.AddStatement(
        absl::StrCat("out", o, "[e] = ", StoreConversion(spec.dtype(), converted), ";"));
  }
  return emitter.statements();
}

// A point's kernel, either template's: what the source's constants and the launch follow from.
struct GemvLayout {
  int64_t split = 1, warps = 1;
  int64_t element_bytes = 0;
  int64_t vector = 1;           // elements of B per load
  int64_t loads_in_flight = 0;  // vectors of B a thread loads before it uses any
  bool x_vector = false;        // A's rows read as vectors of `vector` elements too
  int64_t tile_n = 0;           // outputs per block
  int64_t tiles = 0;            // blocks along N (each split_k blocks)
  int64_t m_per_pass = 1, passes = 1;
  int64_t data_registers = 0;   // a thread's accumulators and registers of loads in flight
  int64_t shared_bytes = 0;     // static shared memory of a block
  // The template's own FORGE_GEMV_* constants, after the shared ones.
  std::vector<std::pair<std::string, std::string>> defines;
};

// A's rows can be read as vectors of `v` elements: row-major, and every row's start aligned.
bool ReadsAVectors(const GemmProduct& p, int64_t v, int64_t element_bytes) {
  return v > 1 && !p.a.transposed && p.a.leading_dim % v == 0 && p.a.batch_stride % v == 0 &&
         p.k % v == 0 && v * element_bytes <= kMaxVectorBytes;
}

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("gemv: ", message));
}

// --- Template "gemv": FFMA in float32 registers, every dtype, both weight layouts (gemv_ffma.cuh).

TemplateSpace FfmaSpace() {
  return {GemvFamily::kTemplateName,
          {{"split_k", {1, 2, 4, 8}, 1},
           {"warps", {2, 4, 8}, 4},
           {"rows", {1, 2, 4, 8}, 2},
           {"vector_width", {1, 2, 4, 8}, 1},
           {"unroll", {1, 2, 4, 8}, 2},
           {"m_per_pass", {1, 2, 4, 8, 16}, 1}}};
}

std::string FfmaObstacle(const GemvTask& /*analysis*/) { return ""; }

// Every row of A in one pass (a second pass would read W again, and W is larger than L2), 4
// outputs per warp from M = 4 on (each vector of A read from L1 then serves 4 of W's: at M = 8
// with 2, A's loads come near L1's bandwidth), the widest valid vector, then fewer outputs per
// warp and loads in flight until the point fits the register budget.
std::vector<std::map<std::string, int64_t>> FfmaDefaults(const GemvTask& analysis) {
  const int64_t m = analysis.product.m;
  int64_t pass = 1;
  while (pass < m) pass *= 2;
  const int64_t preferred_rows = m >= 4 ? 4 : 2;
  std::vector<std::map<std::string, int64_t>> defaults = {
      {{"m_per_pass", pass}, {"rows", preferred_rows}}};
  for (int64_t rows : {preferred_rows, int64_t{2}, int64_t{1}}) {
    for (int64_t width : {8, 4, 2, 1}) {
      defaults.push_back({{"rows", rows}, {"vector_width", width}});
    }
  }
  return defaults;
}

GemvLayout FfmaLayout(const GemvTask& analysis, const SchedulePoint& point) {
  const GemmProduct& p = analysis.product;
  const auto& params = point.parameters;
  GemvLayout layout;
  const bool b_transposed = p.b.transposed;
  const int64_t rows = params.at("rows"), unroll = params.at("unroll");
  layout.split = params.at("split_k");
  layout.warps = params.at("warps");
  layout.vector = params.at("vector_width");
  layout.m_per_pass = params.at("m_per_pass");
  layout.element_bytes = ElementBytes(p.dtype);
  layout.loads_in_flight = unroll * rows;
  layout.x_vector = b_transposed && ReadsAVectors(p, layout.vector, layout.element_bytes);
  layout.tile_n = b_transposed ? layout.warps * rows : rows * 32 * layout.vector;
  layout.tiles = CeilDiv(p.n, layout.tile_n);
  layout.passes = CeilDiv(p.m, layout.m_per_pass);
  const int64_t accumulators = b_transposed ? rows * layout.m_per_pass
                                            : rows * layout.vector * layout.m_per_pass;
  layout.data_registers =
      accumulators + unroll * rows * CeilDiv(layout.vector * layout.element_bytes, 4);
  layout.shared_bytes = layout.m_per_pass * layout.tile_n * 4;
  layout.defines = {{"UNROLL", absl::StrCat(unroll)}, {"ROWS", absl::StrCat(rows)}};
  return layout;
}

absl::Status FfmaCheck(const GemvTask& analysis, const GemvLayout& l,
                       const SchedulePoint& /*point*/) {
  const GemmProduct& p = analysis.product;
  const bool b_transposed = p.b.transposed;
  if (l.vector * l.element_bytes > kMaxVectorBytes) {
    return Invalid(absl::StrCat("vector_width ", l.vector, " of ", l.element_bytes,
                                "-byte elements exceeds a 16-byte load"));
  }
  if (l.vector > 1) {
    const std::pair<const char*, int64_t> counts[] = {
        {b_transposed ? "K" : "N", b_transposed ? p.k : p.n},
        {"B's leading dimension", p.b.leading_dim},
        {"B's batch stride", p.b.batch_stride}};
    for (const auto& [what, count] : counts) {
      if (count % l.vector != 0) {
        return Invalid(absl::StrCat("vector_width ", l.vector, " does not divide ", what, " (",
                                    count, "): the weight's vectors would be misaligned"));
      }
    }
  }
  if (l.m_per_pass > 1 && l.m_per_pass >= 2 * p.m) {
    return Invalid(absl::StrCat("m_per_pass ", l.m_per_pass, " for M = ", p.m,
                                ": a smaller pass covers every row"));
  }
  // Every lane (W[n, k]) or warp (W[k, n]) of every block of the cluster must get some of K.
  const int64_t workers = b_transposed ? 32 : l.warps;
  const int64_t steps = b_transposed ? p.k / l.vector : p.k;
  if (CeilDiv(steps, l.split) < workers) {
    return Invalid(absl::StrCat(
        "split_k ", l.split, " leaves ", b_transposed ? "lanes" : "warps", " idle: K = ", p.k,
        " gives each block ", CeilDiv(steps, l.split), b_transposed ? " vectors" : " rows",
        " for ", workers));
  }
  return absl::OkStatus();
}

// --- Template "gemv_mma": mma.sync on tensor cores, float16 / bfloat16 (gemv_mma.cuh).

// The mma's shape along W in each layout: W[n, k] puts 16 of W's rows on the mma's M side and
// takes K in steps of 32 (two k16 mmas per 16-byte load); W[k, n] puts 8 of W's columns on its N
// side, 8 mmas per 64-column tile, and takes K in steps of 16.
struct MmaShape {
  int64_t tile_n;        // outputs of one tile of W
  int64_t step_k;        // elements of K per step
  int64_t accumulators;  // per lane per tile and n-tile of A
  int64_t loads;         // 16-byte loads of W per lane per tile and step
  int64_t a_words;       // words of A per lane per step and n-tile of A
};
constexpr MmaShape kMmaRowsAlongK = {16, 32, 4, 2, 4};
constexpr MmaShape kMmaColumnsAlongN = {64, 16, 32, 4, 4};
constexpr int64_t kMmaColumns = 8;  // rows of A per mma with W[n, k] (its n-tile)

const MmaShape& MmaShapeOf(const GemmProduct& p) {
  return p.b.transposed ? kMmaRowsAlongK : kMmaColumnsAlongN;
}

TemplateSpace MmaSpace() {
  return {GemvFamily::kMmaTemplateName,
          {{"split_k", {1, 2, 4, 8}, 1},
           {"warps", {1, 2, 4, 8}, 4},
           {"tiles", {1, 2, 4}, 1},
           {"unroll", {1, 2, 4, 8}, 4},
           {"l2_prefetch", {0, 1}, 0}}};
}

std::string MmaObstacle(const GemvTask& analysis) {
  const GemmProduct& p = analysis.product;
  if (p.dtype != forge::v1::DTYPE_FLOAT16 && p.dtype != forge::v1::DTYPE_BFLOAT16) {
    return absl::StrCat("the mma template multiplies float16 or bfloat16 on tensor cores, not ",
                        DTypeName(p.dtype), " (template gemv runs it)");
  }
  // W's 16-byte vectors run along its contiguous extent.
  const int64_t extent = p.b.transposed ? p.k : p.n;
  if (extent % 8 != 0 || p.b.leading_dim % 8 != 0 || p.b.batch_stride % 8 != 0) {
    return absl::StrCat("the mma template loads W in 16-byte vectors: ", p.b.transposed ? "K" : "N",
                        " (", extent, "), B's leading dimension (", p.b.leading_dim,
                        ") and batch stride (", p.b.batch_stride,
                        ") must be multiples of 8 (template gemv runs it)");
  }
  return "";
}

// Four steps of K in flight per warp over one tile, then fewer while K's share leaves warps idle
// or the registers run out.
std::vector<std::map<std::string, int64_t>> MmaDefaults(const GemvTask& /*analysis*/) {
  return {{},
          {{"unroll", 4}},
          {{"unroll", 2}},
          {{"unroll", 1}},
          {{"warps", 2}, {"unroll", 1}},
          {{"warps", 1}, {"unroll", 1}}};
}

GemvLayout MmaLayout(const GemvTask& analysis, const SchedulePoint& point) {
  const GemmProduct& p = analysis.product;
  const MmaShape& shape = MmaShapeOf(p);
  const auto& params = point.parameters;
  GemvLayout layout;
  const int64_t tiles = params.at("tiles"), unroll = params.at("unroll");
  // W[n, k]: A's rows in n-tiles of 8; W[k, n]: in one m16 tile.
  const int64_t n_tiles = p.b.transposed ? CeilDiv(p.m, kMmaColumns) : 1;
  layout.split = params.at("split_k");
  layout.warps = params.at("warps");
  layout.element_bytes = ElementBytes(p.dtype);
  layout.vector = kMaxVectorBytes / layout.element_bytes;
  layout.loads_in_flight = unroll * tiles * shape.loads;
  layout.x_vector =
      ReadsAVectors(p, p.b.transposed ? layout.vector : 2, layout.element_bytes);
  layout.tile_n = shape.tile_n * tiles;
  layout.tiles = CeilDiv(p.n, layout.tile_n);
  layout.m_per_pass = p.m;
  layout.passes = 1;
  layout.data_registers = shape.accumulators * tiles * n_tiles + 4 * layout.loads_in_flight +
                          shape.a_words * unroll * n_tiles;
  // `part` and, with several warps, each warp's own sums before they are added in warp order.
  layout.shared_bytes = (layout.warps > 1 ? layout.warps + 1 : 1) * p.m * layout.tile_n * 4;
  layout.defines = {{"MMA_BF16", p.dtype == forge::v1::DTYPE_BFLOAT16 ? "1" : "0"},
                    {"TILES", absl::StrCat(tiles)},
                    {"N_TILES", absl::StrCat(n_tiles)},
                    {"UNROLL", absl::StrCat(unroll)},
                    {"L2_PREFETCH", absl::StrCat(params.at("l2_prefetch"))}};
  return layout;
}

absl::Status MmaCheck(const GemvTask& analysis, const GemvLayout& l, const SchedulePoint& point) {
  const GemmProduct& p = analysis.product;
  const MmaShape& shape = MmaShapeOf(p);
  const int64_t tiles = point.parameters.at("tiles");
  const int64_t unroll = point.parameters.at("unroll");
  if (tiles > 1 && shape.tile_n * (tiles / 2) >= p.n) {
    return Invalid(absl::StrCat("tiles ", tiles, " of ", shape.tile_n, " outputs for N = ", p.n,
                                ": fewer tiles per warp cover every output"));
  }
  // Each warp of every block of the cluster takes `unroll` steps of K at a time: it must get
  // some.
  const int64_t per_rank = CeilDiv(CeilDiv(p.k, shape.step_k), l.split);
  if (CeilDiv(per_rank, unroll) < l.warps) {
    return Invalid(absl::StrCat("split_k ", l.split, " with ", l.warps, " warps and unroll ",
                                unroll, " leaves warps idle: K = ", p.k, " gives each block ",
                                per_rank, " steps of ", shape.step_k));
  }
  return absl::OkStatus();
}

// The family's templates: each one's space, what keeps it from a task, its defaults, layout,
// constraints and kernel body.
struct GemvTemplate {
  absl::string_view name;
  TemplateSpace (*space)();
  // Why the template cannot run the task at any point; "" when it can.
  std::string (*obstacle)(const GemvTask&);
  // Overrides of the space's defaults: the first is applied, then the first of the others that
  // gives a valid point.
  std::vector<std::map<std::string, int64_t>> (*defaults)(const GemvTask&);
  GemvLayout (*layout)(const GemvTask&, const SchedulePoint&);
  // The template's own constraints (the shared ones: ValidateLayout).
  absl::Status (*check)(const GemvTask&, const GemvLayout&, const SchedulePoint&);
  const char* body;
  int min_capability;  // the oldest compute capability the body compiles for
};

const GemvTemplate kTemplates[] = {
    {GemvFamily::kTemplateName, FfmaSpace, FfmaObstacle, FfmaDefaults, FfmaLayout, FfmaCheck,
     gemv::kGemvFfmaBody, 0},
    {GemvFamily::kMmaTemplateName, MmaSpace, MmaObstacle, MmaDefaults, MmaLayout, MmaCheck,
     gemv::kGemvMmaBody, 80},
};

const GemvTemplate* FindTemplate(absl::string_view name) {
  for (const GemvTemplate& entry : kTemplates) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

absl::StatusOr<const GemvTemplate*> TemplateOf(const GemvTask& analysis,
                                               const SchedulePoint& point) {
  const GemvTemplate* entry = FindTemplate(point.template_name);
  if (entry == nullptr) {
    return Invalid(absl::StrCat("no template '", point.template_name, "'"));
  }
  if (const std::string obstacle = entry->obstacle(analysis); !obstacle.empty()) {
    return Invalid(obstacle);
  }
  return entry;
}

absl::Status ValidateLayout(const GemvTask& analysis, const SchedulePoint& point) {
  absl::StatusOr<const GemvTemplate*> entry = TemplateOf(analysis, point);
  if (!entry.ok()) return entry.status();
  if (absl::Status status = CheckPointInSpace((*entry)->space(), point); !status.ok()) {
    return status;
  }
  const GemmProduct& p = analysis.product;
  const GemvLayout l = (*entry)->layout(analysis, point);
  if (absl::Status status = (*entry)->check(analysis, l, point); !status.ok()) return status;
  if (l.data_registers > kMaxDataRegisters) {
    return Invalid(absl::StrCat(l.data_registers,
                                " registers of accumulators and loads in flight a thread exceed ",
                                kMaxDataRegisters, " (the kernel would spill)"));
  }
  if (l.shared_bytes > kMaxStaticSharedBytes) {
    return Invalid(absl::StrCat("the block's sums (", l.m_per_pass, " rows x ", l.tile_n,
                                " outputs) need ", l.shared_bytes,
                                " bytes of shared memory, more than 48 KiB"));
  }
  if (l.tiles * l.split > kMaxGridBlocks || p.batch > kMaxGridYZ) {
    return Invalid(absl::StrCat("the grid (", l.tiles * l.split, " x ", p.batch,
                                ") exceeds CUDA's limits"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GemvFamily::Applies(const KernelTask& task) const {
  absl::StatusOr<GemvTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  // Emitting the epilogue once proves every node after the product is expressible.
  return EpilogueBody(*analysis).status();
}

absl::StatusOr<std::vector<TemplateSpace>> GemvFamily::ScheduleSpace(
    const KernelTask& task) const {
  if (absl::Status status = Applies(task); !status.ok()) return status;
  absl::StatusOr<GemvTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  std::vector<TemplateSpace> spaces;
  for (const GemvTemplate& entry : kTemplates) {
    if (!entry.obstacle(*analysis).empty()) continue;
    TemplateSpace space = entry.space();
    const std::vector<std::map<std::string, int64_t>> defaults = entry.defaults(*analysis);
    auto apply = [&space](const std::map<std::string, int64_t>& values) {
      for (ScheduleParameter& parameter : space.parameters) {
        const auto value = values.find(parameter.name);
        if (value != values.end()) parameter.default_value = value->second;
      }
    };
    if (!defaults.empty()) apply(defaults.front());
    for (size_t i = 1; i < defaults.size(); ++i) {
      SchedulePoint point = DefaultPoint(space);
      for (const auto& [name, value] : defaults[i]) point.parameters[name] = value;
      if (ValidateLayout(*analysis, point).ok()) {
        apply(defaults[i]);
        break;
      }
    }
    spaces.push_back(std::move(space));
  }
  return spaces;
}

absl::Status GemvFamily::Validate(const KernelTask& task, const SchedulePoint& point) const {
  absl::StatusOr<GemvTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  return ValidateLayout(*analysis, point);
}

absl::StatusOr<LaunchPlan> GemvFamily::Plan(const KernelTask& task,
                                            const SchedulePoint& point) const {
  absl::StatusOr<GemvTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  if (absl::Status status = ValidateLayout(*analysis, point); !status.ok()) return status;
  const GemvLayout l = FindTemplate(point.template_name)->layout(*analysis, point);
  LaunchPlan plan;
  plan.kernel_name = kKernelName;
  plan.launch.grid = {static_cast<uint32_t>(l.tiles * l.split),
                      static_cast<uint32_t>(analysis->product.batch), 1};
  plan.launch.block = {static_cast<uint32_t>(32 * l.warps), 1, 1};
  plan.template_name = point.template_name;
  plan.parameters = point.parameters;
  plan.generator_version = std::string(generator_version());
  // The weight is the streamed tensor: each thread keeps its loads of it in flight.
  plan.hints.vector_width = l.vector;
  plan.hints.unrolled_elements = l.vector * l.loads_in_flight;
  plan.hints.bytes_in_flight_per_thread =
      static_cast<double>(l.vector * l.loads_in_flight * l.element_bytes);
  return plan;
}

absl::StatusOr<std::string> GemvFamily::Emit(const KernelTask& task, const LaunchPlan& plan) const {
  absl::StatusOr<GemvTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  const SchedulePoint point{plan.template_name, plan.parameters};
  if (absl::Status status = ValidateLayout(*analysis, point); !status.ok()) return status;
  absl::StatusOr<std::vector<std::string>> epilogue = EpilogueBody(*analysis);
  if (!epilogue.ok()) return epilogue.status();
  const GemmProduct& p = analysis->product;
  const GemvTemplate& entry = *FindTemplate(point.template_name);
  const GemvLayout l = entry.layout(*analysis, point);
  std::vector<std::pair<std::string, std::string>> defines = {
      {"T", *StorageType(p.dtype)},
      {"M", absl::StrCat(p.m)},
      {"N", absl::StrCat(p.n, "LL")},
      {"K", absl::StrCat(p.k, "LL")},
      {"BATCH", absl::StrCat(p.batch)},
      {"LDA", absl::StrCat(p.a.leading_dim, "LL")},
      {"BSA", absl::StrCat(p.a.batch_stride, "LL")},
      {"A_T", p.a.transposed ? "1" : "0"},
      {"LDB", absl::StrCat(p.b.leading_dim, "LL")},
      {"BSB", absl::StrCat(p.b.batch_stride, "LL")},
      {"B_T", p.b.transposed ? "1" : "0"},
      {"X_VECTOR", l.x_vector ? "1" : "0"},
      {"VEC", absl::StrCat(l.vector)},
      {"WARPS", absl::StrCat(l.warps)},
      {"SPLIT", absl::StrCat(l.split)},
      {"MP", absl::StrCat(l.m_per_pass)},
      {"TILE_N", absl::StrCat(l.tile_n)}};
  defines.insert(defines.end(), l.defines.begin(), l.defines.end());
  std::string source(KernelPrelude());
  absl::StrAppend(&source, "\n// Task ", task.digest(), ": ", p.batch, " x [", p.m, " x ", p.k,
                  "] x [", p.k, " x ", p.n, "] ", DTypeName(p.dtype), ", W stored ",
                  p.b.transposed ? "[n, k]" : "[k, n]", "; ", entry.name);
  for (const auto& [name, value] : point.parameters) {
    absl::StrAppend(&source, ", ", name, " ", value);
  }
  absl::StrAppend(&source, ".\n");
  for (const auto& [name, value] : defines) {
    absl::StrAppend(&source, "#define FORGE_GEMV_", name, " ", value, "\n");
  }
  absl::StrAppend(&source, gemv::kGemvBody, entry.body);
  // A minimum of one block per SM: without it ptxas caps small blocks at 32 registers (as if 32
  // of them shared an SM) and spills; the registers the point needs set its occupancy.
  absl::StrAppend(&source, "\nextern \"C\" __global__ void __launch_bounds__(", 32 * l.warps,
                  ", 1) ",
                  l.split > 1 ? absl::StrCat("__cluster_dims__(", l.split, ", 1, 1) ") : "",
                  kKernelName, "(", KernelParameterList(task), ") {\n");
  absl::StrAppend(&source, "  forge_gemv_run(in", p.a.input, ", in", p.b.input,
                  ", [=](float acc, long long e) {\n");
  for (const std::string& statement : *epilogue) absl::StrAppend(&source, "    ", statement, "\n");
  absl::StrAppend(&source, "  });\n}\n");
  return source;
}

absl::Status GemvFamily::SupportsArch(const KernelTask& /*task*/, const SchedulePoint& point,
                                      absl::string_view target_arch) const {
  absl::StatusOr<int> capability = ComputeCapabilityOf(target_arch);
  if (!capability.ok()) return capability.status();
  const GemvTemplate* entry = FindTemplate(point.template_name);
  if (entry != nullptr && *capability < entry->min_capability) {
    return absl::FailedPreconditionError(
        absl::StrCat("gemv template ", entry->name, " needs sm_", entry->min_capability,
                     " or newer (mma.sync on float16 / bfloat16), not ", target_arch));
  }
  const auto split = point.parameters.find("split_k");
  if (split != point.parameters.end() && split->second > 1 && *capability < 90) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gemv with split_k > 1 needs thread block clusters (sm_90 or newer), not ", target_arch));
  }
  return absl::OkStatus();
}

}  // namespace forge::codegen
