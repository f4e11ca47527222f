#include "compiler/graph/partition.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/graph/attention_pattern.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fixtures/test_models.h"

namespace forge::graph {
namespace {

using ::forge::v1::Graph;
using ::forge::v1::KernelFamily;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Builds small graphs (float32 unless set_dtype says otherwise): every value is contiguous,
// every node has one output named after the node ("relu" -> "relu_1", ...).
class GraphBuilder {
 public:
  // The dtype of the values described from now on.
  void set_dtype(forge::v1::DType dtype) { dtype_ = dtype; }
  std::string Input(const std::string& name, std::vector<std::int64_t> shape,
                    forge::v1::InputKind kind = forge::v1::INPUT_KIND_USER_INPUT) {
    AddValue(name, shape);
    auto* input = graph_.add_inputs();
    input->set_kind(kind);
    input->set_value_name(name);
    return name;
  }
  // A node `op` ("aten::relu") reading `tensors` in order, plus `scalar` as a float argument
  // when given; returns its output's name.
  std::string Op(const std::string& op, const std::vector<std::string>& tensors,
                 std::vector<std::int64_t> shape, std::optional<double> scalar = std::nullopt) {
    auto* node = graph_.add_nodes();
    const std::string name = absl::StrCat(op.substr(op.find(':') + 2), "_", ++count_);
    node->set_name(name);
    node->set_op(op);
    node->set_overload("default");
    for (const std::string& tensor : tensors) node->add_arguments()->set_tensor(tensor);
    if (scalar) node->add_arguments()->set_float_value(*scalar);
    node->add_outputs(name);
    AddValue(name, shape);
    return name;
  }
  void Output(const std::string& name) {
    auto* output = graph_.add_outputs();
    output->set_kind(forge::v1::OUTPUT_KIND_USER_OUTPUT);
    output->set_value_name(name);
  }
  Graph& graph() { return graph_; }

 protected:
  void AddValue(const std::string& name, const std::vector<std::int64_t>& shape) {
    auto* tensor = graph_.add_values()->mutable_tensor();
    graph_.mutable_values(graph_.values_size() - 1)->set_name(name);
    tensor->set_dtype(dtype_);
    std::int64_t stride = 1;
    std::vector<std::int64_t> strides(shape.size());
    for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
      strides[i] = stride;
      stride *= shape[i];
    }
    tensor->mutable_shape()->Add(shape.begin(), shape.end());
    tensor->mutable_strides()->Add(strides.begin(), strides.end());
  }

