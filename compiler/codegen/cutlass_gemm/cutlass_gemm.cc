#include "compiler/codegen/cutlass_gemm/cutlass_gemm.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "compiler/codegen/cuda_expr.h"
#include "compiler/codegen/cutlass_gemm/cuda_sources.h"
#include "compiler/codegen/gemm_analysis/gemm_analysis.h"

namespace forge::codegen {
namespace {

using forge::v1::Argument;
using forge::v1::DType;
using forge::v1::KernelTask;
using forge::v1::Node;
using forge::v1::TensorSpec;

// ---- The epilogue ----

// The scalar parameters of a parameterized activation, compiled into the configuration as
// FORGE_ACTIVATION_P0 / _P1 (cutlass_common.cuh): leaky_relu's negative slope (P0); the clamps'
// lower and upper bounds (P0, P1; an absent bound is infinite).
using ActivationParameters = std::pair<double, double>;

// A Scalar argument's value: `fallback` when absent or None; nullopt when it is not a number (a
// tensor bound).
std::optional<double> ScalarArgument(const Node& node, absl::string_view name, double fallback) {
  const Argument* argument = FindArgument(node, name);
  if (argument == nullptr || argument->has_none()) return fallback;
  if (argument->has_float_value()) return argument->float_value();
  if (argument->has_int_value()) return static_cast<double>(argument->int_value());
  return std::nullopt;
}

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The bounds named `low_name` and `high_name` (each defaulting as given), as P0 and P1.
std::optional<ActivationParameters> Bounds(const Node& node, absl::string_view low_name,
                                           absl::string_view high_name, double low, double high) {
  const std::optional<double> lower = ScalarArgument(node, low_name, low);
  const std::optional<double> upper = ScalarArgument(node, high_name, high);
  if (!lower || !upper) return std::nullopt;
  return ActivationParameters{*lower, *upper};
}

std::optional<ActivationParameters> LeakyReluParameters(const Node& node) {
  const std::optional<double> slope = ScalarArgument(node, "negative_slope", 0.01);
  if (!slope) return std::nullopt;
  return ActivationParameters{*slope, 0};
}
std::optional<ActivationParameters> HardtanhParameters(const Node& node) {
  return Bounds(node, "min_val", "max_val", -1, 1);
}
std::optional<ActivationParameters> Relu6Parameters(const Node&) {
  return ActivationParameters{0, 6};
}
// clamp, clamp_min and clamp_max: an absent bound is infinite.
std::optional<ActivationParameters> ClampParameters(const Node& node) {
  return Bounds(node, "min", "max", -kInfinity, kInfinity);
}

// An activation the templates apply: the node that asks for it and the CUDA functor template.
struct Activation {
  const char* name;         // in kernel names
  const char* op;           // the node's op, without "aten::"; "" for the identity
  const char* approximate;  // gelu's `approximate` ("none" when absent); nullptr: not gelu
  const char* functor;      // the epilogue functor template (cutlass_common.cuh or CUTLASS's)
  // Its scalar parameters from the node (nullptr: none; nullopt: not expressible, e.g. a tensor
  // bound).
  std::optional<ActivationParameters> (*parameters)(const Node&) = nullptr;
};
constexpr Activation kIdentity = {"", "", nullptr, "cutlass::epilogue::thread::Identity"};
constexpr Activation kActivations[] = {
    {"relu", "relu", nullptr, "cutlass::epilogue::thread::ReLu"},
    {"gelu", "gelu", "none", "cutlass::epilogue::thread::GELU"},  // erf: exact (erff)
    {"gelu_tanh", "gelu", "tanh", "forge_cutlass::GeluTanh"},
    {"silu", "silu", nullptr, "forge_cutlass::Silu"},
    {"sigmoid", "sigmoid", nullptr, "forge_cutlass::Sigmoid"},
    {"tanh", "tanh", nullptr, "forge_cutlass::Tanh"},
    {"leaky_relu", "leaky_relu", nullptr, "forge_cutlass::LeakyRelu", LeakyReluParameters},
    {"hardtanh", "hardtanh", nullptr, "forge_cutlass::Clamp", HardtanhParameters},
    {"relu6", "relu6", nullptr, "forge_cutlass::Clamp", Relu6Parameters},
    {"clamp", "clamp", nullptr, "forge_cutlass::Clamp", ClampParameters},
    {"clamp_min", "clamp_min", nullptr, "forge_cutlass::Clamp", ClampParameters},
    {"clamp_max", "clamp_max", nullptr, "forge_cutlass::Clamp", ClampParameters},
};

// The activation `node` asks for, with its parameters; nullptr when the epilogue has none such.
const Activation* FindActivation(const Node& node,
                                 std::optional<ActivationParameters>* parameters) {
  const absl::string_view op = OpName(node);
  const Argument* approximate = FindArgument(node, "approximate");
  const std::string form = approximate != nullptr ? approximate->string_value() : "none";
  for (const Activation& activation : kActivations) {
    if (op != activation.op) continue;
    if (activation.approximate != nullptr && form != activation.approximate) continue;
    *parameters = std::nullopt;
    if (activation.parameters != nullptr) {
      *parameters = activation.parameters(node);
      if (!*parameters) return nullptr;
    }
    return &activation;
  }
  return nullptr;
}

// A row-major matrix operand of the epilogue (C, D): its buffer and strides.
struct RowMajorOperand {
  int buffer = -1;
  int64_t leading_dim = 0;
  int64_t batch_stride = 0;
};

// What the templates need to know about a task, found once.
struct CutlassAnalysis {
  GemmProduct product;
  double alpha = 1;
  int bias_input = -1;
  RowMajorOperand residual;  // buffer -1: none
  const Activation* activation = &kIdentity;
  std::optional<ActivationParameters> activation_parameters;  // when the activation has some
  RowMajorOperand output;
  // A gated product (sm90_gated): `product` is A x B_gate, `up_b` B_up, `activation` the gate's.
  bool gated = false;
  GemmMatrix up_b;
  // Why the task's epilogue cannot be expressed; empty when it can.
  std::string obstacle;
};

// The scalar of a mul / div node's `other` argument; nullopt when it is a tensor.
std::optional<double> ScalarOther(const Node& node) {
  const Argument* other = FindArgument(node, "other");
  if (other == nullptr) return std::nullopt;
  if (other->has_float_value()) return other->float_value();
  if (other->has_int_value()) return static_cast<double>(other->int_value());
  return std::nullopt;
}

// `spec` as a row-major [batch x] m x n operand with leading dimension n, when it is a contiguous
// tensor of `elements` elements of `dtype` at storage offset 0.
std::optional<RowMajorOperand> ContiguousOperand(const TensorSpec& spec, int buffer,
                                                 const GemmProduct& product) {
  if (spec.dtype() != product.dtype || !IsContiguous(spec) || spec.storage_offset() != 0 ||
      NumElements(spec.shape()) != product.output_elements()) {
    return std::nullopt;
  }
  return RowMajorOperand{buffer, product.n, product.batch > 1 ? product.m * product.n : 0};
}

// Folds the epilogue after the product (alpha, bias, residual, activation, in that order) into
// `analysis`; returns the last value folded.
std::string FoldEpilogue(const GroupView& view, const Node& matmul, CutlassAnalysis& analysis) {
  const GemmProduct& product = analysis.product;
  const std::string product_value = matmul.outputs(0);
  const absl::string_view op = OpName(matmul);
  if (op == "linear" || op == "addmm") {
    const std::string addend = TensorArgument(matmul, op == "linear" ? "bias" : "self");
    if (op == "addmm" && (!IsUnitScalar(matmul, "beta") || !IsUnitScalar(matmul, "alpha"))) {
      analysis.obstacle = absl::StrCat(DescribeNode(matmul), " scales by beta or alpha");
      return product_value;
    }
    if (!addend.empty()) {
      if (const std::optional<int> bias = BiasInput(view, addend, product.n, product.dtype)) {
        analysis.bias_input = *bias;
      } else if (const int position = view.InputPosition(addend);
                 position >= 0 && op == "addmm") {
        if (auto residual = ContiguousOperand(view.InputSpec(position), position, product)) {
          analysis.residual = *residual;
        }
      }
      if (analysis.bias_input < 0 && analysis.residual.buffer < 0) {
        analysis.obstacle =
            absl::StrCat("the addend '", addend, "' of ", DescribeNode(matmul),
                         " is neither a contiguous bias [", product.n,
                         "] nor a contiguous residual of the product's shape and dtype");
        return product_value;
      }
    }
  }
  std::string value = product_value;
  const std::vector<int64_t> shape = view.Shape(value);
  const forge::v1::Graph& group = view.group();
  while (const Node* next = SoleConsumer(group, value)) {
    if (view.DType(next->outputs(0)) != product.dtype || view.Shape(next->outputs(0)) != shape) {
      break;
    }
    const absl::string_view next_op = OpName(*next);
    const bool nothing_added = analysis.bias_input < 0 && analysis.residual.buffer < 0;
    const bool no_activation = analysis.activation == &kIdentity;
    const std::optional<double> scalar = ScalarOther(*next);
    if ((next_op == "mul" || next_op == "div") && nothing_added && no_activation && scalar &&
        TensorArgument(*next, "self") == value && (next_op == "mul" || *scalar != 0)) {
      analysis.alpha = next_op == "mul" ? analysis.alpha * *scalar : analysis.alpha / *scalar;
    } else if (next_op == "add" && no_activation && IsUnitScalar(*next, "alpha")) {
      const std::string self = TensorArgument(*next, "self");
      const std::string addend = self == value ? TensorArgument(*next, "other") : self;
      const int position = view.InputPosition(addend);
      std::optional<int> bias;
      std::optional<RowMajorOperand> residual;
      if (analysis.bias_input < 0) bias = BiasInput(view, addend, product.n, product.dtype);
      if (!bias && analysis.residual.buffer < 0 && position >= 0) {
        residual = ContiguousOperand(view.InputSpec(position), position, product);
      }
      if (bias) {
        analysis.bias_input = *bias;
      } else if (residual) {
        analysis.residual = *residual;
      } else {
        break;
      }
    } else if (const Activation* activation =
                   FindActivation(*next, &analysis.activation_parameters);
               activation != nullptr && no_activation) {
      analysis.activation = activation;
    } else {
      break;
    }
    value = next->outputs(0);
  }
  return value;
}

absl::Status Prefixed(const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("cutlass_gemm: ", status.message()));
}

// The gated product of a group of two products: act(A B_gate) * (A B_up) and nothing after it
// but reshapes; returns the mul's value.
absl::StatusOr<std::string> AnalyzeGated(const GroupView& view, CutlassAnalysis& analysis) {
  absl::StatusOr<GatedProductAnalysis> gated = AnalyzeGatedProduct(view);
  if (!gated.ok()) return gated.status();
  analysis.gated = true;
  analysis.product = gated->product;
  analysis.up_b = gated->up_b;
  analysis.activation = FindActivation(*gated->activation, &analysis.activation_parameters);
  if (analysis.activation == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "the gate's ", DescribeNode(*gated->activation),
        " is not an activation the epilogue has (relu, gelu, silu, sigmoid, tanh, leaky_relu, "
        "hardtanh, relu6, clamp with scalar bounds)"));
  }
  return gated->mul->outputs(0);
}

