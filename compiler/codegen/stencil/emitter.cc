#include "compiler/codegen/stencil/emitter.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "compiler/codegen/cuda_expr.h"
#include "compiler/codegen/kernel_abi.h"
#include "compiler/codegen/stencil/cuda_sources.h"
#include "compiler/codegen/stencil/layout.h"

namespace forge::codegen::stencil {
namespace {

using forge::v1::KernelTask;
using forge::v1::TensorSpec;

// Writes the element functions of one task and point.
class ElementFunctions {
 public:
  // Vector lanes along dim `axis` of (N, C, H, W), 1 (channels) or 3 (columns): `load_width` of
  // them loaded, `store_width` stored.
  ElementFunctions(const KernelTask& task, const StencilTask& analysis, int64_t load_width,
                   int64_t store_width, int axis)
      : task_(task),
        analysis_(analysis),
        load_width_(load_width),
        store_width_(store_width),
        axis_(axis),
        index_type_(analysis.wide_index ? "long long" : "int") {}

  const std::string& index_type() const { return index_type_; }

  // forge_stencil_load: x[v] = the windowed element at (n, c + v, h, w), or (n, c, h, w + v).
  absl::StatusOr<std::string> Load() {
    width_ = load_width_;
    vectors_.clear();
    ElementEmitter emitter(analysis_.view, index_type_, "l",
                           [this](absl::string_view value, const Index& index,
                                  ElementEmitter& self) { return LoadInput(value, index, self); });
    std::vector<std::string> assignments;
    for (lane_ = 0; lane_ < width_; ++lane_) {
      absl::StatusOr<Term> term = emitter.Emit(analysis_.input, InputIndex(lane_));
      if (!term.ok()) return term.status();
      assignments.push_back(absl::StrCat("x[", lane_, "] = (ForgeStencilAcc)(", term->expr, ");"));
    }
    return Function("void", "forge_stencil_load", {"n", "c", "h", "w"},
                    ", ForgeStencilAcc (&x)[kVectorWidth]", emitter.statements(), assignments);
  }

  // forge_stencil_store: every task output at (n, c + v, oh, ow), or (n, c, oh, ow + v), from
  // y[v].
  absl::StatusOr<std::string> Store() {
    width_ = store_width_;
    vectors_.clear();
    ElementEmitter emitter(analysis_.view, index_type_, "s",
                           [this](absl::string_view value, const Index& index,
                                  ElementEmitter& self) -> absl::StatusOr<std::optional<Term>> {
                             if (value == analysis_.output) return Result(index);
                             return LoadInput(value, index, self);
                           });
    for (int o = 0; o < task_.outputs_size(); ++o) {
      const TensorSpec& spec = task_.outputs(o);
      const std::string& name = task_.group().outputs(o).value_name();
      std::vector<Term> lanes;
      std::vector<Index> indices;
      for (lane_ = 0; lane_ < width_; ++lane_) {
        absl::StatusOr<Term> term = emitter.Emit(name, OutputIndex(lane_));
        if (!term.ok()) return term.status();
        lanes.push_back(*std::move(term));
        indices.push_back(OutputIndex(lane_));
      }
      StoreOutputLanes(emitter, o, spec, lanes, indices, VectorAlong(spec, axis_, width_));
    }
    return Function("void", "forge_stencil_store", {"n", "c", "h", "w"},
                    ", const ForgeStencilAcc (&y)[kStoreWidth]", emitter.statements(), {});
  }

  // forge_stencil_weight and forge_stencil_bias: a convolution's parameters read directly (a
  // pool's are the identities of its window: weight 1, bias 0).
  std::string Parameters() const {
    std::string weight = "return (ForgeStencilAcc)1;";
    std::string bias = "return (ForgeStencilAcc)0;";
    if (analysis_.weight_input >= 0) {
      const TensorSpec& spec = analysis_.view.InputSpec(analysis_.weight_input);
      weight = absl::StrCat(
          "return (ForgeStencilAcc)",
          LoadConversion(spec.dtype(), absl::StrCat("in", analysis_.weight_input, "[c * ",
                                                    Stride(spec, 0), " + kh * ", Stride(spec, 2),
                                                    " + kw * ", Stride(spec, 3), "]")),
          ";");
    }
    if (analysis_.bias_input >= 0) {
      const TensorSpec& spec = analysis_.view.InputSpec(analysis_.bias_input);
      bias = absl::StrCat("return (ForgeStencilAcc)",
                          LoadConversion(spec.dtype(), absl::StrCat("in", analysis_.bias_input,
                                                                    "[c * ", Stride(spec, 0), "]")),
                          ";");
    }
    return absl::StrCat(
        Function("ForgeStencilAcc", "forge_stencil_weight", {"c", "kh", "kw"}, "", {}, {weight}),
        Function("ForgeStencilAcc", "forge_stencil_bias", {"c"}, "", {}, {bias}));
  }

