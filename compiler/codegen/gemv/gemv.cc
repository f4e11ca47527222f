#include "compiler/codegen/gemv/gemv.h"

#include <algorithm>
#include <cstdint>
#include <limits>
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
constexpr int64_t kMaxStaticSharedBytes = 48 * 1024;
constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxGridY = 65535;

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

TemplateSpace Space() {
  return {GemvFamily::kTemplateName,
          {{"split_k", {1, 2, 4, 8}, 1},
           {"warps", {2, 4, 8}, 4},
           {"rows", {1, 2, 4, 8}, 2},
           {"vector_width", {1, 2, 4, 8}, 1},
           {"unroll", {1, 2, 4}, 2},
           {"m_per_pass", {1, 2, 4, 8, 16}, 1}}};
}

// A point's kernel: what the source's constants and the launch follow from.
struct GemvLayout {
  bool b_transposed = false;  // W[n, k]
  bool x_vector = false;
  int64_t split = 1, warps = 1, rows = 1, vector = 1, unroll = 1, m_per_pass = 1;
  int64_t element_bytes = 0;
  int64_t tile_n = 0;  // outputs per block
  int64_t tiles = 0;   // blocks along N (each split_k blocks)
  int64_t passes = 0;
  int64_t accumulators = 0;  // per thread
  int64_t load_registers = 0;
};

GemvLayout LayoutOf(const GemvTask& analysis, const SchedulePoint& point) {
  const GemmProduct& p = analysis.product;
  const auto& params = point.parameters;
  GemvLayout layout;
  layout.b_transposed = p.b.transposed;
  layout.split = params.at("split_k");
  layout.warps = params.at("warps");
  layout.rows = params.at("rows");
  layout.vector = params.at("vector_width");
  layout.unroll = params.at("unroll");
  layout.m_per_pass = params.at("m_per_pass");
  layout.element_bytes = ElementBytes(p.dtype);
  layout.tile_n = layout.b_transposed ? layout.warps * layout.rows
                                      : layout.rows * 32 * layout.vector;
  layout.tiles = CeilDiv(p.n, layout.tile_n);
  layout.passes = CeilDiv(p.m, layout.m_per_pass);
  layout.accumulators = layout.b_transposed ? layout.rows * layout.m_per_pass
                                            : layout.rows * layout.vector * layout.m_per_pass;
  layout.load_registers =
      layout.unroll * layout.rows * CeilDiv(layout.vector * layout.element_bytes, 4);
  const int64_t v = layout.vector;
  layout.x_vector = layout.b_transposed && v > 1 && !p.a.transposed && p.a.leading_dim % v == 0 &&
                    p.a.batch_stride % v == 0 && p.k % v == 0 &&
                    v * layout.element_bytes <= kMaxVectorBytes;
  return layout;
}

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("gemv: ", message));
}