absl::StatusOr<CutlassAnalysis> Analyze(const KernelTask& task) {
  absl::StatusOr<GroupView> view = GroupView::Create(task);
  if (!view.ok()) return view.status();
  CutlassAnalysis analysis;
  std::string result;
  if (ProductCount(*view) == 2) {
    absl::StatusOr<std::string> gated = AnalyzeGated(*view, analysis);
    if (!gated.ok()) return Prefixed(gated.status());
    result = *gated;
  } else {
    absl::StatusOr<ProductAnalysis> product = AnalyzeProduct(*view, {.broadcast_batch = true});
    if (!product.ok()) return Prefixed(product.status());
    analysis.product = product->product;
    result = FoldEpilogue(*view, *product->matmul, analysis);
    if (!analysis.obstacle.empty()) return Prefixed(absl::UnimplementedError(analysis.obstacle));
  }
  for (const Node* node : RemainingNodes(*view, result)) {
    if (!IsReshape(*node)) {
      return Prefixed(absl::UnimplementedError(absl::StrCat(
          DescribeNode(*node), " is not expressible in a CUTLASS epilogue (supported: ",
          analysis.gated ? "act(A B_gate) * (A B_up)"
                         : "activation(alpha * product + beta * residual + bias[n])",
          ")")));
    }
  }
  if (task.outputs_size() != 1) {
    return Prefixed(absl::UnimplementedError(
        absl::StrCat("the task has ", task.outputs_size(), " outputs; the kernel writes one")));
  }
  const std::optional<RowMajorOperand> output =
      ContiguousOperand(task.outputs(0), task.inputs_size(), analysis.product);
  if (!output) {
    return Prefixed(absl::UnimplementedError(
        "the output is not the product's contiguous row-major result"));
  }
  analysis.output = *output;
  return analysis;
}

