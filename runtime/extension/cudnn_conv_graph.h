// One convolution with its pointwise epilogue as ONE cuDNN fused graph (cuDNN frontend graph API),
// built the one way Forge does it. The worker (worker/library/cudnn_conv.cc) judges and times the
// cudnn_conv family's candidates (compiler/codegen/cudnn_conv/cudnn_conv.h) through it, and a
// generated extension replays the winner through it. A candidate's engine is an index into the
// list of configurations cuDNN's heuristic (mode A, B or FALLBACK) returns for the graph, counting
// only those that survive the numerics filter below and build: reproducible for the same graph,
// cuDNN build and GPU, so both sides build the same graph in the same order here, and the worker
// records the chosen configuration's name (EngineName) for a report or another cuDNN to check.
//
// Numerics: the graph's compute and intermediate types are float32 whatever the I/O type; engine
// configurations whose numerical notes say they down-convert inputs or reduce in reduced
// precision are removed, and for float32 I/O also those that use tensor cores (TF32), so a
// float32 convolution keeps float32 accuracy (what ATen does with allow_tf32 off). A folded
// batch norm (Step::kBatchNorm) is applied in float32 in batch norm's own order: subtract the
// mean, scale, shift.
//
// A candidate of the "graph_nhwc" template (compiler/codegen/cudnn_conv/cudnn_conv.h) describes
// its graph on channels-last tensors (x NHWC, w KRSC, residuals and y NHWC) while the task's are
// NCHW-contiguous: its caller converts x, w and the residuals into such copies before Run and
// the NHWC y into the NCHW output after it, as it fills a kBatchNorm step's rows, both with the
// kernels of compiler/codegen/cudnn_conv (batch_norm_fold.cuh, transpose.cuh: NVRTC's build in
// the worker, nvcc's in a generated extension). Where a run keeps those rows and copies in its
// workspace, after cuDNN's part, is ScratchOf's layout, the same on both sides.
//
// The call (Call): the graph with where its operands come from among the task's inputs, the
// batch norms' operands and the engine, as plan.json carries it (codegen::CudnnConvCallJson
// writes it; ParseCall reads it): a runtime builds the graph from exactly the text the client
// wrote from the judged candidate's codegen::CudnnConvCall, and the worker's tests check that
// ParseCall's graph is the worker's own (Describe) for every kind of step.
//
// Header-only, on the cuDNN frontend (header-only, it brings nlohmann json: include this in as
// few translation units as possible), cuDNN 9 and the C++ standard library: torch's extension
// tooling compiles it on the user's machine, without Abseil or Forge's protos. Errors are
// strings (empty: success); callers turn them into absl::Status or TORCH_CHECK.
#ifndef FORGE_RUNTIME_EXTENSION_CUDNN_CONV_GRAPH_H_
#define FORGE_RUNTIME_EXTENSION_CUDNN_CONV_GRAPH_H_

#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <iterator>
#include <limits>
#include <sstream>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace forge_cudnn {

namespace fe = cudnn_frontend;

enum class DataType { kFloat, kHalf, kBFloat16 };

// Dims in (N, C, spatial...) order and the element stride of each.
struct Tensor {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
};

// The epilogue's steps (codegen::ConvStep): the running value v becomes
enum class Step {
  kBias,      // v + operand, a per-channel vector (dims [1, K, 1...], contiguous)
  kResidual,  // v + operand, a tensor of y's dims
  kScale,     // v * scalar
  kRelu,
  kGelu,  // erf form
  kGeluTanh,
  kSilu,  // cuDNN's swish, beta 1
  kSigmoid,
  kTanh,
  // Batch norm in eval mode, folded: v = (v - mean) * scale + shift, each a per-channel float32
  // row of the step's operand, a [3, K] float32 buffer the caller fills before each run:
  //   row 0: running_mean[k]
  //   row 1: weight[k] / sqrt(running_var[k] + eps)   (weight 1 when the batch norm has none)
  //   row 2: bias[k]                                  (0 when it has none)
  // (the worker's kernel: compiler/codegen/cudnn_conv/batch_norm_fold.cuh; a runtime whose
  // batch norm parameters are constants may fill it once). K is y's channel count; the graph
  // reads the rows as three [1, K, 1...] tensors (no operand tensor to describe).
  kBatchNorm,
  kClamp,  // min(max(v, scalar), upper): cuDNN's relu with a lower and an upper clip
};
inline constexpr int kBatchNormRows = 3;