 private:
  static int64_t Stride(const TensorSpec& spec, int d) {
    return spec.strides_size() == spec.shape_size()
               ? spec.strides(d)
               : ContiguousStrides({spec.shape().begin(), spec.shape().end()})[d];
  }

  // (n, c, h, w) with `lane` added along the lanes' axis.
  Index LaneIndex(int64_t lane) const {
    Index index = {"n", "c", "h", "w"};
    if (lane != 0) index[axis_] = absl::StrCat("(", index[axis_], " + ", lane, ")");
    return index;
  }
  Index InputIndex(int64_t lane) const { return LaneIndex(lane); }
  Index OutputIndex(int64_t lane) const { return LaneIndex(lane); }

  // A group input's element: one lane of a vector load when the element is this lane's of a
  // tensor laid out with the lanes' axis innermost, else a scalar load.
  absl::StatusOr<std::optional<Term>> LoadInput(absl::string_view value, const Index& index,
                                                ElementEmitter& self) {
    const int position = analysis_.view.InputPosition(value);
    if (position < 0) return std::optional<Term>();
    const TensorSpec& spec = analysis_.view.InputSpec(position);
    if (!self.in_choice() && index == InputIndex(lane_) && VectorAlong(spec, axis_, width_)) {
      const VectorLane vector{width_, lane_, InputIndex(0), &vectors_};
      return LoadInputElement(self, position, spec, index, &vector);
    }
    return LoadInputElement(self, position, spec, index, nullptr);
  }

  // The window's result at the element being stored.
  absl::StatusOr<std::optional<Term>> Result(const Index& index) const {
    if (index != OutputIndex(lane_)) {
      return absl::UnimplementedError(absl::StrCat(
          "stencil: the epilogue reads '", analysis_.output, "' at [", absl::StrJoin(index, ", "),
          "], another element than the one it writes; only elementwise epilogues fuse"));
    }
    const forge::v1::DType dtype = analysis_.view.DType(analysis_.output);
    return Term{absl::StrCat("((", *RegisterType(dtype), ")y[", lane_, "])"), dtype};
  }

  std::string Function(absl::string_view result, absl::string_view name,
                       const std::vector<std::string>& coordinates, absl::string_view elements,
                       const std::vector<std::string>& statements,
                       const std::vector<std::string>& tail) const {
    std::string text = absl::StrCat("__device__ __forceinline__ ", result, " ", name, "(",
                                    KernelParameterList(task_));
    for (const std::string& coordinate : coordinates) {
      absl::StrAppend(&text, ", const ", index_type_, " ", coordinate);
    }
    absl::StrAppend(&text, elements, ") {\n");
    for (const std::string& line : statements) absl::StrAppend(&text, "  ", line, "\n");
    for (const std::string& line : tail) absl::StrAppend(&text, "  ", line, "\n");
    absl::StrAppend(&text, "}\n");
    return text;
  }