// ---- The templates ----

bool Is16Bit(DType dtype) {
  return dtype == forge::v1::DTYPE_BFLOAT16 || dtype == forge::v1::DTYPE_FLOAT16;
}

// The templates of the analysed task, in the order their spaces are offered.
std::vector<const char*> TemplatesFor(const CutlassAnalysis& analysis) {
  if (analysis.gated) return {CutlassGemmFamily::kSm90GatedTemplate};
  if (Is16Bit(analysis.product.dtype)) return {CutlassGemmFamily::kSm90Template};
  return {CutlassGemmFamily::kSm90ThreeTf32Template, CutlassGemmFamily::kSm80Template};
}

TemplateSpace SpaceOf(absl::string_view template_name) {
  if (template_name == CutlassGemmFamily::kSm90Template ||
      template_name == CutlassGemmFamily::kSm90GatedTemplate) {
    return {std::string(template_name),
            {{"tile_m", {64, 128, 256}, 128},
             {"tile_n", {64, 128, 256}, 256},
             {"tile_k", {64}, 64},
             {"cluster_m", {1, 2}, 2},
             {"cluster_n", {1, 2}, 1},
             {"schedule", {0, 1}, 0},
             {"raster", {0, 1, 2}, 0},
             {"swizzle", {1, 2, 4, 8}, 1}}};
  }
  if (template_name == CutlassGemmFamily::kSm90ThreeTf32Template) {
    // The probe's fastest promoted configuration is the default: 128 x 128, cluster 2 x 1.
    return {std::string(template_name),
            {{"tile_m", {128, 256}, 128},
             {"tile_n", {64, 128}, 128},
             {"cluster_m", {1, 2}, 2},
             {"cluster_n", {1, 2}, 1},
             {"raster", {0, 1, 2}, 0},
             {"swizzle", {1, 2, 4, 8}, 1},
             {"promotion", {4, 8}, 4}}};
  }
  std::vector<int64_t> configs(kSm80Configs.size());
  for (size_t i = 0; i < configs.size(); ++i) configs[i] = static_cast<int64_t>(i);
  // The default: 128 x 128 x 32, 3 stages, the fastest of the CUTLASS probe on the H200.
  return {std::string(template_name), {{"config", configs, 7}}};
}

// The leading dimensions and batch strides of every operand, in elements.
std::vector<std::pair<std::string, int64_t>> Strides(const CutlassAnalysis& analysis) {
  const GemmProduct& p = analysis.product;
  std::vector<std::pair<std::string, int64_t>> strides = {
      {"A's leading dimension", p.a.leading_dim}, {"A's batch stride", p.a.batch_stride},
      {"B's leading dimension", p.b.leading_dim}, {"B's batch stride", p.b.batch_stride},
      {"D's leading dimension", analysis.output.leading_dim},
      {"D's batch stride", analysis.output.batch_stride}};
  if (analysis.residual.buffer >= 0) {
    strides.push_back({"C's leading dimension", analysis.residual.leading_dim});
    strides.push_back({"C's batch stride", analysis.residual.batch_stride});
  }
  return strides;
}

// sm80_3xtf32's global access width: 16 bytes when every stride and contiguous extent allows it.
int Sm80Alignment(const CutlassAnalysis& analysis) {
  const GemmProduct& p = analysis.product;
  std::vector<int64_t> counts = {p.a.transposed ? p.m : p.k, p.b.transposed ? p.k : p.n, p.n};
  for (const auto& [what, stride] : Strides(analysis)) counts.push_back(stride);
  const bool aligned =
      std::all_of(counts.begin(), counts.end(), [](int64_t count) { return count % 4 == 0; });
  return aligned ? 4 : 1;
}