struct EpilogueStep {
  Step step = Step::kRelu;
  Tensor operand;  // kBias, kResidual
  float scalar = 1;  // kScale; kClamp: the lower bound
  float upper = 0;   // kClamp: the upper bound (infinity: none)
};

// y = epilogue(conv_fprop(x, w)): x (N, C, spatial...), w (K, C / groups, filter...), y (N, K,
// out...); groups follow from x's and w's channels. Every tensor has `type`.
struct Conv {
  DataType type = DataType::kFloat;
  Tensor x;
  Tensor w;
  Tensor y;
  std::vector<int64_t> padding;
  std::vector<int64_t> stride;
  std::vector<int64_t> dilation;
  std::vector<EpilogueStep> epilogue;
};

// The operand of a kBias step of a graph whose output is `y`: one value per output channel,
// contiguous, as dims [1, K, 1...] (the conv's bias, or an add of a [K], [K, 1, 1] or
// [1, K, 1, 1] tensor).
inline Tensor BiasOperand(const Tensor& y) {
  Tensor bias;
  bias.dims.assign(y.dims.size(), 1);
  bias.dims[1] = y.dims[1];
  bias.strides.assign(y.dims.size(), 1);
  bias.strides[0] = y.dims[1];
  return bias;
}

enum class Heuristic { kA, kB, kFallback };
inline constexpr int kHeuristics = 3;

// Device addresses of one run: step_operands[i] for epilogue step i (null for steps without; for
// kBatchNorm the [3, K] float32 rows).
struct Operands {
  const void* x = nullptr;
  const void* w = nullptr;
  void* y = nullptr;
  std::vector<const void*> step_operands;
};

// A graph tensor bound to a step's operand address plus `byte_offset`.
struct OperandBinding {
  std::shared_ptr<fe::graph::Tensor_attributes> tensor;
  int64_t byte_offset = 0;
};

// The frontend's graph of `conv` with the tensors a run binds; made by BuildGraph.
struct ConvGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  std::shared_ptr<fe::graph::Tensor_attributes> x, w, y;
  std::vector<std::vector<OperandBinding>> step_operands;  // per step; empty where none
};

inline fe::DataType_t FrontendType(DataType type) {
  switch (type) {
    case DataType::kFloat: return fe::DataType_t::FLOAT;
    case DataType::kHalf: return fe::DataType_t::HALF;
    case DataType::kBFloat16: return fe::DataType_t::BFLOAT16;
  }
  return fe::DataType_t::NOT_SET;
}

// The pointwise mode of a step; NOT_SET for the binary ones, which BuildGraph handles.
inline fe::PointwiseMode_t ActivationMode(Step step) {
  switch (step) {
    case Step::kRelu:
    case Step::kClamp: return fe::PointwiseMode_t::RELU_FWD;
    case Step::kGelu: return fe::PointwiseMode_t::GELU_FWD;
    case Step::kGeluTanh: return fe::PointwiseMode_t::GELU_APPROX_TANH_FWD;
    case Step::kSilu: return fe::PointwiseMode_t::SWISH_FWD;
    case Step::kSigmoid: return fe::PointwiseMode_t::SIGMOID_FWD;
    case Step::kTanh: return fe::PointwiseMode_t::TANH_FWD;
    default: return fe::PointwiseMode_t::NOT_SET;
  }
}

inline fe::HeurMode_t FrontendHeuristic(Heuristic heuristic) {
  switch (heuristic) {
    case Heuristic::kA: return fe::HeurMode_t::A;
    case Heuristic::kB: return fe::HeurMode_t::B;
    case Heuristic::kFallback: return fe::HeurMode_t::FALLBACK;
  }
  return fe::HeurMode_t::A;
}