  Graph graph_;
  int count_ = 0;
  forge::v1::DType dtype_ = forge::v1::DTYPE_FLOAT32;
};

// Partitions `graph` and checks what must hold for every partition: each node in exactly one
// instance, instances in dependency order, tasks' occurrences matching their instances.
PartitionResult PartitionAndCheck(const Graph& graph) {
  absl::StatusOr<PartitionResult> result = Partition(graph);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  std::map<std::string, int> covered;
  std::set<std::string> available;
  for (const auto& input : graph.inputs()) available.insert(input.value_name());
  std::vector<int> occurrences(result->tasks.size(), 0);
  for (const TaskInstance& instance : result->instances) {
    for (const std::string& node : instance.node_names) ++covered[node];
    for (const std::string& value : instance.input_values) {
      EXPECT_TRUE(available.contains(value)) << value << " read before it is written";
    }
    available.insert(instance.output_values.begin(), instance.output_values.end());
    const auto& task = result->tasks[instance.task_index];
    EXPECT_EQ(task.digest(), instance.task_digest);
    EXPECT_EQ(task.inputs_size(), static_cast<int>(instance.input_values.size()));
    EXPECT_EQ(task.outputs_size(), static_cast<int>(instance.output_values.size()));
    ++occurrences[instance.task_index];
  }
  for (const auto& node : graph.nodes()) {
    EXPECT_EQ(covered[node.name()], 1) << "node " << node.name();
  }
  EXPECT_EQ(covered.size(), static_cast<std::size_t>(graph.nodes_size()));
  for (std::size_t i = 0; i < result->tasks.size(); ++i) {
    EXPECT_EQ(result->tasks[i].occurrences(), occurrences[i]);
  }
  for (const auto& output : graph.outputs()) EXPECT_TRUE(available.contains(output.value_name()));
  return *std::move(result);
}

// "FAMILY: op+op" for each instance, in run order.
std::vector<std::string> Summary(const PartitionResult& result) {
  std::vector<std::string> rows;
  for (const TaskInstance& instance : result.instances) {
    const auto& task = result.tasks[instance.task_index];
    std::vector<std::string> ops;
    for (const auto& node : task.group().nodes()) ops.push_back(node.op().substr(6));
    rows.push_back(absl::StrCat(forge::v1::KernelFamily_Name(task.family()).substr(14), ": ",
                                absl::StrJoin(ops, "+")));
  }
  return rows;
}

TEST(PartitionTest, PointwiseChainWithBroadcastIsOneTask) {
  GraphBuilder b;
  const std::string x = b.Input("x", {8, 64});
  const std::string bias = b.Input("bias", {64}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string expanded = b.Op("aten::expand", {bias}, {8, 64});
  const std::string sum = b.Op("aten::add", {x, expanded}, {8, 64});
  const std::string scaled = b.Op("aten::mul", {sum}, {8, 64}, 2.0);
  const std::string other = b.Op("aten::exp", {x}, {8, 64});
  b.Output(b.Op("aten::sub", {scaled, other}, {8, 64}));
  const PartitionResult result = PartitionAndCheck(b.graph());
  EXPECT_THAT(Summary(result), ElementsAre("POINTWISE: expand+add+mul+exp+sub"));
  const auto& task = result.tasks[0];
  // Read from outside, in order of first use: bias (by expand), then x.
  EXPECT_THAT(result.instances[0].input_values, ElementsAre("bias", "x"));
  EXPECT_EQ(task.group().inputs(0).kind(), forge::v1::INPUT_KIND_PARAMETER);
  EXPECT_EQ(task.group().inputs(1).kind(), forge::v1::INPUT_KIND_USER_INPUT);
  EXPECT_EQ(task.flops(), 4 * 8 * 64);
  EXPECT_EQ(task.min_bytes(), (8 * 64 + 64 + 8 * 64) * 4);
}

TEST(PartitionTest, RmsNormIsOneReductionTask) {
  GraphBuilder b;
  const std::string x = b.Input("x", {2, 16, 64});
  const std::string weight = b.Input("w", {64}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string square = b.Op("aten::pow", {x}, {2, 16, 64}, 2.0);
  const std::string mean = b.Op("aten::mean", {square}, {2, 16, 1});
  const std::string eps = b.Op("aten::add", {mean}, {2, 16, 1}, 1e-6);
  const std::string inv = b.Op("aten::rsqrt", {eps}, {2, 16, 1});
  const std::string normed = b.Op("aten::mul", {x, inv}, {2, 16, 64});
  const std::string scaled = b.Op("aten::mul", {normed, weight}, {2, 16, 64});
  b.Output(b.Op("aten::linear", {scaled, b.Input("wq", {64, 64})}, {2, 16, 64}));
  const PartitionResult result = PartitionAndCheck(b.graph());
  EXPECT_THAT(Summary(result), ElementsAre("REDUCTION: pow+mean+add+rsqrt+mul+mul",
                                           "GEMM: linear"));
  EXPECT_THAT(result.instances[0].input_values, ElementsAre("x", "w"));
}

TEST(PartitionTest, ScanTakesItsPrologueAndEpilogue) {
  GraphBuilder b;
  const std::string x = b.Input("x", {8, 64});
  const std::string scanned = b.Op("aten::cumsum", {b.Op("aten::tanh", {x}, {8, 64})}, {8, 64});
  b.Output(b.Op("aten::mul", {scanned}, {8, 64}, 0.5));
  const PartitionResult result = PartitionAndCheck(b.graph());
  EXPECT_THAT(Summary(result), ElementsAre("SCAN: tanh+cumsum+mul"));
}

// nn.GroupNorm(32, 320) then F.silu, as forge.export emits it (aten::group_norm, aten::silu:
// checked with torch 2.11), is one reduction task, and so is instance norm with its epilogue.
TEST(PartitionTest, GroupNormAndInstanceNormTakeTheirEpilogues) {
  GraphBuilder b;
  const std::string x = b.Input("x", {2, 320, 64, 64});
  const std::string weight = b.Input("w", {320}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string bias = b.Input("b", {320}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string norm = b.Op("aten::group_norm", {x, weight, bias}, {2, 320, 64, 64}, 1e-5);
  b.Output(b.Op("aten::silu", {norm}, {2, 320, 64, 64}));
  const PartitionResult result = PartitionAndCheck(b.graph());
  EXPECT_THAT(Summary(result), ElementsAre("REDUCTION: group_norm+silu"));
  EXPECT_THAT(result.instances[0].input_values, ElementsAre("x", "w", "b"));

  GraphBuilder instance;
  const std::string y = instance.Input("y", {4, 8, 16, 16});
  const std::string residual = instance.Input("residual", {4, 8, 16, 16});
  const std::string normed = instance.Op("aten::instance_norm", {y}, {4, 8, 16, 16}, 1e-5);
  const std::string sum = instance.Op("aten::add", {normed, residual}, {4, 8, 16, 16});
  instance.Output(instance.Op("aten::relu", {sum}, {4, 8, 16, 16}));
  EXPECT_THAT(Summary(PartitionAndCheck(instance.graph())),
              ElementsAre("REDUCTION: instance_norm+add+relu"));
}

// F.nll_loss(F.log_softmax(x, -1), t) as forge.export emits it: two reduction tasks (the
// reduction family's row_reduce and cross_entropy templates), not a reduction and an ATen call.
TEST(PartitionTest, NllLossOfLogSoftmaxIsTwoReductionTasks) {
  GraphBuilder b;
  const std::string x = b.Input("x", {8, 10});
  const std::string t = b.Input("t", {8});
  const std::string log_probabilities = b.Op("aten::log_softmax", {x}, {8, 10}, -1);
  b.Output(b.Op("aten::nll_loss_nd", {log_probabilities, t}, {}));
  EXPECT_THAT(Summary(PartitionAndCheck(b.graph())),
              ElementsAre("REDUCTION: log_softmax", "REDUCTION: nll_loss_nd"));
}

TEST(PartitionTest, GemmTakesItsSingleConsumerEpilogue) {
  GraphBuilder b;
  const std::string x = b.Input("x", {8, 64});
  const std::string w = b.Input("w", {64, 64}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string bias = b.Input("bias", {64}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string product = b.Op("aten::linear", {x, w}, {8, 64});
  const std::string biased = b.Op("aten::add", {product, bias}, {8, 64});
  const std::string act = b.Op("aten::gelu", {biased}, {8, 64});
  const std::string residual = b.Op("aten::add", {x, act}, {8, 64});
  // Two readers of the next GEMM's output: no epilogue for it.
  const std::string second = b.Op("aten::linear", {residual, w}, {8, 64});
  const std::string relu = b.Op("aten::relu", {second}, {8, 64});
  b.Output(relu);
  b.Output(b.Op("aten::neg", {second}, {8, 64}));
  const PartitionResult result = PartitionAndCheck(b.graph());
  EXPECT_THAT(Summary(result), ElementsAre("GEMM: linear+add+gelu+add", "GEMM: linear",
                                           "POINTWISE: relu", "POINTWISE: neg"));
  EXPECT_EQ(result.tasks[0].flops(), 2 * 8 * 64 * 64 + 3 * 8 * 64);
}

// A Llama-style MLP, down(silu(gate(x)) * up(x)) + x, of `dtype` with x [8, 64] and hidden 128,
// changed by `spelling`.
struct GatedMlpSpelling {
  forge::v1::DType dtype = forge::v1::DTYPE_BFLOAT16;
  bool up_first_in_mul = false;  // mul(up, silu(gate))
  bool gate_bias = false;        // linear(x, wg, bias)
  bool up_reads_other = false;   // up(y) with another input y
  bool gate_is_output = false;   // the gate's product is a graph output too
  int64_t rows = 32;             // M: tokens (decode's few rows stay separate GEMM tasks)
};
Graph GatedMlpGraph(const GatedMlpSpelling& spelling) {
  GraphBuilder b;
  b.set_dtype(spelling.dtype);
  const int64_t m = spelling.rows;
  const std::string x = b.Input("x", {m, 64});
  const std::string y = b.Input("y", {m, 64});
  const std::string wg = b.Input("wg", {128, 64}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string wu = b.Input("wu", {128, 64}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string wd = b.Input("wd", {64, 128}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string bias = b.Input("bias", {128}, forge::v1::INPUT_KIND_PARAMETER);
  std::vector<std::string> gate_args = {x, wg};
  if (spelling.gate_bias) gate_args.push_back(bias);
  const std::string gate = b.Op("aten::linear", gate_args, {m, 128});
  const std::string act = b.Op("aten::silu", {gate}, {m, 128});
  const std::string up = b.Op("aten::linear", {spelling.up_reads_other ? y : x, wu}, {m, 128});
  const std::string gated = spelling.up_first_in_mul ? b.Op("aten::mul", {up, act}, {m, 128})
                                                     : b.Op("aten::mul", {act, up}, {m, 128});
  const std::string down = b.Op("aten::linear", {gated, wd}, {m, 64});
  b.Output(b.Op("aten::add", {down, x}, {m, 64}));
  if (spelling.gate_is_output) b.Output(gate);
  return b.graph();
}

std::vector<std::string> AllNotes(const PartitionResult& result) {
  std::vector<std::string> notes;
  for (const auto& task : result.tasks) notes.insert(notes.end(), task.notes().begin(), task.notes().end());
  return notes;
}

TEST(PartitionTest, GatedProductIsOneGemmTaskWithoutEpilogue) {
  for (const bool up_first : {false, true}) {
    SCOPED_TRACE(up_first);
    const PartitionResult result = PartitionAndCheck(GatedMlpGraph({.up_first_in_mul = up_first}));
    EXPECT_THAT(Summary(result), ElementsAre("GEMM: linear+silu+linear+mul", "GEMM: linear+add"));
    EXPECT_THAT(AllNotes(result), IsEmpty());
    // Both projections' flops, plus the silu's and the mul's.
    EXPECT_GE(result.tasks[0].flops(), 2 * 2 * 8 * 128 * 64);
    EXPECT_EQ(result.tasks[0].inputs_size(), 3);  // x, wg, wu
  }
  // float16 too.
  EXPECT_THAT(Summary(PartitionAndCheck(GatedMlpGraph({.dtype = forge::v1::DTYPE_FLOAT16}))),
              ElementsAre("GEMM: linear+silu+linear+mul", "GEMM: linear+add"));
  // float32 has no gated kernel: the projections keep their GEMM tasks (cuBLASLt, 3xTF32), the
  // gate's with the silu and the mul as its epilogue, without a note (nothing is missed).
  const PartitionResult f32 = PartitionAndCheck(GatedMlpGraph({.dtype = forge::v1::DTYPE_FLOAT32}));
  EXPECT_THAT(Summary(f32),
              ElementsAre("GEMM: linear", "GEMM: linear+silu+mul", "GEMM: linear+add"));
  EXPECT_THAT(AllNotes(f32), IsEmpty());
  // Decode's few rows (M <= 16): the gemv family reads each weight once at the bandwidth limit,
  // where the gated kernel would repack both weights every launch; the gate keeps silu and mul.
  for (const int64_t rows : {1, 8, 16}) {
    SCOPED_TRACE(rows);
    const PartitionResult decode = PartitionAndCheck(GatedMlpGraph({.rows = rows}));
    EXPECT_THAT(Summary(decode),
                ElementsAre("GEMM: linear", "GEMM: linear+silu+mul", "GEMM: linear+add"));
    EXPECT_THAT(AllNotes(decode), IsEmpty());
  }
  EXPECT_THAT(Summary(PartitionAndCheck(GatedMlpGraph({.rows = 17}))),
              ElementsAre("GEMM: linear+silu+linear+mul", "GEMM: linear+add"));
}

TEST(PartitionTest, NearMissesOfAGatedProductStaySeparateAndSayWhy) {
  const struct {
    GatedMlpSpelling spelling;
    const char* reason;
  } cases[] = {
      {{.gate_bias = true}, "a projection has a bias"},
      {{.up_reads_other = true}, "the gate and up projections read different inputs"},
      {{.gate_is_output = true}, "are read elsewhere too"},
  };
  for (const auto& test : cases) {
    SCOPED_TRACE(test.reason);
    const PartitionResult result = PartitionAndCheck(GatedMlpGraph(test.spelling));
    EXPECT_THAT(AllNotes(result),
                ElementsAre(AllOf(HasSubstr("not a gated product (SwiGLU): "),
                                  HasSubstr(test.reason))));
    for (const std::string& row : Summary(result)) {
      EXPECT_THAT(row, ::testing::Not(HasSubstr("linear+silu+linear")));
    }
  }
}

// The inputs of a conv + batch norm: x (1, 8, 16, 16), the weight (8, 8, 3, 3), the running mean
// and variance (8).
struct ConvInputs {
  std::string x, w, mean, var;
};
ConvInputs ConvBatchNormInputs(GraphBuilder& b) {
  return {b.Input("x", {1, 8, 16, 16}),
          b.Input("w", {8, 8, 3, 3}, forge::v1::INPUT_KIND_PARAMETER),
          b.Input("mean", {8}, forge::v1::INPUT_KIND_BUFFER),
          b.Input("var", {8}, forge::v1::INPUT_KIND_BUFFER)};
}

TEST(PartitionTest, ConvTakesBatchNormReluAndResidual) {
  GraphBuilder b;
  const auto [x, w, mean, var] = ConvBatchNormInputs(b);
  const std::string conv = b.Op("aten::conv2d", {x, w}, {1, 8, 16, 16});
  const std::string bn = b.Op("aten::batch_norm", {conv, mean, var}, {1, 8, 16, 16});
  const std::string relu = b.Op("aten::relu", {bn}, {1, 8, 16, 16});
  const std::string conv2 = b.Op("aten::conv2d", {relu, w}, {1, 8, 16, 16});
  const std::string bn2 = b.Op("aten::batch_norm", {conv2, mean, var}, {1, 8, 16, 16});
  const std::string sum = b.Op("aten::add", {bn2, x}, {1, 8, 16, 16});
  b.Output(b.Op("aten::relu", {sum}, {1, 8, 16, 16}));
  const PartitionResult result = PartitionAndCheck(b.graph());
  EXPECT_THAT(Summary(result), ElementsAre("CONV: conv2d+batch_norm+relu",
                                           "CONV: conv2d+batch_norm+add+relu"));
}

// Batch norm in training mode updates its running statistics: it is an ATen task, never part of
// the conv's task (whose cuDNN candidates fold only eval-mode batch norm), and the ReLU after it
// is a pointwise task of its own.
TEST(PartitionTest, TrainingBatchNormStaysOutOfTheConvTask) {
  GraphBuilder b;
  const auto [x, w, mean, var] = ConvBatchNormInputs(b);
  const std::string conv = b.Op("aten::conv2d", {x, w}, {1, 8, 16, 16});
  const std::string bn = b.Op("aten::batch_norm", {conv, mean, var}, {1, 8, 16, 16});
  forge::v1::Argument* training = b.graph().mutable_nodes(1)->add_arguments();
  training->set_name("training");
  training->set_bool_value(true);
  b.Output(b.Op("aten::relu", {bn}, {1, 8, 16, 16}));
  const PartitionResult result = PartitionAndCheck(b.graph());
  EXPECT_THAT(Summary(result), ElementsAre("CONV: conv2d", "ATEN: batch_norm", "POINTWISE: relu"));
  EXPECT_THAT(result.tasks[1].notes(), ElementsAre(HasSubstr("training mode")));
}

// Near misses of conv + batch norm + activation: a conv result read by another node besides the
// batch norm, and a batch norm result the model outputs, end the conv's epilogue where they are
// (the rest becomes a pointwise task).
TEST(PartitionTest, ConvEpilogueStopsAtASecondReader) {
  GraphBuilder b;
  const auto [x, w, mean, var] = ConvBatchNormInputs(b);
  const std::string conv = b.Op("aten::conv2d", {x, w}, {1, 8, 16, 16});
  const std::string bn = b.Op("aten::batch_norm", {conv, mean, var}, {1, 8, 16, 16});
  b.Output(b.Op("aten::add", {bn, conv}, {1, 8, 16, 16}));
  const std::string conv2 = b.Op("aten::conv2d", {x, w}, {1, 8, 16, 16});
  const std::string bn2 = b.Op("aten::batch_norm", {conv2, mean, var}, {1, 8, 16, 16});
  b.Output(bn2);
  b.Output(b.Op("aten::relu", {bn2}, {1, 8, 16, 16}));
  const PartitionResult result = PartitionAndCheck(b.graph());
  EXPECT_THAT(Summary(result), ElementsAre("CONV: conv2d", "POINTWISE: batch_norm+add",
                                           "CONV: conv2d+batch_norm", "POINTWISE: relu"));
}

// Depthwise convolutions (groups == channels, weight (C, 1, k, k)) and pooling anchor stencil
// tasks: the depthwise one takes its epilogue, the pool its pointwise prologue (batch norm's
// affine and ReLU); a 1x1 (dense) convolution stays a conv task.
TEST(PartitionTest, DepthwiseConvAndPoolingAreStencilTasks) {
  GraphBuilder b;
  const std::string x = b.Input("x", {2, 8, 16, 16});
  const std::string y = b.Input("y", {2, 8, 16, 16});
  const std::string dw = b.Input("dw", {8, 1, 7, 7}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string pw = b.Input("pw", {8, 8, 1, 1}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string scale = b.Input("scale", {8, 1, 1}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string shift = b.Input("shift", {8, 1, 1}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string depthwise = b.Op("aten::conv2d", {x, dw}, {2, 8, 16, 16});
  const std::string gelu = b.Op("aten::gelu", {depthwise}, {2, 8, 16, 16});
  const std::string dense = b.Op("aten::conv2d", {gelu, pw}, {2, 8, 16, 16});
  for (auto& node : *b.graph().mutable_nodes()) {
    if (node.op() != "aten::conv2d") continue;
    node.mutable_arguments(0)->set_name("input");
    node.mutable_arguments(1)->set_name("weight");
    auto* groups = node.add_arguments();
    groups->set_name("groups");
    groups->set_int_value(node.name() == depthwise ? 8 : 1);
  }
  const std::string scaled = b.Op("aten::mul", {y, scale}, {2, 8, 16, 16});
  const std::string shifted = b.Op("aten::add", {scaled, shift}, {2, 8, 16, 16});
  const std::string relu = b.Op("aten::relu", {shifted}, {2, 8, 16, 16});
  const std::string pool = b.Op("aten::max_pool2d", {relu}, {2, 8, 8, 8});
  b.Output(dense);
  b.Output(b.Op("aten::avg_pool2d", {pool}, {2, 8, 4, 4}));
  const PartitionResult result = PartitionAndCheck(b.graph());
  EXPECT_THAT(Summary(result),
              ElementsAre("STENCIL: conv2d+gelu", "CONV: conv2d",
                          "STENCIL: mul+add+relu+max_pool2d", "STENCIL: avg_pool2d"));
}

TEST(PartitionTest, AttentionSoftmaxAndOpaqueOps) {
  GraphBuilder b;
  const std::string q = b.Input("q", {2, 4, 16, 16});
  const std::string k = b.Input("k", {2, 4, 16, 16});
  const std::string attention =
      b.Op("aten::scaled_dot_product_attention", {q, k, k}, {2, 4, 16, 16});
  const std::string joined = b.Op("aten::cdist", {attention, q}, {2, 4, 16, 16});
  const std::string probabilities = b.Op("aten::softmax", {joined}, {2, 4, 16, 16});
  b.Output(b.Op("aten::gelu", {probabilities}, {2, 4, 16, 16}));
  const PartitionResult result = PartitionAndCheck(b.graph());
  EXPECT_THAT(Summary(result),
              ElementsAre("ATTENTION: scaled_dot_product_attention", "ATEN: cdist",
                          "REDUCTION: softmax+gelu"));
  // An ATen task says why it has no generated kernel; the others carry no such note.
  EXPECT_THAT(result.tasks[1].notes(),
              ElementsAre(HasSubstr("aten::cdist.default: no kernel family generates it")));
  EXPECT_THAT(result.tasks[0].notes(), IsEmpty());
}

// Builds graphs whose nodes carry their arguments by schema name, as both importers write them
// (the attention matcher reads arguments by name).
class NamedGraphBuilder : public GraphBuilder {
 public:
  using Arg = std::pair<std::string, forge::v1::Argument>;
  static Arg T(const std::string& name, const std::string& value) {
    Arg arg{name, {}};
    arg.second.set_tensor(value);
    return arg;
  }
  static Arg F(const std::string& name, double value) {
    Arg arg{name, {}};
    arg.second.set_float_value(value);
    return arg;
  }
  static Arg I(const std::string& name, std::int64_t value) {
    Arg arg{name, {}};
    arg.second.set_int_value(value);
    return arg;
  }
  static Arg Ints(const std::string& name, std::vector<std::int64_t> values) {
    Arg arg{name, {}};
    arg.second.mutable_ints()->mutable_values()->Add(values.begin(), values.end());
    return arg;
  }
  // A node `op` ("aten::relu") of `overload` with `args` by name; returns its output's name.
  std::string Op(const std::string& op, const std::string& overload, std::vector<Arg> args,
                 std::vector<std::int64_t> shape,
                 forge::v1::DType dtype = forge::v1::DTYPE_FLOAT32) {
    auto* node = graph().add_nodes();
    const std::string name = absl::StrCat(op.substr(6), "_", graph().nodes_size());
    node->set_name(name);
    node->set_op(op);
    node->set_overload(overload);
    for (auto& [arg_name, value] : args) {
      auto* argument = node->add_arguments();
      *argument = value;
      argument->set_name(arg_name);
    }
    node->add_outputs(name);
    AddValue(name, shape);
    graph().mutable_values(graph().values_size() - 1)->mutable_tensor()->set_dtype(dtype);
    return name;
  }
};

// The variants of explicit attention the tests build: B2 H4 S8 D16, K and V with `kv_heads`.
struct AttentionSpelling {
  std::int64_t kv_heads = 4;
  bool repeat_kv = false;         // repeat_interleave K and V up to 4 heads
  std::int64_t softmax_dim = -1;
  std::int64_t triu_diagonal = 1;  // masked_fill(triu(ones, diagonal)); 0: no mask
  bool scale_after_softmax = false;
  bool scores_are_an_output = false;
};

Graph ExplicitAttentionGraph(const AttentionSpelling& spelling) {
  using B = NamedGraphBuilder;
  B b;
  const std::string q = b.Input("q", {2, 4, 8, 16});
  std::string k = b.Input("k", {2, spelling.kv_heads, 8, 16});
  std::string v = b.Input("v", {2, spelling.kv_heads, 8, 16});
  if (spelling.repeat_kv) {
    const std::int64_t times = 4 / spelling.kv_heads;
    k = b.Op("aten::repeat_interleave", "self_int",
             {B::T("self", k), B::I("repeats", times), B::I("dim", 1)}, {2, 4, 8, 16});
    v = b.Op("aten::repeat_interleave", "self_int",
             {B::T("self", v), B::I("repeats", times), B::I("dim", 1)}, {2, 4, 8, 16});
  }
  const std::string key_t = b.Op("aten::transpose", "int",
                                 {B::T("self", k), B::I("dim0", -2), B::I("dim1", -1)},
                                 {2, 4, 16, 8});
  const std::string raw = b.Op("aten::matmul", "default", {B::T("self", q), B::T("other", key_t)},
                               {2, 4, 8, 8});
  if (spelling.scores_are_an_output) b.Output(raw);
  std::string scores = b.Op("aten::div", "Tensor", {B::T("self", raw), B::F("other", 4.0)},
                            {2, 4, 8, 8});
  if (spelling.triu_diagonal != 0) {
    const std::string ones = b.Op("aten::ones", "default", {B::Ints("size", {8, 8})}, {8, 8},
                                  forge::v1::DTYPE_BOOL);
    const std::string mask = b.Op("aten::triu", "default",
                                  {B::T("self", ones), B::I("diagonal", spelling.triu_diagonal)},
                                  {8, 8}, forge::v1::DTYPE_BOOL);
    scores = b.Op("aten::masked_fill", "Scalar",
                  {B::T("self", scores), B::T("mask", mask),
                   B::F("value", -std::numeric_limits<double>::infinity())},
                  {2, 4, 8, 8});
  }
  std::string probabilities =
      b.Op("aten::softmax", "int", {B::T("self", scores), B::I("dim", spelling.softmax_dim)},
           {2, 4, 8, 8});
  if (spelling.scale_after_softmax) {
    probabilities = b.Op("aten::mul", "Tensor", {B::T("self", probabilities), B::F("other", 0.5)},
                         {2, 4, 8, 8});
  }
  const std::string out = b.Op("aten::matmul", "default",
                               {B::T("self", probabilities), B::T("other", v)}, {2, 4, 8, 16});
  b.Output(b.Op("aten::relu", "default", {B::T("self", out)}, {2, 4, 8, 16}));
  return b.graph();
}

// The one attention of the task's group, as the analysis will find it.
AttentionPattern PatternOf(const forge::v1::KernelTask& task) {
  const AttentionMatches matches = FindExplicitAttention(task.group());
  EXPECT_EQ(matches.patterns.size(), 1);
  return matches.patterns.empty() ? AttentionPattern{} : matches.patterns.front();
}

TEST(PartitionTest, ExplicitCausalAttentionIsOneTaskWithItsMaskAndEpilogue) {
  const PartitionResult result = PartitionAndCheck(ExplicitAttentionGraph({}));
  EXPECT_THAT(Summary(result),
              ElementsAre("ATTENTION: transpose+matmul+div+ones+triu+masked_fill+softmax+"
                          "matmul+relu"));
  const AttentionPattern pattern = PatternOf(result.tasks[0]);
  EXPECT_TRUE(pattern.causal);
  EXPECT_EQ(pattern.mask_kind, AttentionMaskKind::kMaskedFill);
  EXPECT_DOUBLE_EQ(pattern.scale, 0.25);
  EXPECT_EQ(pattern.query, "q");
  EXPECT_EQ(pattern.key, "k");
  EXPECT_EQ(pattern.value, "v");
  EXPECT_EQ(pattern.kv_repeat, 1);
  EXPECT_THAT(result.tasks[0].notes(), IsEmpty());
}

TEST(PartitionTest, RepeatInterleavedKeysAndValuesFoldIntoGroupedQueryAttention) {
  const PartitionResult result =
      PartitionAndCheck(ExplicitAttentionGraph({.kv_heads = 2, .repeat_kv = true}));
  ASSERT_EQ(result.tasks.size(), 1);
  EXPECT_EQ(result.tasks[0].family(), forge::v1::KERNEL_FAMILY_ATTENTION);
  const AttentionPattern pattern = PatternOf(result.tasks[0]);
  EXPECT_EQ(pattern.kv_repeat, 2);
  EXPECT_EQ(pattern.key, "k");
  EXPECT_EQ(pattern.value, "v");
}

TEST(PartitionTest, AMaskThatIsNotCausalShapedIsAttentionWithATensorMask) {
  const PartitionResult result = PartitionAndCheck(ExplicitAttentionGraph({.triu_diagonal = 2}));
  ASSERT_EQ(result.tasks.size(), 1);
  EXPECT_EQ(result.tasks[0].family(), forge::v1::KERNEL_FAMILY_ATTENTION);
  const AttentionPattern pattern = PatternOf(result.tasks[0]);
  EXPECT_FALSE(pattern.causal);
  EXPECT_EQ(pattern.mask_kind, AttentionMaskKind::kMaskedFill);
}

// Near misses stay GEMM, softmax and GEMM tasks, and the softmax's task says why.
TEST(PartitionTest, NearMissesOfAttentionStayAsTheyWereAndSayWhy) {
  const struct {
    AttentionSpelling spelling;
    const char* reason;
  } cases[] = {
      {{.softmax_dim = 2}, "not attention: the softmax is over dim 2"},
      {{.scale_after_softmax = true}, "not attention: the probabilities go to aten::mul"},
      {{.scores_are_an_output = true}, "are read elsewhere too"},
  };
  for (const auto& test : cases) {
    SCOPED_TRACE(test.reason);
    const PartitionResult result = PartitionAndCheck(ExplicitAttentionGraph(test.spelling));
    std::vector<std::string> notes;
    for (const auto& task : result.tasks) {
      EXPECT_NE(task.family(), forge::v1::KERNEL_FAMILY_ATTENTION);
      notes.insert(notes.end(), task.notes().begin(), task.notes().end());
    }
    EXPECT_THAT(notes, ::testing::Contains(HasSubstr(test.reason)));
    EXPECT_THAT(Summary(result), ::testing::Contains(::testing::StartsWith("REDUCTION: ")));
  }
}

TEST(PartitionTest, ViewsFoldIntoTheGroupThatReadsThem) {
  GraphBuilder b;
  const std::string x = b.Input("x", {2, 8, 64});
  const std::string table = b.Input("table", {64, 64}, forge::v1::INPUT_KIND_BUFFER);
  const std::string flat = b.Op("aten::view", {x}, {16, 64});  // read by the GEMM only
  const std::string product = b.Op("aten::linear", {flat, table}, {16, 64});
  const std::string shaped = b.Op("aten::view", {product}, {2, 8, 64});  // inside the epilogue
  const std::string act = b.Op("aten::relu", {shaped}, {2, 8, 64});
  const std::string rows = b.Op("aten::slice", {table}, {8, 64});  // read by two groups
  const std::string left = b.Op("aten::mul", {act, rows}, {2, 8, 64});
  const std::string joined = b.Op("aten::cdist", {left, rows}, {2, 8, 8});
  b.Output(joined);
  const PartitionResult result = PartitionAndCheck(b.graph());
  // The slice runs first: the GEMM's epilogue reads it.
  EXPECT_THAT(Summary(result), ElementsAre("ATEN: slice", "GEMM: view+linear+view+relu+mul",
                                           "ATEN: cdist"));
  // The lone view moves no data.
  EXPECT_EQ(result.tasks[result.instances[0].task_index].min_bytes(), 0);
  EXPECT_THAT(result.instances[1].input_values, ElementsAre("x", "table", rows));
}

// RoPE as Llama writes it, on a projection: x * cos + cat(-x[..., 8:], x[..., :8]) * sin. The
// slices, neg and cat are glue the pointwise family reads through: the rotation is one task.
TEST(PartitionTest, RotaryEmbeddingIsOnePointwiseTask) {
  GraphBuilder b;
  const std::string x = b.Input("x", {2, 5, 24});
  const std::string weight = b.Input("weight", {64, 24}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string cos = b.Input("cos", {5, 16});
  const std::string sin = b.Input("sin", {5, 16});
  const std::string projected = b.Op("aten::linear", {x, weight}, {2, 5, 64});
  const std::string heads = b.Op("aten::view", {projected}, {2, 5, 4, 16});
  const std::string q = b.Op("aten::transpose", {heads}, {2, 4, 5, 16});
  const std::string first = b.Op("aten::slice", {q}, {2, 4, 5, 8});
  const std::string second = b.Op("aten::slice", {q}, {2, 4, 5, 8});
  const std::string negated = b.Op("aten::neg", {second}, {2, 4, 5, 8});
  const std::string rotated = b.Op("aten::cat", {negated, first}, {2, 4, 5, 16});
  const std::string left = b.Op("aten::mul", {q, cos}, {2, 4, 5, 16});
  const std::string right = b.Op("aten::mul", {rotated, sin}, {2, 4, 5, 16});
  b.Output(b.Op("aten::add", {left, right}, {2, 4, 5, 16}));
  const PartitionResult result = PartitionAndCheck(b.graph());
  EXPECT_THAT(Summary(result), ElementsAre("GEMM: linear",
                                           "POINTWISE: view+transpose+slice+slice+neg+cat+mul+mul+add"));
}

// GQA's repeat_interleave of K joins K's pointwise group (here its own: K is an input); a causal
// mask built in the graph (ones, triu) is one pointwise task, the matmul's epilogue reads it; an
// embedding lookup joins the add that reads it.
TEST(PartitionTest, RepeatInterleaveMaskAndEmbeddingArePointwise) {
  GraphBuilder b;
  const std::string q = b.Input("q", {1, 4, 5, 8});
  const std::string k = b.Input("k", {1, 2, 5, 8});
  const std::string repeated = b.Op("aten::repeat_interleave", {k}, {1, 4, 5, 8});
  b.graph().mutable_nodes(0)->set_overload("self_int");
  const std::string keys = b.Op("aten::transpose", {repeated}, {1, 4, 8, 5});
  const std::string scores = b.Op("aten::matmul", {q, keys}, {1, 4, 5, 5});
  const std::string ones = b.Op("aten::ones", {}, {5, 5});
  const std::string mask = b.Op("aten::triu", {ones}, {5, 5});
  const std::string masked = b.Op("aten::masked_fill", {scores, mask}, {1, 4, 5, 5}, -1e4);
  b.Output(masked);
  const std::string table = b.Input("table", {37, 8}, forge::v1::INPUT_KIND_PARAMETER);
  const std::string ids = b.Input("ids", {5});
  const std::string rows = b.Op("aten::embedding", {table, ids}, {5, 8});
  b.Output(b.Op("aten::add", {rows, q}, {1, 4, 5, 8}));
  const PartitionResult result = PartitionAndCheck(b.graph());
  EXPECT_THAT(Summary(result),
              ElementsAre("POINTWISE: repeat_interleave", "POINTWISE: ones+triu",
                          "GEMM: transpose+matmul+masked_fill", "POINTWISE: embedding+add"));
  for (const auto& task : result.tasks) EXPECT_THAT(task.notes(), IsEmpty());
}

// What stays ATen says why: the op table's reason for the overload that made it opaque.
TEST(PartitionTest, AnAtenTaskNamesTheOverloadThatMadeItOpaque) {
  GraphBuilder b;
  const std::string x = b.Input("x", {6});
  const std::string counts = b.Input("counts", {6});
  b.Output(b.Op("aten::repeat_interleave", {x, counts}, {12}));
  b.graph().mutable_nodes(0)->set_overload("self_Tensor");
  const PartitionResult result = PartitionAndCheck(b.graph());
  ASSERT_THAT(Summary(result), ElementsAre("ATEN: repeat_interleave"));
  EXPECT_THAT(result.tasks[0].notes(),
              ElementsAre(HasSubstr("aten::repeat_interleave.self_Tensor: the repeat counts are "
                                    "a tensor: the output's shape depends on its values")));
}

TEST(PartitionTest, PointwiseFusionNeverMakesACycle) {
  GraphBuilder b;
  const std::string x = b.Input("x", {4, 4});
  const std::string first = b.Op("aten::neg", {x}, {4, 4});
  const std::string opaque = b.Op("aten::sort", {first}, {4, 4});
  // Reads `first` and the opaque op's result: joining neg's group would need sort inside it.
  b.Output(b.Op("aten::add", {first, opaque}, {4, 4}));
  const PartitionResult result = PartitionAndCheck(b.graph());
  EXPECT_THAT(Summary(result), ElementsAre("POINTWISE: neg", "ATEN: sort", "POINTWISE: add"));
}

TEST(PartitionTest, IdenticalGroupsShareATask) {
  GraphBuilder b;
  std::string x = b.Input("x", {8, 64});
  for (int layer = 0; layer < 3; ++layer) {
    x = b.Op("aten::sort", {b.Op("aten::tanh", {x}, {8, 64})}, {8, 64});
  }
  b.Output(x);
  const PartitionResult result = PartitionAndCheck(b.graph());
  ASSERT_EQ(result.tasks.size(), 2u);
  EXPECT_EQ(result.instances.size(), 6u);
  EXPECT_EQ(result.tasks[0].occurrences(), 3);
  EXPECT_EQ(result.tasks[1].occurrences(), 3);
}

TEST(PartitionTest, MalformedGraphsNameTheProblem) {
  GraphBuilder undefined;
  undefined.Op("aten::relu", {"ghost"}, {4});
  absl::StatusOr<PartitionResult> result = Partition(undefined.graph());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("relu_1"));
  EXPECT_THAT(result.status().message(), HasSubstr("'ghost'"));

  GraphBuilder duplicate;
  duplicate.Input("x", {4});
  duplicate.Input("x", {4});
  result = Partition(duplicate.graph());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("duplicate value 'x'"));

  GraphBuilder cycle;
  cycle.Input("x", {4});
  cycle.Op("aten::add", {"x", "neg_2"}, {4});
  cycle.Op("aten::neg", {"add_1"}, {4});
  result = Partition(cycle.graph());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("cycle"));
  EXPECT_THAT(result.status().message(), HasSubstr("add_1"));

  GraphBuilder bad_output;
  bad_output.Input("x", {4});
  bad_output.Output("nowhere");
  result = Partition(bad_output.graph());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("'nowhere'"));
}

TEST(PartitionTest, OutOfOrderNodesAreSorted) {
  GraphBuilder b;
  b.Input("x", {4});
  b.Op("aten::neg", {"relu_2"}, {4});
  b.Op("aten::relu", {"x"}, {4});
  b.Output("neg_1");
  const PartitionResult result = PartitionAndCheck(b.graph());
  EXPECT_THAT(Summary(result), ElementsAre("POINTWISE: relu+neg"));
}

// The exported test models (tests/fixtures/make_models.py).
Graph LoadModel(const std::string& name) {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  Graph graph;
  if (directory == nullptr) {
    ADD_FAILURE() << "FORGE_TEST_MODELS is not set; run through ctest (fixtures.make_models)";
    return graph;
  }
  const std::string path = absl::StrCat(directory, "/", name, "/graph.pb");
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file && graph.ParseFromIstream(&file)) << "cannot read " << path;
  return graph;
}

std::map<std::string, int> InstancesPerFamily(const PartitionResult& result) {
  std::map<std::string, int> count;
  for (const TaskInstance& instance : result.instances) {
    ++count[forge::v1::KernelFamily_Name(result.tasks[instance.task_index].family())];
  }
  return count;
}

TEST(PartitionModelsTest, EveryModelPartitionsCoveringEachNodeOnce) {
  for (const std::string& name : forge::testing::kTestModelNames) {
    SCOPED_TRACE(name);
    const Graph graph = LoadModel(name);
    ASSERT_GT(graph.nodes_size(), 0);
    const PartitionResult result = PartitionAndCheck(graph);
    EXPECT_FALSE(result.tasks.empty());
  }
}

TEST(PartitionModelsTest, LlamaBlockTasks) {
  const PartitionResult result = PartitionAndCheck(LoadModel("llama_block"));
  const std::map<std::string, int> families = InstancesPerFamily(result);
  EXPECT_EQ(families.at("KERNEL_FAMILY_REDUCTION"), 2);  // the two RMSNorms
  EXPECT_EQ(families.at("KERNEL_FAMILY_GEMM"), 7);       // q, k, v, o, gate, up, down
  EXPECT_EQ(families.at("KERNEL_FAMILY_ATTENTION"), 1);
  for (const std::string& row : Summary(result)) {
    if (row.starts_with("REDUCTION")) EXPECT_EQ(row, "REDUCTION: pow+mean+add+rsqrt+mul+mul");
  }
  EXPECT_THAT(Summary(result), ::testing::Contains("GEMM: transpose+view+linear+add"));  // o_proj + residual
  // Its MLP is float32: no gated task (the partitioner forms it for bfloat16 and float16).
  EXPECT_THAT(AllNotes(result), ::testing::Each(::testing::Not(HasSubstr("gated product"))));
}

// A bfloat16 Llama-3-style MLP (python/tests/models.py's SwiGluMlp) as exported: the gate and up
// projections, the silu and the mul are one GEMM task; the down projection another.
TEST(PartitionModelsTest, SwiGluMlpIsOneGatedTask) {
  const PartitionResult result = PartitionAndCheck(LoadModel("swiglu_mlp_bf16"));
  EXPECT_THAT(Summary(result), ElementsAre("GEMM: linear+silu+linear+mul", "GEMM: linear"));
  EXPECT_THAT(AllNotes(result), IsEmpty());
}

// The glue around a Mistral-style attention (tests/fixtures: python/tests/models.py's
// GlueAttention): each RoPE (slices, neg, cat, mul, add) is one pointwise task, the embeddings
// are one task, and the attention (K's and V's repeat_interleave, the causal mask's ones and
// triu) is one ATTENTION task with GQA folded. What stays ATen is views of the model's inputs
// that several tasks read (cos[:length], sin[:length]: no data moves), and they say so.
TEST(PartitionModelsTest, GlueAttentionLeavesOnlyViewsToAten) {
  const PartitionResult result = PartitionAndCheck(LoadModel("glue_attention"));
  SCOPED_TRACE(absl::StrJoin(Summary(result), "\n"));
  for (const auto& task : result.tasks) {
    if (task.family() != forge::v1::KERNEL_FAMILY_ATEN) continue;
    ASSERT_EQ(task.group().nodes_size(), 1);
    EXPECT_EQ(task.group().nodes(0).op(), "aten::slice");
    EXPECT_THAT(task.notes(), ElementsAre(HasSubstr("an ATen view call, no data moves")));
  }
  int ropes = 0;
  std::set<std::string> glue_seen;
  for (const auto& task : result.tasks) {
    std::multiset<std::string> ops;
    for (const auto& node : task.group().nodes()) ops.insert(node.op().substr(6));
    for (const char* glue : {"cat", "repeat_interleave", "triu", "ones", "embedding", "arange"}) {
      if (!ops.contains(glue)) continue;
      glue_seen.insert(glue);
      EXPECT_TRUE(task.family() == forge::v1::KERNEL_FAMILY_POINTWISE ||
                  task.family() == forge::v1::KERNEL_FAMILY_ATTENTION)
          << glue << " in a " << forge::v1::KernelFamily_Name(task.family()) << " task";
    }
    if (ops.contains("cat")) {
      ++ropes;
      EXPECT_EQ(task.family(), forge::v1::KERNEL_FAMILY_POINTWISE);
      EXPECT_EQ(ops.count("cat"), 1);
      EXPECT_EQ(ops.count("neg"), 1);
      EXPECT_EQ(ops.count("add"), 1);
      EXPECT_EQ(ops.count("mul"), 2);
      EXPECT_EQ(ops.count("slice"), 2);
    }
  }
  EXPECT_EQ(ropes, 2);  // q's and k's
  EXPECT_EQ(InstancesPerFamily(result).at("KERNEL_FAMILY_ATTENTION"), 1);
  for (const auto& task : result.tasks) {
    if (task.family() != forge::v1::KERNEL_FAMILY_ATTENTION) continue;
    const AttentionPattern pattern = PatternOf(task);
    EXPECT_EQ(pattern.kv_repeat, 2);
    EXPECT_TRUE(pattern.causal);
    EXPECT_EQ(pattern.mask_fill, -1e4);
  }
  EXPECT_THAT(glue_seen, ::testing::UnorderedElementsAre("cat", "repeat_interleave", "triu",
                                                         "ones", "embedding", "arange"));
}

// Attention as exported (python/tests/models.py): GPT-2's explicit causal attention, SDPA with
// GQA, and Llama's repeat_kv (expand + reshape) before explicit attention.
TEST(PartitionModelsTest, ExportedAttentionIsOneTaskInEachSpelling) {
  {
    const PartitionResult result = PartitionAndCheck(LoadModel("explicit_attention"));
    SCOPED_TRACE(absl::StrJoin(Summary(result), "\n"));
    EXPECT_EQ(InstancesPerFamily(result).at("KERNEL_FAMILY_ATTENTION"), 1);
    EXPECT_EQ(InstancesPerFamily(result).count("KERNEL_FAMILY_REDUCTION"), 0);
    for (const auto& task : result.tasks) {
      if (task.family() != forge::v1::KERNEL_FAMILY_ATTENTION) continue;
      const AttentionPattern pattern = PatternOf(task);
      EXPECT_TRUE(pattern.causal);  // masked_fill(~tril(ones))
      EXPECT_NEAR(pattern.scale, 1 / std::sqrt(8.0), 1e-12);
      EXPECT_EQ(pattern.kv_repeat, 1);
    }
  }
  {
    const PartitionResult result = PartitionAndCheck(LoadModel("sdpa_gqa"));
    EXPECT_THAT(Summary(result), ElementsAre("ATTENTION: scaled_dot_product_attention"));
  }
  {
    const PartitionResult result = PartitionAndCheck(LoadModel("expand_gqa_attention"));
    SCOPED_TRACE(absl::StrJoin(Summary(result), "\n"));
    ASSERT_EQ(result.tasks.size(), 1);
    const AttentionPattern pattern = PatternOf(result.tasks[0]);
    EXPECT_EQ(pattern.kv_repeat, 2);
    EXPECT_FALSE(pattern.causal);
    EXPECT_EQ(pattern.mask_kind, AttentionMaskKind::kNone);
  }
}

TEST(PartitionModelsTest, LlamaStackCollapsesToTheBlocksTasks) {
  const PartitionResult block = PartitionAndCheck(LoadModel("llama_block"));
  const PartitionResult stack = PartitionAndCheck(LoadModel("llama_stack"));
  std::map<std::string, int> block_occurrences;
  for (const auto& task : block.tasks) block_occurrences[task.digest()] = task.occurrences();
  std::map<std::string, int> stack_occurrences;
  for (const auto& task : stack.tasks) stack_occurrences[task.digest()] = task.occurrences();
  ASSERT_EQ(stack_occurrences.size(), block_occurrences.size());
  for (const auto& [digest, occurrences] : block_occurrences) {
    ASSERT_TRUE(stack_occurrences.contains(digest)) << digest;
    EXPECT_EQ(stack_occurrences.at(digest), 3 * occurrences) << digest;
  }
  EXPECT_EQ(stack.instances.size(), 3 * block.instances.size());
}

TEST(PartitionModelsTest, CumsumTakesItsPrologueAndEpilogue) {
  const PartitionResult result = PartitionAndCheck(LoadModel("cumsum_scale"));
  EXPECT_THAT(Summary(result), ElementsAre("SCAN: mul+cumsum+div"));
}

TEST(PartitionModelsTest, ResnetConvsTakeTheirEpilogues) {
  const PartitionResult result = PartitionAndCheck(LoadModel("resnet18"));
  const std::vector<std::string> rows = Summary(result);
  const auto count = [&rows](const std::string& row) {
    return std::count(rows.begin(), rows.end(), row);
  };
  // Stem, and the first conv of each of the 8 basic blocks.
  EXPECT_EQ(count("CONV: conv2d+_native_batch_norm_legit_no_training+relu"), 9);
  // The second conv of each basic block, with the residual add.
  EXPECT_EQ(count("CONV: conv2d+_native_batch_norm_legit_no_training+add+relu"), 8);
  // Downsample shortcuts: conv + batch norm, read by the residual add of another group.
  EXPECT_EQ(count("CONV: conv2d+_native_batch_norm_legit_no_training"), 3);
  EXPECT_EQ(InstancesPerFamily(result).at("KERNEL_FAMILY_CONV"), 20);
  // The stem's max pool and the global average pool are stencil tasks.
  EXPECT_EQ(count("STENCIL: max_pool2d"), 1);
  EXPECT_EQ(count("STENCIL: adaptive_avg_pool2d"), 1);
}

}  // namespace
}  // namespace forge::graph