// What keeps sm90_gated from running the gated product; empty when nothing does.
std::string GatedObstacle(const CutlassAnalysis& analysis) {
  const GemmProduct& p = analysis.product;
  if (!Is16Bit(p.dtype)) {
    return absl::StrCat("sm90_gated runs bfloat16 and float16 gated products, not ",
                        DTypeName(p.dtype), " (the partitioner forms float32 ones as two GEMM "
                        "tasks)");
  }
  if (analysis.up_b.transposed != p.b.transposed || analysis.up_b.leading_dim != p.b.leading_dim) {
    return "sm90_gated: the up projection's weight is laid out unlike the gate's (one ldb)";
  }
  constexpr int64_t kElementsPer16Bytes = 8;
  // TMA: A's rows and its contiguous extent, and the packed weight's contiguous extent K.
  const int64_t a_contiguous = p.a.transposed ? p.m : p.k;
  for (const auto& [what, count] :
       std::vector<std::pair<std::string, int64_t>>{{"A's leading dimension", p.a.leading_dim},
                                                    {"A's contiguous extent", a_contiguous},
                                                    {"K", p.k}}) {
    if (count % kElementsPer16Bytes != 0) {
      return absl::StrCat("sm90_gated: ", what, " (", count,
                          " elements) is not a multiple of 16 bytes, as TMA needs");
    }
  }
  return "";
}

// What keeps `template_name` from running the task at any point; empty when nothing does.
std::string TemplateObstacle(const CutlassAnalysis& analysis, absl::string_view template_name) {
  const GemmProduct& p = analysis.product;
  if (template_name == CutlassGemmFamily::kSm90GatedTemplate) return GatedObstacle(analysis);
  if (template_name == CutlassGemmFamily::kSm80Template) {
    if (analysis.bias_input >= 0 && analysis.residual.buffer >= 0) {
      return "sm80_3xtf32 adds a bias as its C operand, so not a bias and a residual together";
    }
    return "";
  }
  if (template_name == CutlassGemmFamily::kSm90ThreeTf32Template) {
    // A and B go through the split kernel (any strides); only the TMA epilogue's C and D remain.
    const std::vector<std::pair<std::string, int64_t>> strides = Strides(analysis);
    for (size_t i = 4; i < strides.size(); ++i) {
      if (strides[i].second % 4 != 0) {
        return absl::StrCat("sm90_3xtf32: ", strides[i].first, " (", strides[i].second,
                            " elements) is not a multiple of 16 bytes, as TMA needs");
      }
    }
    return "";
  }
  const int64_t elements_per_16_bytes = 8;
  for (const auto& [what, stride] : Strides(analysis)) {
    if (stride % elements_per_16_bytes != 0) {
      return absl::StrCat("sm90_tma_ws: ", what, " (", stride,
                          " elements) is not a multiple of 16 bytes, as TMA needs");
    }
  }
  if (p.batch > 1 && (p.a.batch_stride == 0 || p.b.batch_stride == 0)) {
    return "sm90_tma_ws: a broadcast batch (batch stride 0) has no TMA descriptor here";
  }
  return "";
}

// The templates that can run the task, or the obstacles of all of them ("; "-joined).
std::vector<const char*> UsableTemplates(const CutlassAnalysis& analysis, std::string* obstacles) {
  std::vector<const char*> usable;
  std::vector<std::string> reasons;
  for (const char* name : TemplatesFor(analysis)) {
    if (std::string obstacle = TemplateObstacle(analysis, name); obstacle.empty()) {
      usable.push_back(name);
    } else {
      reasons.push_back(std::move(obstacle));
    }
  }
  if (obstacles != nullptr) *obstacles = absl::StrJoin(reasons, "; ");
  return usable;
}

// The point-level constraints of sm90_tma_ws (see cutlass_gemm.h).
absl::Status ValidateSm90Point(const SchedulePoint& point) {
  const int64_t tile_m = point.parameters.at("tile_m");
  const int64_t tile_n = point.parameters.at("tile_n");
  const bool pingpong = point.parameters.at("schedule") == 1;
  if (!pingpong && tile_m < 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sm90_tma_ws: the cooperative schedule splits the tile's rows over two consumer warp "
        "groups of 64 rows each: it needs tile_m >= 128, not ", tile_m));
  }
  if (!pingpong && tile_m == 256 && tile_n == 256) {
    return absl::InvalidArgumentError(
        "sm90_tma_ws: a cooperative 256 x 256 tile needs 256 float accumulator registers a "
        "thread, more than a thread has");
  }
  if (pingpong && tile_m > 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sm90_tma_ws: the ping-pong schedule gives each consumer warp group a whole tile: it "
        "needs tile_m <= 128, not ", tile_m));
  }
  if (pingpong && tile_m == 128 && tile_n == 256) {
    return absl::InvalidArgumentError(
        "sm90_tma_ws: a ping-pong 128 x 256 tile needs 256 float accumulator registers a "
        "thread, more than a thread has");
  }
  return absl::OkStatus();
}

absl::Status ValidateAgainst(const CutlassAnalysis& analysis, const SchedulePoint& point) {
  const std::vector<const char*> templates = TemplatesFor(analysis);
  if (std::find(templates.begin(), templates.end(), point.template_name) == templates.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cutlass_gemm: template '", point.template_name, "' does not apply to a ",
        DTypeName(analysis.product.dtype), analysis.gated ? " gated" : "",
        " product (its templates are '",
        absl::StrJoin(templates, "', '"), "')"));
  }
  if (absl::Status status = CheckPointInSpace(SpaceOf(point.template_name), point);
      !status.ok()) {
    return status;
  }
  if (const std::string obstacle = TemplateObstacle(analysis, point.template_name);
      !obstacle.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("cutlass_gemm: ", obstacle));
  }
  if (point.template_name == CutlassGemmFamily::kSm90Template ||
      point.template_name == CutlassGemmFamily::kSm90GatedTemplate) {
    return ValidateSm90Point(point);
  }
  return absl::OkStatus();
}