// Builds and validates the frontend graph of `conv` (no cuDNN handle or GPU needed: validate()
// checks the nodes and infers the shapes). Returns the frontend's message on failure.
inline std::string BuildGraph(const Conv& conv, ConvGraph* out) {
  namespace g = fe::graph;
  if (conv.x.dims.size() < 4 || conv.x.dims.size() != conv.w.dims.size() ||
      conv.x.dims.size() != conv.y.dims.size()) {
    return "x, w and y must share a rank of 4 or 5";
  }
  ConvGraph made;
  made.graph = std::make_shared<g::Graph>();
  g::Graph& graph = *made.graph;
  graph.set_io_data_type(FrontendType(conv.type))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const std::string& name, const Tensor& t, fe::DataType_t type) {
    return graph.tensor(
        g::Tensor_attributes().set_name(name).set_dim(t.dims).set_stride(t.strides).set_data_type(
            type));
  };
  made.x = tensor("x", conv.x, FrontendType(conv.type));
  made.w = tensor("w", conv.w, FrontendType(conv.type));
  auto value = graph.conv_fprop(made.x, made.w,
                                g::Conv_fprop_attributes()
                                    .set_name("conv")
                                    .set_padding(conv.padding)
                                    .set_stride(conv.stride)
                                    .set_dilation(conv.dilation)
                                    .set_compute_data_type(fe::DataType_t::FLOAT));
  // A kBatchNorm row: [1, K, 1...] float32, contiguous.
  Tensor row;
  row.dims.assign(conv.y.dims.size(), 1);
  row.dims[1] = conv.y.dims[1];
  row.strides.assign(conv.y.dims.size(), 1);
  row.strides[0] = conv.y.dims[1];
  const int64_t row_bytes = conv.y.dims[1] * static_cast<int64_t>(sizeof(float));
  int index = 0;
  for (const EpilogueStep& step : conv.epilogue) {
    const std::string name = "step" + std::to_string(index++);
    std::vector<OperandBinding> bindings;
    // One pointwise node of the step, float32 in and out, the running value its first operand.
    auto apply = [&](fe::PointwiseMode_t mode, const std::string& node,
                     std::shared_ptr<g::Tensor_attributes> operand) {
      g::Pointwise_attributes attributes;
      attributes.set_name(node).set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT);
      if (step.step == Step::kSilu) attributes.set_swish_beta(1.0f);
      if (step.step == Step::kClamp) {
        attributes.set_relu_lower_clip(step.scalar);
        if (std::isfinite(step.upper)) attributes.set_relu_upper_clip(step.upper);
      }
      value = operand != nullptr ? graph.pointwise(value, operand, attributes)
                                 : graph.pointwise(value, attributes);
      value->set_data_type(fe::DataType_t::FLOAT);
    };
    if (step.step == Step::kBias || step.step == Step::kResidual) {
      bindings.push_back({tensor(name + "_operand", step.operand, FrontendType(conv.type)), 0});
      apply(fe::PointwiseMode_t::ADD, name, bindings.back().tensor);
    } else if (step.step == Step::kBatchNorm) {
      const fe::PointwiseMode_t modes[kBatchNormRows] = {
          fe::PointwiseMode_t::SUB, fe::PointwiseMode_t::MUL, fe::PointwiseMode_t::ADD};
      for (int r = 0; r < kBatchNormRows; ++r) {
        const std::string node = name + "_row" + std::to_string(r);
        bindings.push_back({tensor(node, row, fe::DataType_t::FLOAT), r * row_bytes});
        apply(modes[r], node, bindings.back().tensor);
      }
    } else if (step.step == Step::kScale) {
      apply(fe::PointwiseMode_t::MUL, name, graph.tensor(step.scalar));
    } else {
      apply(ActivationMode(step.step), name, nullptr);
    }
    made.step_operands.push_back(std::move(bindings));
  }
  value->set_output(true)
      .set_dim(conv.y.dims)
      .set_stride(conv.y.strides)
      .set_data_type(FrontendType(conv.type));
  made.y = value;
  fe::error_t status = graph.validate();
  if (status.is_bad()) return "cuDNN graph validate: " + status.get_message();
  *out = std::move(made);
  return "";
}

// The numerical notes whose engine configurations never run a Forge graph (see the file comment).
inline std::vector<fe::NumericalNote_t> BarredNotes(DataType type) {
  std::vector<fe::NumericalNote_t> notes = {fe::NumericalNote_t::DOWN_CONVERT_INPUTS,
                                            fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION};
  if (type == DataType::kFloat) notes.push_back(fe::NumericalNote_t::TENSOR_CORE);
  return notes;
}