absl::Status ValidateLayout(const GemvTask& analysis, const SchedulePoint& point) {
  if (absl::Status status = CheckPointInSpace(Space(), point); !status.ok()) return status;
  const GemmProduct& p = analysis.product;
  const GemvLayout l = LayoutOf(analysis, point);
  if (l.vector * l.element_bytes > kMaxVectorBytes) {
    return Invalid(absl::StrCat("vector_width ", l.vector, " of ", l.element_bytes,
                                "-byte elements exceeds a 16-byte load"));
  }
  if (l.vector > 1) {
    const int64_t extent = l.b_transposed ? p.k : p.n;
    const std::pair<const char*, int64_t> counts[] = {
        {l.b_transposed ? "K" : "N", extent},
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
  if (l.accumulators + l.load_registers > kMaxDataRegisters) {
    return Invalid(absl::StrCat(l.accumulators, " accumulators and ", l.load_registers,
                                " registers of loads in flight a thread exceed ",
                                kMaxDataRegisters, " (the kernel would spill)"));
  }
  // Every lane (W[n, k]) or warp (W[k, n]) of every block of the cluster must get some of K.
  const int64_t workers = l.b_transposed ? 32 : l.warps;
  const int64_t steps = l.b_transposed ? p.k / l.vector : p.k;
  if (CeilDiv(steps, l.split) < workers) {
    return Invalid(absl::StrCat(
        "split_k ", l.split, " leaves ", l.b_transposed ? "lanes" : "warps", " idle: K = ", p.k,
        " gives each block ", CeilDiv(steps, l.split), l.b_transposed ? " vectors" : " rows",
        " for ", workers));
  }
  if (l.m_per_pass * l.tile_n * 4 > kMaxStaticSharedBytes) {
    return Invalid(absl::StrCat("a pass of ", l.m_per_pass, " rows x ", l.tile_n,
                                " outputs needs more than 48 KiB of shared memory"));
  }
  if (l.tiles * l.split > kMaxGridX || p.batch > kMaxGridY) {
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
  TemplateSpace space = Space();
  auto parameter = [&](absl::string_view name) -> ScheduleParameter& {
    return *std::find_if(space.parameters.begin(), space.parameters.end(),
                         [&](const ScheduleParameter& p) { return p.name == name; });
  };
  // Default: every row of A in one pass (a second pass would read W again, and W is larger than
  // L2), 4 outputs per warp from M = 4 on (each vector of A read from L1 then serves 4 of W's:
  // at M = 8 with 2, A's loads come near L1's bandwidth), the widest valid vector, then fewer
  // outputs per warp and loads in flight until the point fits the register budget.
  const int64_t m = analysis->product.m;
  int64_t pass = 1;
  while (pass < m) pass *= 2;
  parameter("m_per_pass").default_value = pass;
  parameter("rows").default_value = m >= 4 ? 4 : 2;
  for (int64_t rows : {parameter("rows").default_value, int64_t{2}, int64_t{1}}) {
    for (int64_t width : {8, 4, 2, 1}) {
      SchedulePoint point = DefaultPoint(space);
      point.parameters["rows"] = rows;
      point.parameters["vector_width"] = width;
      if (ValidateLayout(*analysis, point).ok()) {
        parameter("rows").default_value = rows;
        parameter("vector_width").default_value = width;
        return std::vector<TemplateSpace>{space};
      }
    }
  }
  return std::vector<TemplateSpace>{space};
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
  const GemvLayout l = LayoutOf(*analysis, point);
  LaunchPlan plan;
  plan.kernel_name = kKernelName;
  plan.launch.grid = {static_cast<uint32_t>(l.tiles * l.split),
                      static_cast<uint32_t>(analysis->product.batch), 1};
  plan.launch.block = {static_cast<uint32_t>(32 * l.warps), 1, 1};
  plan.template_name = kTemplateName;
  plan.parameters = point.parameters;
  plan.generator_version = std::string(generator_version());
  // The weight is the streamed tensor: each thread keeps unroll x rows vectors of it in flight.
  plan.hints.vector_width = l.vector;
  plan.hints.unrolled_elements = l.vector * l.unroll * l.rows;
  plan.hints.bytes_in_flight_per_thread =
      static_cast<double>(l.vector * l.unroll * l.rows * l.element_bytes);
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
  const GemvLayout l = LayoutOf(*analysis, point);
  const std::pair<const char*, std::string> defines[] = {
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
      {"B_T", l.b_transposed ? "1" : "0"},
      {"X_VECTOR", l.x_vector ? "1" : "0"},
      {"VEC", absl::StrCat(l.vector)},
      {"UNROLL", absl::StrCat(l.unroll)},
      {"ROWS", absl::StrCat(l.rows)},
      {"WARPS", absl::StrCat(l.warps)},
      {"SPLIT", absl::StrCat(l.split)},
      {"MP", absl::StrCat(l.m_per_pass)},
      {"TILE_N", absl::StrCat(l.tile_n)}};
  std::string source(KernelPrelude());
  absl::StrAppend(&source, "\n// Task ", task.digest(), ": ", p.batch, " x [", p.m, " x ", p.k,
                  "] x [", p.k, " x ", p.n, "] ", DTypeName(p.dtype), ", W stored ",
                  l.b_transposed ? "[n, k]" : "[k, n]", "; gemv, split_k ", l.split, ", ",
                  l.warps, " warps, rows ", l.rows, ", vector ", l.vector, ", unroll ", l.unroll,
                  ", m_per_pass ", l.m_per_pass, ".\n");
  for (const auto& [name, value] : defines) {
    absl::StrAppend(&source, "#define FORGE_GEMV_", name, " ", value, "\n");
  }
  absl::StrAppend(&source, gemv::kGemvBody);
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
  const auto split = point.parameters.find("split_k");
  if (split != point.parameters.end() && split->second > 1 && *capability < 90) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gemv with split_k > 1 needs thread block clusters (sm_90 or newer), not ", target_arch));
  }
  return absl::OkStatus();
}

}  // namespace forge::codegen