// ---- Plans ----

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

int64_t DoubleBits(double value) { return std::bit_cast<int64_t>(value); }

// CUTLASS's layout letter of an operand: t (row-major) or n (column-major).
const char* LayoutLetter(bool row_major) { return row_major ? "t" : "n"; }

// The configuration's #defines (what the source depends on), by name, in a fixed order.
using Defines = std::vector<std::pair<std::string, std::string>>;

const char* LayoutTag(bool row_major) {
  return row_major ? "cutlass::layout::RowMajor" : "cutlass::layout::ColumnMajor";
}

// A's and B's CUTLASS layouts: A (m x k) is row-major unless stored transposed; B (k x n) too.
bool ARowMajor(const GemmProduct& p) { return !p.a.transposed; }
bool BRowMajor(const GemmProduct& p) { return !p.b.transposed; }

std::string EpilogueName(const CutlassAnalysis& analysis, bool source_operand) {
  if (analysis.gated) return absl::StrCat("_", analysis.activation->name, "_gated");
  std::vector<std::string> parts;
  if (analysis.bias_input >= 0) parts.push_back("bias");
  if (source_operand) parts.push_back("residual");
  if (analysis.activation != &kIdentity) parts.push_back(analysis.activation->name);
  return parts.empty() ? "" : absl::StrCat("_", absl::StrJoin(parts, "_"));
}

// The runtime arguments every template shares: sizes, A, B, D, alpha; C, bias, beta, raster and
// swizzle are the template's.
std::vector<int64_t> CommonRuntimeArgs(const CutlassAnalysis& analysis) {
  const GemmProduct& p = analysis.product;
  std::vector<int64_t> args(kRuntimeArgCount, 0);
  args[kArgM] = p.m;
  args[kArgN] = p.n;
  args[kArgK] = p.k;
  args[kArgBatch] = p.batch;
  args[kArgA] = p.a.input;
  args[kArgLda] = p.a.leading_dim;
  args[kArgBatchStrideA] = p.a.batch_stride;
  args[kArgB] = p.b.input;
  args[kArgLdb] = p.b.leading_dim;
  args[kArgBatchStrideB] = p.b.batch_stride;
  args[kArgBias] = -1;
  args[kArgC] = -1;
  args[kArgBUp] = -1;
  args[kArgD] = analysis.output.buffer;
  args[kArgLdd] = analysis.output.leading_dim;
  args[kArgBatchStrideD] = analysis.output.batch_stride;
  args[kArgAlpha] = DoubleBits(analysis.alpha);
  args[kArgBeta] = DoubleBits(0.0);
  return args;
}

void SetResidual(const RowMajorOperand& c, std::vector<int64_t>& args) {
  args[kArgC] = c.buffer;
  args[kArgLdc] = c.leading_dim;
  args[kArgBatchStrideC] = c.batch_stride;
  args[kArgBeta] = DoubleBits(1.0);
}

struct Configuration {
  std::string kernel_name;
  Defines defines;
  std::vector<int64_t> runtime_args;
  LaunchDims launch;
  CostHints hints;
};

// The GEMM cost hints of a tiling of the product.
void SetGemmHints(const GemmProduct& p, int64_t tile_m, int64_t tile_n, int64_t tile_k,
                  GemmMath math, int64_t ctas_per_sm, CostHints& hints) {
  hints.executor = Executor::kHostLaunched;
  hints.kernel_launches = 1;
  hints.gemm_math = math;
  hints.gemm_tile_m = tile_m;
  hints.gemm_tile_n = tile_n;
  hints.gemm_tile_k = tile_k;
  hints.gemm_ctas = CeilDiv(p.m, tile_m) * CeilDiv(p.n, tile_n) * p.batch;
  hints.gemm_ctas_per_sm = ctas_per_sm;
  hints.gemm_tile_utilization = static_cast<double>(p.m) * static_cast<double>(p.n) /
                                (static_cast<double>(RoundUp(p.m, tile_m)) * RoundUp(p.n, tile_n));
}

// What the sm90 templates share: the runtime arguments of the epilogue (bias, C, residual) and
// of the tile scheduler (raster, swizzle), and the launch: the grid a non-persistent launch would
// have (the persistent kernel runs min(this, SMs) CTAs); a producer warp group plus two consumer
// warp groups.
void SetSm90RuntimeArgsAndLaunch(const CutlassAnalysis& analysis, const SchedulePoint& point,
                                 int64_t tile_m, int64_t tile_n, Configuration& config) {
  const GemmProduct& p = analysis.product;
  config.runtime_args = CommonRuntimeArgs(analysis);
  std::vector<int64_t>& args = config.runtime_args;
  args[kArgBias] = analysis.bias_input;
  // Without a residual the kernel has no C (ElementC void); its strides mirror D's.
  args[kArgLdc] = analysis.output.leading_dim;
  args[kArgBatchStrideC] = analysis.output.batch_stride;
  if (analysis.residual.buffer >= 0) SetResidual(analysis.residual, args);
  args[kArgRaster] = point.parameters.at("raster");
  args[kArgSwizzle] = point.parameters.at("swizzle");
  const int64_t cluster_m = point.parameters.at("cluster_m");
  const int64_t cluster_n = point.parameters.at("cluster_n");
  config.launch.grid = {static_cast<uint32_t>(RoundUp(CeilDiv(p.m, tile_m), cluster_m)),
                        static_cast<uint32_t>(RoundUp(CeilDiv(p.n, tile_n), cluster_n)),
                        static_cast<uint32_t>(p.batch)};
  config.launch.block = {384, 1, 1};
}