// A graph lowered for one handle's GPU with one heuristic's configurations, built lazily: the
// engine list of a candidate is the configurations that pass the numerics filter and build, in
// the heuristic's order; plan `engine` is the engine-th of them.
class ConvPlan {
 public:
  // Builds the graph, lowers it on `handle` and queries the heuristic. Returns cuDNN's reason on
  // failure (a graph no engine of this cuDNN supports fails here or at the first Engine()).
  static std::string Create(cudnnHandle_t handle, const Conv& conv, Heuristic heuristic,
                            std::unique_ptr<ConvPlan>* out) {
    auto plan = std::unique_ptr<ConvPlan>(new ConvPlan());
    if (std::string error = BuildGraph(conv, &plan->graph_); !error.empty()) return error;
    fe::graph::Graph& graph = *plan->graph_.graph;
    fe::error_t status = graph.build_operation_graph(handle);
    if (status.is_bad()) return "cuDNN build_operation_graph: " + status.get_message();
    status = graph.create_execution_plans({FrontendHeuristic(heuristic)});
    if (status.is_bad()) return "cuDNN heuristics: " + status.get_message();
    graph.deselect_numeric_notes(BarredNotes(conv.type));
    plan->configurations_ = graph.get_execution_plan_count();
    *out = std::move(plan);
    return "";
  }

  // Makes sure plan `engine` is built; "" when it is, else why not (past the end of the list:
  // `*past_end` set, the message says how many configurations built).
  std::string Engine(int engine, bool* past_end) {
    *past_end = false;
    while (static_cast<int>(built_.size()) <= engine && next_ < configurations_) {
      const int64_t index = next_++;
      fe::error_t status = graph_.graph->build_plan_at_index(index);
      if (status.is_good()) {
        built_.push_back(index);
      } else {
        last_failure_ = status.get_message();
      }
    }
    if (engine >= 0 && engine < static_cast<int>(built_.size())) return "";
    *past_end = true;
    return "cuDNN built " + std::to_string(built_.size()) + " of " +
           std::to_string(configurations_) +
           " engine configurations for the graph (after removing those that lose precision); "
           "engine " +
           std::to_string(engine) + " is past them" +
           (last_failure_.empty() ? std::string() : "; the last failure: " + last_failure_);
  }

  // For a built engine (Engine() returned ""): its workspace and cuDNN's name of it.
  int64_t WorkspaceBytes(int engine) const {
    return graph_.graph->get_workspace_size_plan_at_index(built_[engine]);
  }
  std::string EngineName(int engine) const {
    std::string name;
    (void)graph_.graph->get_plan_name_at_index(built_[engine], name);
    return name;
  }

  // Runs built engine `engine` on the handle's stream with `workspace` of WorkspaceBytes.
  std::string Run(cudnnHandle_t handle, const Operands& operands, int engine,
                  void* workspace) const {
    std::unordered_map<std::shared_ptr<fe::graph::Tensor_attributes>, void*> pack = {
        {graph_.x, const_cast<void*>(operands.x)},
        {graph_.w, const_cast<void*>(operands.w)},
        {graph_.y, operands.y}};
    if (operands.step_operands.size() != graph_.step_operands.size()) {
      return "the run has " + std::to_string(operands.step_operands.size()) +
             " step operands, the graph " + std::to_string(graph_.step_operands.size());
    }
    for (size_t i = 0; i < graph_.step_operands.size(); ++i) {
      for (const OperandBinding& binding : graph_.step_operands[i]) {
        pack.emplace(binding.tensor, static_cast<char*>(const_cast<void*>(operands.step_operands[i])) +
                                         binding.byte_offset);
      }
    }
    fe::error_t status =
        graph_.graph->execute_plan_at_index(handle, pack, workspace, built_[engine]);
    if (status.is_bad()) return "cuDNN execute: " + status.get_message();
    return "";
  }

 private:
  ConvPlan() = default;
  ConvGraph graph_;
  int64_t configurations_ = 0;
  int64_t next_ = 0;            // the next configuration to try building
  std::vector<int64_t> built_;  // indices of the configurations that built, in order
  std::string last_failure_;
};

// ---- The call, as plan.json carries it ----

// An operand of a batch norm fold: its position among the task's inputs (-1: absent) and the
// fold kernel's code of its dtype (codegen::BatchNormFoldType: 0 float32, 1 bfloat16, 2 float16).
struct FoldOperand {
  int input = -1;
  int type = 0;
};

// The operands of an eval-mode batch norm step, folded into its rows before each run
// (compiler/codegen/cudnn_conv/batch_norm_fold.cuh, parameters in this order).
struct BatchNormFold {
  FoldOperand mean, var, weight, bias;
  float eps = 1e-5f;
};