  const KernelTask& task_;
  const StencilTask& analysis_;
  const int64_t load_width_;
  const int64_t store_width_;
  const int axis_;
  int64_t width_ = 1;                   // the lanes of the function being emitted
  const std::string index_type_;
  int64_t lane_ = 0;                    // the lane of the vector being emitted
  std::map<int, std::string> vectors_;  // input position -> its vector load's variable
};

}  // namespace

absl::StatusOr<std::string> EmitStencilKernel(const KernelTask& task, const StencilTask& analysis,
                                              const SchedulePoint& point) {
  const Layout layout = LayoutOf(point);
  const int64_t width = layout.kind == Template::kPlanar ? 1 : layout.width;
  const int64_t store_width = layout.kind == Template::kWindowReduce ? 1 : width;
  ElementFunctions functions(task, analysis, width, store_width, LaneAxis(layout));
  absl::StatusOr<std::string> load = functions.Load();
  if (!load.ok()) return load.status();
  absl::StatusOr<std::string> store = functions.Store();
  if (!store.ok()) return store.status();

  std::string source(KernelPrelude());
  std::vector<std::string> parameters;
  for (const auto& [name, value] : point.parameters) {
    parameters.push_back(absl::StrCat(name, " ", value));
  }
  absl::StrAppend(&source, "\n// Task ", task.digest(), ": ", analysis.node->op(), " ",
                  analysis.kernel[0], "x", analysis.kernel[1], " over [", analysis.n, ", ",
                  analysis.c, ", ", analysis.h, ", ", analysis.w, "] -> [", analysis.oh, ", ",
                  analysis.ow, "]; ", point.template_name, ", ", absl::StrJoin(parameters, ", "),
                  ".\n");
  absl::StrAppend(&source, "using ForgeStencilAcc = ", analysis.acc_type,
                  ";\nusing ForgeStencilIndex = ", functions.index_type(), ";\n");
  std::vector<std::pair<std::string, int64_t>> constants = {
      {"kStencilOp", static_cast<int64_t>(analysis.kind)},
      {"kN", analysis.n},
      {"kC", analysis.c},
      {"kH", analysis.h},
      {"kW", analysis.w},
      {"kOH", analysis.oh},
      {"kOW", analysis.ow},
      {"kKernelH", analysis.kernel[0]},
      {"kKernelW", analysis.kernel[1]},
      {"kStrideH", analysis.stride[0]},
      {"kStrideW", analysis.stride[1]},
      {"kPadH", analysis.padding[0]},
      {"kPadW", analysis.padding[1]},
      {"kDilationH", analysis.dilation[0]},
      {"kDilationW", analysis.dilation[1]},
      {"kCountIncludePad", analysis.count_include_pad ? 1 : 0},
      {"kMaxRegisterWeights", kMaxRegisterWeights},
      {"kVectorWidth", width},
      {"kStoreWidth", store_width},
      {"kOutputsPerThread", layout.outputs}};
  std::string body;
  switch (layout.kind) {
    case Template::kPlanar:
      constants.insert(constants.end(), {{"kThreadsX", layout.threads_x},
                                         {"kThreadsY", layout.threads_y},
                                         {"kStageInShared", layout.stage_in_shared ? 1 : 0}});
      body = kPlanarBody;
      break;
    case Template::kChannelsLast:
      constants.insert(constants.end(), {{"kThreads", layout.threads}});
      body = kChannelsLastBody;
      break;
    case Template::kTiled:
      constants.insert(constants.end(), {{"kThreadsX", layout.threads_x},
                                         {"kThreadsY", layout.threads_y},
                                         {"kRowsPerThread", layout.rows},
                                         {"kPlanesPerBlock", layout.planes},
                                         {"kStagedPitch", TiledStagedPitch(analysis, layout)}});
      body = kTiledBody;
      break;
    case Template::kChannelsLastTiled:
      constants.insert(constants.end(), {{"kChannelThreads", layout.threads_x},
                                         {"kColumnThreads", layout.threads_y},
                                         {"kRowThreads", layout.threads_z}});
      body = kChannelsLastTiledBody;
      break;
    case Template::kWindowReduce:
      constants.insert(constants.end(), {{"kWindowThreads", layout.threads},
                                         {"kWindowsPerBlock", layout.planes}});
      body = kWindowReduceBody;
      break;
  }
  for (const auto& [name, value] : constants) {
    absl::StrAppend(&source, "constexpr int ", name, " = ", value, ";\n");
  }
  const std::vector<std::pair<std::string, std::string>> arguments = {
      {"FORGE_STENCIL_PARAMETERS", KernelParameterList(task)},
      {"FORGE_STENCIL_ARGUMENTS", KernelArgumentList(task)}};
  absl::StrAppend(&source, *load, functions.Parameters(), *store,
                  absl::StrReplaceAll(kStencilPrelude, arguments),
                  absl::StrReplaceAll(body, arguments));
  return source;
}

}  // namespace forge::codegen::stencil