// The schedule point of the 16-bit sm90 templates (sm90_tma_ws, sm90_gated).
struct Sm90Tiling {
  int64_t tile_m, tile_n, tile_k, cluster_m, cluster_n;
  bool pingpong;

  explicit Sm90Tiling(const SchedulePoint& point)
      : tile_m(point.parameters.at("tile_m")),
        tile_n(point.parameters.at("tile_n")),
        tile_k(point.parameters.at("tile_k")),
        cluster_m(point.parameters.at("cluster_m")),
        cluster_n(point.parameters.at("cluster_n")),
        pingpong(point.parameters.at("schedule") == 1) {}

  // "128x256x64_2x1x1_cooperative" in kernel names.
  std::string Name() const {
    return absl::StrCat(tile_m, "x", tile_n, "x", tile_k, "_", cluster_m, "x", cluster_n, "x1_",
                        pingpong ? "pingpong" : "cooperative");
  }
  // The element, A's layout, tile, cluster and schedule #defines, then the activation's.
  Defines CommonDefines(const CutlassAnalysis& analysis) const {
    const bool bf16 = analysis.product.dtype == forge::v1::DTYPE_BFLOAT16;
    return {{"FORGE_ELEMENT", bf16 ? "cutlass::bfloat16_t" : "cutlass::half_t"},
            {"FORGE_LAYOUT_A", LayoutTag(ARowMajor(analysis.product))},
            {"FORGE_TILE_M", absl::StrCat(tile_m)},
            {"FORGE_TILE_N", absl::StrCat(tile_n)},
            {"FORGE_TILE_K", absl::StrCat(tile_k)},
            {"FORGE_CLUSTER_M", absl::StrCat(cluster_m)},
            {"FORGE_CLUSTER_N", absl::StrCat(cluster_n)},
            {"FORGE_PINGPONG", pingpong ? "1" : "0"},
            {"FORGE_ACTIVATION", analysis.activation->functor}};
  }
};

const char* ElementName(DType dtype) {
  return dtype == forge::v1::DTYPE_BFLOAT16 ? "bf16" : "f16";
}

Configuration Sm90Configuration(const CutlassAnalysis& analysis, const SchedulePoint& point) {
  const GemmProduct& p = analysis.product;
  const Sm90Tiling tiling(point);
  const bool source = analysis.residual.buffer >= 0;
  Configuration config;
  config.kernel_name = absl::StrCat("cutlass_sm90_", ElementName(p.dtype), "_",
                                    LayoutLetter(ARowMajor(p)), LayoutLetter(BRowMajor(p)), "_",
                                    tiling.Name(), EpilogueName(analysis, source));
  config.defines = tiling.CommonDefines(analysis);
  config.defines.insert(config.defines.end(),
                        {{"FORGE_LAYOUT_B", LayoutTag(BRowMajor(p))},
                         {"FORGE_HAS_BIAS", analysis.bias_input >= 0 ? "1" : "0"},
                         {"FORGE_HAS_SOURCE", source ? "1" : "0"}});
  SetSm90RuntimeArgsAndLaunch(analysis, point, tiling.tile_m, tiling.tile_n, config);
  SetGemmHints(p, tiling.tile_m, tiling.tile_n, tiling.tile_k, GemmMath::kTensorCore16Bit, 1,
               config.hints);
  return config;
}

// sm90_gated: sm90_tma_ws's configuration over the packed product (2n columns), the gate's
// activation, no bias or C; the up weight and B's layout as runtime arguments.
Configuration Sm90GatedConfiguration(const CutlassAnalysis& analysis,
                                     const SchedulePoint& point) {
  const GemmProduct& p = analysis.product;
  const Sm90Tiling tiling(point);
  Configuration config;
  config.kernel_name =
      absl::StrCat("cutlass_sm90_gated_", ElementName(p.dtype), "_", LayoutLetter(ARowMajor(p)),
                   "_", tiling.Name(), EpilogueName(analysis, false));
  config.defines = tiling.CommonDefines(analysis);
  config.defines.push_back({"FORGE_HAS_BIAS", "0"});
  CutlassAnalysis packed = analysis;
  packed.product.n = 2 * p.n;  // the GEMM's columns: (gate, up) pairs
  SetSm90RuntimeArgsAndLaunch(packed, point, tiling.tile_m, tiling.tile_n, config);
  std::vector<int64_t>& args = config.runtime_args;
  args[kArgN] = p.n;
  args[kArgBRowMajor] = BRowMajor(p) ? 1 : 0;
  args[kArgBUp] = analysis.up_b.input;
  SetGemmHints(packed.product, tiling.tile_m, tiling.tile_n, tiling.tile_k,
               GemmMath::kTensorCore16Bit, 1, config.hints);
  config.hints.kernel_launches = 2;  // the packing kernel, then the GEMM
  return config;
}