struct Call {
  Conv conv;
  int x_input = -1;  // positions among the task's inputs
  int w_input = -1;
  std::vector<int> step_inputs;            // per epilogue step: the input it reads, else -1
  std::vector<BatchNormFold> batch_norms;  // the kBatchNorm steps', in step order
  bool channels_last_inside = false;       // "graph_nhwc": conv's tensors are NHWC copies
  Heuristic heuristic = Heuristic::kA;
  int engine = 0;
  std::string engine_name;  // cuDNN's name of the configuration the worker measured, or ""
};

// The names of the epilogue's steps, as codegen::ConvStepName spells them, in Step's order.
inline constexpr const char* kStepNames[] = {"bias",    "residual", "scale", "relu",
                                              "gelu",    "gelu_tanh", "silu", "sigmoid",
                                              "tanh",    "batch_norm", "clamp"};

// Reads the JSON of a call (codegen::CudnnConvCallJson): {"dtype", "x_input", "w_input", "x",
// "w", "y" ({"dims", "strides"}), "padding", "stride", "dilation", "groups", "epilogue": [{"step",
// "input", "scalar" (a clamp's lower bound; null: none), "upper" (null: none)}], "residuals": [tensor per residual step],
// "batch_norms": [{"mean", "var", "weight", "bias": {"input", "type"}, "eps"} per batch norm
// step], "channels_last_inside", "heuristic", "engine", "engine_name"}. Returns "" and fills
// `out`, or what is wrong with the text.
inline std::string ParseCall(const std::string& text, Call* out) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return "the cudnn_conv call is not a JSON object";
  Call call;
  try {
    auto tensor = [](const nlohmann::json& t) {
      return Tensor{t.at("dims").get<std::vector<int64_t>>(),
                    t.at("strides").get<std::vector<int64_t>>()};
    };
    // Floats go through double: the frontend's serializer reads floats as hexadecimal strings.
    auto number = [](const nlohmann::json& value, double none) {
      return value.is_null() ? none : value.get<double>();
    };
    const std::string dtype = json.at("dtype").get<std::string>();
    if (dtype == "float32") {
      call.conv.type = DataType::kFloat;
    } else if (dtype == "bfloat16") {
      call.conv.type = DataType::kBFloat16;
    } else if (dtype == "float16") {
      call.conv.type = DataType::kHalf;
    } else {
      return "the cudnn_conv call's dtype " + dtype + " is not float32, bfloat16 or float16";
    }
    call.x_input = json.at("x_input").get<int>();
    call.w_input = json.at("w_input").get<int>();
    call.conv.x = tensor(json.at("x"));
    call.conv.w = tensor(json.at("w"));
    call.conv.y = tensor(json.at("y"));
    call.conv.padding = json.at("padding").get<std::vector<int64_t>>();
    call.conv.stride = json.at("stride").get<std::vector<int64_t>>();
    call.conv.dilation = json.at("dilation").get<std::vector<int64_t>>();
    const nlohmann::json& residuals = json.at("residuals");
    size_t residual = 0;
    for (const nlohmann::json& entry : json.at("epilogue")) {
      const std::string name = entry.at("step").get<std::string>();
      EpilogueStep step;
      int kind = 0;
      while (kind < static_cast<int>(std::size(kStepNames)) && name != kStepNames[kind]) ++kind;
      if (kind == static_cast<int>(std::size(kStepNames))) {
        return "the cudnn_conv call's epilogue step " + name + " is not one of the graph's";
      }
      step.step = static_cast<Step>(kind);
      // null: a clamp without a lower bound (-infinity); any other step's scalar is finite.
      step.scalar = static_cast<float>(number(entry.value("scalar", nlohmann::json(1.0)),
                                              -std::numeric_limits<double>::infinity()));
      step.upper = static_cast<float>(
          number(entry.value("upper", nlohmann::json()), std::numeric_limits<double>::infinity()));
      if (step.step == Step::kBias) step.operand = BiasOperand(call.conv.y);
      if (step.step == Step::kResidual) {
        if (residual >= residuals.size()) return "the cudnn_conv call has too few residuals";
        step.operand = tensor(residuals[residual++]);
      }
      call.step_inputs.push_back(entry.at("input").get<int>());
      call.conv.epilogue.push_back(std::move(step));
    }
    if (residual != residuals.size()) return "the cudnn_conv call has too many residuals";
    for (const nlohmann::json& entry : json.value("batch_norms", nlohmann::json::array())) {
      BatchNormFold fold;
      FoldOperand* operands[] = {&fold.mean, &fold.var, &fold.weight, &fold.bias};
      const char* names[] = {"mean", "var", "weight", "bias"};
      for (int i = 0; i < 4; ++i) {
        operands[i]->input = entry.at(names[i]).at("input").get<int>();
        operands[i]->type = entry.at(names[i]).at("type").get<int>();
      }
      fold.eps = static_cast<float>(entry.at("eps").get<double>());
      call.batch_norms.push_back(fold);
    }
    size_t norms = 0;
    for (const EpilogueStep& step : call.conv.epilogue) norms += step.step == Step::kBatchNorm;
    if (norms != call.batch_norms.size()) {
      return "the cudnn_conv call has " + std::to_string(call.batch_norms.size()) +
             " batch norms' operands for " + std::to_string(norms) + " batch norm steps";
    }
    call.channels_last_inside = json.value("channels_last_inside", false);
    const int heuristic = json.at("heuristic").get<int>();
    if (heuristic < 0 || heuristic >= kHeuristics) return "the cudnn_conv call's heuristic";
    call.heuristic = static_cast<Heuristic>(heuristic);
    call.engine = json.at("engine").get<int>();
    call.engine_name = json.value("engine_name", std::string());
  } catch (const std::exception& error) {
    return std::string("the cudnn_conv call: ") + error.what();
  }
  *out = std::move(call);
  return "";
}