Configuration Sm80Configuration(const CutlassAnalysis& analysis, const SchedulePoint& point) {
  const GemmProduct& p = analysis.product;
  const Sm80Config& c = kSm80Configs[point.parameters.at("config")];
  const int alignment = Sm80Alignment(analysis);
  Configuration config;
  config.kernel_name = absl::StrCat(
      "cutlass_sm80_3xtf32_", LayoutLetter(ARowMajor(p)), LayoutLetter(BRowMajor(p)), "_",
      c.tb_m, "x", c.tb_n, "x", c.tb_k, "_", c.warp_m, "x", c.warp_n, "x", c.warp_k, "_",
      c.stages, "stage_align", alignment, EpilogueName(analysis, false));
  config.defines = {{"FORGE_LAYOUT_A", LayoutTag(ARowMajor(p))},
                    {"FORGE_LAYOUT_B", LayoutTag(BRowMajor(p))},
                    {"FORGE_TB_M", absl::StrCat(c.tb_m)},
                    {"FORGE_TB_N", absl::StrCat(c.tb_n)},
                    {"FORGE_TB_K", absl::StrCat(c.tb_k)},
                    {"FORGE_WARP_M", absl::StrCat(c.warp_m)},
                    {"FORGE_WARP_N", absl::StrCat(c.warp_n)},
                    {"FORGE_WARP_K", absl::StrCat(c.warp_k)},
                    {"FORGE_STAGES", absl::StrCat(c.stages)},
                    {"FORGE_ALIGNMENT", absl::StrCat(alignment)},
                    {"FORGE_ACTIVATION", analysis.activation->functor}};
  config.runtime_args = CommonRuntimeArgs(analysis);
  std::vector<int64_t>& args = config.runtime_args;
  if (analysis.bias_input >= 0) {
    // The bias is C broadcast over rows and batches: leading dimension 0, beta 1.
    SetResidual({analysis.bias_input, 0, 0}, args);
  } else if (analysis.residual.buffer >= 0) {
    SetResidual(analysis.residual, args);
  }
  const int warps = (c.tb_m / c.warp_m) * (c.tb_n / c.warp_n) * (c.tb_k / c.warp_k);
  config.launch.grid = {static_cast<uint32_t>(CeilDiv(p.m, c.tb_m)),
                        static_cast<uint32_t>(CeilDiv(p.n, c.tb_n)),
                        static_cast<uint32_t>(p.batch)};
  config.launch.block = {static_cast<uint32_t>(32 * warps), 1, 1};
  config.launch.dynamic_shared_bytes =
      static_cast<uint32_t>(c.stages * (c.tb_m + c.tb_n) * c.tb_k * sizeof(float));
  SetGemmHints(p, c.tb_m, c.tb_n, c.tb_k, GemmMath::kTensorCore3xTf32, 1, config.hints);
  return config;
}

Configuration Sm90ThreeTf32Configuration(const CutlassAnalysis& analysis,
                                         const SchedulePoint& point) {
  const GemmProduct& p = analysis.product;
  const auto& params = point.parameters;
  const int64_t tile_m = params.at("tile_m");
  const int64_t tile_n = params.at("tile_n");
  constexpr int64_t kTileK = 32;  // 128 bytes of float
  const int64_t cluster_m = params.at("cluster_m");
  const int64_t cluster_n = params.at("cluster_n");
  const bool source = analysis.residual.buffer >= 0;
  Configuration config;
  // No operand layouts in the name or the source: the split kernel reads any.
  config.kernel_name =
      absl::StrCat("cutlass_sm90_3xtf32_", tile_m, "x", tile_n, "x", kTileK, "_", cluster_m, "x",
                   cluster_n, "x1", EpilogueName(analysis, source));
  config.defines = {{"FORGE_TILE_M", absl::StrCat(tile_m)},
                    {"FORGE_TILE_N", absl::StrCat(tile_n)},
                    {"FORGE_TILE_K", absl::StrCat(kTileK)},
                    {"FORGE_CLUSTER_M", absl::StrCat(cluster_m)},
                    {"FORGE_CLUSTER_N", absl::StrCat(cluster_n)},
                    {"FORGE_ACTIVATION", analysis.activation->functor},
                    {"FORGE_HAS_BIAS", analysis.bias_input >= 0 ? "1" : "0"},
                    {"FORGE_HAS_SOURCE", source ? "1" : "0"}};
  SetSm90RuntimeArgsAndLaunch(analysis, point, tile_m, tile_n, config);
  std::vector<int64_t>& args = config.runtime_args;
  args[kArgARowMajor] = ARowMajor(p) ? 1 : 0;
  args[kArgBRowMajor] = BRowMajor(p) ? 1 : 0;
  args[kArgPromotion] = params.at("promotion");
  SetGemmHints(p, tile_m, tile_n, kTileK, GemmMath::kTensorCore3xTf32Wgmma, 1, config.hints);
  config.hints.kernel_launches = 3;  // two split kernels, then the GEMM
  return config;
}

// A double as a C++ literal that keeps every bit (hexadecimal floating point), or the infinity
// builtin.
std::string DoubleLiteral(double value) {
  if (std::isinf(value)) return value > 0 ? "(__builtin_huge_val())" : "(-__builtin_huge_val())";
  return absl::StrFormat("(%a)", value);
}

absl::StatusOr<Configuration> ConfigurationOf(const KernelTask& task, const SchedulePoint& point) {
  absl::StatusOr<CutlassAnalysis> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  if (absl::Status status = ValidateAgainst(*analysis, point); !status.ok()) return status;
  Configuration config;
  if (point.template_name == CutlassGemmFamily::kSm90Template) {
    config = Sm90Configuration(*analysis, point);
  } else if (point.template_name == CutlassGemmFamily::kSm90ThreeTf32Template) {
    config = Sm90ThreeTf32Configuration(*analysis, point);
  } else if (point.template_name == CutlassGemmFamily::kSm90GatedTemplate) {
    config = Sm90GatedConfiguration(*analysis, point);
  } else {
    config = Sm80Configuration(*analysis, point);
  }
  // A parameterized activation's constants are part of the configuration (compiled in).
  if (const auto& parameters = analysis->activation_parameters) {
    config.defines.push_back({"FORGE_ACTIVATION_P0", DoubleLiteral(parameters->first)});
    config.defines.push_back({"FORGE_ACTIVATION_P1", DoubleLiteral(parameters->second)});
  }
  return config;
}

// The embedded CUDA of each template (cuda_sources.h) between cutlass_common.cuh and
// cutlass_entry_points.cuh, by name: what it shares with other templates, then its own.
std::string TemplateSource(absl::string_view template_name) {
  struct Source {
    const char* name;
    const char* shared;
    const char* text;
  };
  static constexpr Source kSources[] = {
      {CutlassGemmFamily::kSm90Template, cutlass_gemm::kSm90Gemm, cutlass_gemm::kSm90TmaWs},
      {CutlassGemmFamily::kSm90GatedTemplate, cutlass_gemm::kSm90Gemm, cutlass_gemm::kSm90Gated},
      {CutlassGemmFamily::kSm90ThreeTf32Template, "", cutlass_gemm::kSm90ThreeTf32},
      {CutlassGemmFamily::kSm80Template, "", cutlass_gemm::kSm80ThreeTf32}};
  for (const Source& source : kSources) {
    if (template_name == source.name) return absl::StrCat(source.shared, source.text);
  }
  return "#error unknown cutlass_gemm template\n";
}

// The compile options every template's source needs beyond the worker's -std, -arch and include
// paths: CuTe's constexpr functions called from device code, and CUTLASS without host asserts.
const std::vector<std::string>& CompileOptions() {
  static const auto* options =
      new std::vector<std::string>{"--expt-relaxed-constexpr", "-DNDEBUG"};
  return *options;
}

}  // namespace

const char* RuntimeArgName(RuntimeArg arg) {
  static constexpr const char* kNames[kRuntimeArgCount] = {
      "M",   "N",   "K",    "BATCH",          "A",   "LDA",   "BATCH_STRIDE_A",
      "B",   "LDB", "BATCH_STRIDE_B", "BIAS", "C",   "LDC",   "BATCH_STRIDE_C",
      "D",   "LDD", "BATCH_STRIDE_D", "ALPHA", "BETA", "RASTER", "SWIZZLE",
      "A_ROW_MAJOR", "B_ROW_MAJOR", "PROMOTION", "B_UP"};
  return arg >= 0 && arg < kRuntimeArgCount ? kNames[arg] : "?";
}

absl::Status CutlassGemmFamily::Applies(const KernelTask& task) const {
  absl::StatusOr<CutlassAnalysis> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  std::string obstacles;
  if (UsableTemplates(*analysis, &obstacles).empty()) {
    return absl::UnimplementedError(absl::StrCat("cutlass_gemm: ", obstacles));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TemplateSpace>> CutlassGemmFamily::ScheduleSpace(
    const KernelTask& task) const {
  if (absl::Status status = Applies(task); !status.ok()) return status;
  absl::StatusOr<CutlassAnalysis> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  std::vector<TemplateSpace> spaces;
  for (const char* name : UsableTemplates(*analysis, nullptr)) spaces.push_back(SpaceOf(name));
  return spaces;
}

absl::Status CutlassGemmFamily::Validate(const KernelTask& task, const SchedulePoint& point) const {
  absl::StatusOr<CutlassAnalysis> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  return ValidateAgainst(*analysis, point);
}

absl::StatusOr<LaunchPlan> CutlassGemmFamily::Plan(const KernelTask& task,
                                                   const SchedulePoint& point) const {
  absl::StatusOr<Configuration> config = ConfigurationOf(task, point);
  if (!config.ok()) return config.status();
  LaunchPlan plan;
  plan.kernel_name = config->kernel_name;
  plan.launch = config->launch;
  plan.template_name = point.template_name;
  plan.parameters = point.parameters;
  plan.generator_version = std::string(generator_version());
  plan.hints = config->hints;
  plan.compile_output = CompileOutput::kNvccSharedObject;
  plan.runtime_args = std::move(config->runtime_args);
  plan.compile_options = CompileOptions();
  return plan;
}

absl::StatusOr<std::string> CutlassGemmFamily::Emit(const KernelTask& task,
                                                    const LaunchPlan& plan) const {
  absl::StatusOr<Configuration> config =
      ConfigurationOf(task, {plan.template_name, plan.parameters});
  if (!config.ok()) return config.status();
  std::string source = absl::StrCat("// forge ", generator_version(), ": ", config->kernel_name,
                                    "\n");
  for (const auto& [name, value] : config->defines) {
    absl::StrAppend(&source, "#define ", name, " ", value, "\n");
  }
  for (int arg = 0; arg < kRuntimeArgCount; ++arg) {
    absl::StrAppend(&source, "#define FORGE_ARG_", RuntimeArgName(static_cast<RuntimeArg>(arg)),
                    " ", arg, "\n");
  }
  absl::StrAppend(&source, "#define FORGE_ARG_COUNT ", static_cast<int>(kRuntimeArgCount), "\n",
                  cutlass_gemm::kCutlassCommon, TemplateSource(plan.template_name),
                  cutlass_gemm::kCutlassEntryPoints);
  return source;
}

absl::Status CutlassGemmFamily::SupportsArch(const KernelTask& /*task*/,
                                             const SchedulePoint& point,
                                             absl::string_view target_arch) const {
  absl::StatusOr<int> capability = ComputeCapabilityOf(target_arch);
  if (!capability.ok()) return capability.status();
  if ((point.template_name == kSm90Template || point.template_name == kSm90ThreeTf32Template ||
       point.template_name == kSm90GatedTemplate) &&
      *capability != 90) {
    return absl::FailedPreconditionError(absl::StrCat(
        point.template_name, " needs sm_90 (TMA and WGMMA of Hopper), not ", target_arch));
  }
  if (point.template_name == kSm80Template && *capability < 80) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sm80_3xtf32 needs sm_80 or later (TF32 mma.sync), not ", target_arch));
  }
  return absl::OkStatus();
}

}  // namespace forge::codegen