// A canonical text of the graph `conv` describes (every field; floats exactly, in hexadecimal):
// two graphs with the same text are the same graph.
inline std::string Describe(const Conv& conv) {
  std::ostringstream text;
  text << std::hexfloat;
  auto list = [&text](const std::vector<int64_t>& values) {
    text << '[';
    for (size_t i = 0; i < values.size(); ++i) text << (i > 0 ? "," : "") << values[i];
    text << ']';
  };
  auto tensor = [&](const char* name, const Tensor& t) {
    text << ' ' << name << ' ';
    list(t.dims);
    list(t.strides);
  };
  text << "type " << static_cast<int>(conv.type);
  tensor("x", conv.x);
  tensor("w", conv.w);
  tensor("y", conv.y);
  text << " padding ";
  list(conv.padding);
  text << " stride ";
  list(conv.stride);
  text << " dilation ";
  list(conv.dilation);
  for (const EpilogueStep& step : conv.epilogue) {
    text << " | " << kStepNames[static_cast<int>(step.step)] << " scalar " << step.scalar
         << " upper " << step.upper;
    tensor("operand", step.operand);
  }
  return text.str();
}

// ---- A run's own part of the workspace ----

// Where a run keeps its own data in its workspace, after cuDNN's `cudnn_bytes`, each region
// 256-byte aligned: the kBatchNormRows float32 rows of K per kBatchNorm step (`fold`) and,
// channels-last inside, the NHWC / KRSC copies of x, w and the residuals and the graph's NHWC
// result (`y`); `total` is the workspace's size.
struct Scratch {
  int64_t fold = 0;
  int64_t x = 0, w = 0, y = 0;
  std::vector<int64_t> residuals;  // per kResidual step, in step order
  int64_t total = 0;
};

inline int64_t Elements(const Tensor& tensor) {
  int64_t elements = 1;
  for (int64_t d : tensor.dims) elements *= d;
  return elements;
}

inline int ElementBytes(DataType type) { return type == DataType::kFloat ? 4 : 2; }

inline Scratch ScratchOf(const Conv& conv, size_t batch_norms, bool channels_last_inside,
                         int64_t cudnn_bytes) {
  Scratch scratch;
  int64_t end = cudnn_bytes;
  auto take = [&end](int64_t bytes) {
    const int64_t at = (end + 255) / 256 * 256;
    end = at + bytes;
    return at;
  };
  if (batch_norms > 0) {
    scratch.fold = take(static_cast<int64_t>(batch_norms) * kBatchNormRows * conv.y.dims[1] *
                        static_cast<int64_t>(sizeof(float)));
  }
  if (channels_last_inside) {
    const int element = ElementBytes(conv.type);
    scratch.x = take(Elements(conv.x) * element);
    scratch.w = take(Elements(conv.w) * element);
    for (const EpilogueStep& step : conv.epilogue) {
      if (step.step == Step::kResidual) scratch.residuals.push_back(take(Elements(step.operand) * element));
    }
    scratch.y = take(Elements(conv.y) * element);
  }
  scratch.total = end;
  return scratch;
}

}  // namespace forge_cudnn

#endif  // FORGE_RUNTIME_EXTENSION_CUDNN_CONV_GRAPH_H_
