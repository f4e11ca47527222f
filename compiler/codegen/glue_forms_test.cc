#include "compiler/codegen/glue_forms.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/pointwise/pointwise.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/graph/partition.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::DTypeArg;
using ::forge::codegen::testing::ExpectCompiles;
using ::forge::codegen::testing::FloatArg;
using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::IntsArg;
using ::forge::codegen::testing::NoneArg;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::codegen::testing::TensorsArg;
using ::forge::v1::DType;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

constexpr DType kF32 = forge::v1::DTYPE_FLOAT32;
constexpr DType kF16 = forge::v1::DTYPE_FLOAT16;
constexpr DType kBF16 = forge::v1::DTYPE_BFLOAT16;
constexpr DType kI64 = forge::v1::DTYPE_INT64;
constexpr DType kBool = forge::v1::DTYPE_BOOL;
constexpr auto kPointwise = forge::v1::KERNEL_FAMILY_POINTWISE;

struct GlueCase {
  std::string label;
  KernelTask task;
};

// RoPE as Llama writes it: x * cos + cat(-x[..., 8:], x[..., :8]) * sin, x [4, 8, 33, 16].
KernelTask RopeTask(DType dtype) {
  return TaskBuilder()
      .Input("x", dtype, {4, 8, 33, 16})
      .Input("cos", dtype, {33, 16})
      .Input("sin", dtype, {33, 16})
      .Node("first", "slice", "Tensor", {TensorArg("self", "x"), IntArg("dim", 3), IntArg("start", 0), IntArg("end", 8)}, dtype, {4, 8, 33, 8})
      .Node("second", "slice", "Tensor", {TensorArg("self", "x"), IntArg("dim", 3), IntArg("start", 8)}, dtype, {4, 8, 33, 8})
      .Node("negated", "neg", "default", {TensorArg("self", "second")}, dtype, {4, 8, 33, 8})
      .Node("rotated", "cat", "default", {TensorsArg("tensors", {"negated", "first"}), IntArg("dim", -1)}, dtype, {4, 8, 33, 16})
      .Node("left", "mul", "Tensor", {TensorArg("self", "x"), TensorArg("other", "cos")}, kF32, {4, 8, 33, 16})
      .Node("right", "mul", "Tensor", {TensorArg("self", "rotated"), TensorArg("other", "sin")}, kF32, {4, 8, 33, 16})
      .Node("sum", "add", "Tensor", {TensorArg("self", "left"), TensorArg("other", "right")}, kF32, {4, 8, 33, 16})
      .Node("out", "_to_copy", "default", {TensorArg("self", "sum"), DTypeArg("dtype", dtype)}, dtype, {4, 8, 33, 16})
      .Output("out")
      .Build(kPointwise);
}

std::vector<GlueCase> GlueCases() {
  std::vector<GlueCase> cases;
  for (DType dtype : {kF32, kF16, kBF16}) {
    cases.push_back({absl::StrCat("rope_", forge::v1::DType_Name(dtype)), RopeTask(dtype)});
  }
  // The example block's rotate_half: x.chunk(2, -1) exports as split, a view of two outputs.
  cases.push_back({"rope_split_unbind",
                   TaskBuilder()
                       .Input("x", kF16, {2, 5, 12})
                       .Input("pair", kF16, {2, 5, 12})
                       .MultiOutputNode("halves", {"halves.0", "halves.1"}, "split", "Tensor", {TensorArg("self", "x"), IntArg("split_size", 6), IntArg("dim", -1)}, kF16, {{2, 5, 6}, {2, 5, 6}})
                       .Node("negated", "neg", "default", {TensorArg("self", "halves.1")}, kF16, {2, 5, 6})
                       .Node("rotated", "cat", "default", {TensorsArg("tensors", {"negated", "halves.0"}), IntArg("dim", -1)}, kF16, {2, 5, 12})
                       .MultiOutputNode("parts", {"parts.0", "parts.1"}, "unbind", "int", {TensorArg("self", "pair"), IntArg("dim", 0)}, kF16, {{5, 12}, {5, 12}})
                       .Node("sum", "add", "Tensor", {TensorArg("self", "parts.1"), TensorArg("other", "rotated")}, kF16, {2, 5, 12})
                       .Output("sum")
                       .Build(kPointwise)});
  cases.push_back({"cat_three_dtypes_promoted",
                   TaskBuilder()
                       .Input("a", kF32, {3, 4})
                       .Input("b", kF16, {3, 2})
                       .Input("c", kBF16, {3, 5})
                       .Input("legacy_empty", kF32, {0})
                       .Node("out", "cat", "default", {TensorsArg("tensors", {"a", "legacy_empty", "b", "c"}), IntArg("dim", 1)}, kF32, {3, 11})
                       .Output("out")
                       .Build(kPointwise)});
  cases.push_back({"cat_dim0_int64",
                   TaskBuilder()
                       .Input("a", kI64, {2, 6})
                       .Input("b", kI64, {5, 6})
                       .Node("out", "cat", "default", {TensorsArg("tensors", {"a", "b"})}, kI64, {7, 6})
                       .Output("out")
                       .Build(kPointwise)});
  cases.push_back({"stack_dim1_then_view",
                   TaskBuilder()
                       .Input("a", kF16, {4, 6})
                       .Input("b", kF32, {4, 6})
                       .Node("stacked", "stack", "default", {TensorsArg("tensors", {"a", "b", "a"}), IntArg("dim", 1)}, kF32, {4, 3, 6})
                       .Node("out", "view", "default", {TensorArg("self", "stacked"), IntsArg("size", {4, 18})}, kF32, {4, 18})
                       .Output("out")
                       .Build(kPointwise)});
  cases.push_back({"flip_roll",
                   TaskBuilder()
                       .Input("x", kBF16, {5, 7})
                       .Node("flipped", "flip", "default", {TensorArg("self", "x"), IntsArg("dims", {0, -1})}, kBF16, {5, 7})
                       .Node("rolled", "roll", "default", {TensorArg("self", "x"), IntsArg("shifts", {2, -3}), IntsArg("dims", {0, 1})}, kBF16, {5, 7})
                       .Node("flat", "roll", "default", {TensorArg("self", "x"), IntsArg("shifts", {4})}, kBF16, {5, 7})
                       .Node("sum", "add", "Tensor", {TensorArg("self", "flipped"), TensorArg("other", "rolled")}, kBF16, {5, 7})
                       .Node("out", "sub", "Tensor", {TensorArg("self", "sum"), TensorArg("other", "flat")}, kBF16, {5, 7})
                       .Output("out")
                       .Build(kPointwise)});
  cases.push_back({"repeat",
                   TaskBuilder()
                       .Input("x", kF32, {4, 5})
                       .Node("out", "repeat", "default", {TensorArg("self", "x"), IntsArg("repeats", {2, 1, 3})}, kF32, {2, 4, 15})
                       .Output("out")
                       .Build(kPointwise)});
  cases.push_back({"repeat_interleave_flat",
                   TaskBuilder()
                       .Input("x", kF32, {4, 5})
                       .Node("out", "repeat_interleave", "self_int", {TensorArg("self", "x"), IntArg("repeats", 3)}, kF32, {60})
                       .Output("out")
                       .Build(kPointwise)});
  cases.push_back({"repeat_interleave_heads",
                   TaskBuilder()
                       .Input("k", kBF16, {1, 2, 5, 8})
                       .Node("heads", "repeat_interleave", "self_int", {TensorArg("self", "k"), IntArg("repeats", 2), IntArg("dim", 1)}, kBF16, {1, 4, 5, 8})
                       .Node("out", "clone", "default", {TensorArg("self", "heads")}, kBF16, {1, 4, 5, 8})
                       .Output("out")
                       .Build(kPointwise)});
  cases.push_back({"causal_mask",
                   TaskBuilder()
                       .Input("scores", kF32, {2, 7, 7})
                       .Node("ones", "ones", "default", {IntsArg("size", {7, 7}), DTypeArg("dtype", kBool)}, kBool, {7, 7})
                       .Node("mask", "triu", "default", {TensorArg("self", "ones"), IntArg("diagonal", 1)}, kBool, {7, 7})
                       .Node("out", "masked_fill", "Scalar", {TensorArg("self", "scores"), TensorArg("mask", "mask"), FloatArg("value", -1e4)}, kF32, {2, 7, 7})
                       .Output("out")
                       .Build(kPointwise)});
  cases.push_back({"tril_where_masked_fill_tensor",
                   TaskBuilder()
                       .Input("x", kF16, {3, 5, 6})
                       .Input("fill", kF16, {})
                       .Node("lower", "tril", "default", {TensorArg("self", "x"), IntArg("diagonal", -1)}, kF16, {3, 5, 6})
                       .Node("positive", "gt", "Scalar", {TensorArg("self", "x"), IntArg("other", 0)}, kBool, {3, 5, 6})
                       .Node("picked", "where", "ScalarSelf", {TensorArg("condition", "positive"), FloatArg("self", 1.5), TensorArg("other", "lower")}, kF16, {3, 5, 6})
                       .Node("other", "where", "ScalarOther", {TensorArg("condition", "positive"), TensorArg("self", "picked"), IntArg("other", 2)}, kF16, {3, 5, 6})
                       .Node("both", "where", "Scalar", {TensorArg("condition", "positive"), FloatArg("self", 0.5), FloatArg("other", -0.5)}, kF32, {3, 5, 6})
                       .Node("filled", "masked_fill", "Tensor", {TensorArg("self", "other"), TensorArg("mask", "positive"), TensorArg("value", "fill")}, kF16, {3, 5, 6})
                       .Node("out", "add", "Tensor", {TensorArg("self", "filled"), TensorArg("other", "both")}, kF32, {3, 5, 6})
                       .Output("out")
                       .Build(kPointwise)});
  cases.push_back({"sources",
                   TaskBuilder()
                       .Input("x", kF16, {4, 9})
                       .Node("range", "arange", "default", {IntArg("end", 9)}, kI64, {9})
                       .Node("steps", "arange", "start_step", {FloatArg("start", 1.5), FloatArg("end", 3.75), FloatArg("step", 0.25)}, kF32, {9})
                       .Node("scaled", "mul", "Tensor", {TensorArg("self", "range"), FloatArg("other", 0.5)}, kF32, {9})
                       .Node("full", "full", "default", {IntsArg("size", {4, 9}), FloatArg("fill_value", 2.5), DTypeArg("dtype", kF16)}, kF16, {4, 9})
                       .Node("like", "full_like", "default", {TensorArg("self", "x"), IntArg("fill_value", 3)}, kF16, {4, 9})
                       .Node("zeros", "zeros_like", "default", {TensorArg("self", "x")}, kF16, {4, 9})
                       .Node("ones", "ones", "default", {IntsArg("size", {9})}, kF32, {9})
                       .Node("a", "add", "Tensor", {TensorArg("self", "full"), TensorArg("other", "like")}, kF16, {4, 9})
                       .Node("b", "add", "Tensor", {TensorArg("self", "zeros"), TensorArg("other", "scaled")}, kF32, {4, 9})
                       .Node("c", "add", "Tensor", {TensorArg("self", "a"), TensorArg("other", "b")}, kF32, {4, 9})
                       .Node("d", "add", "Tensor", {TensorArg("self", "c"), TensorArg("other", "steps")}, kF32, {4, 9})
                       .Node("out", "add", "Tensor", {TensorArg("self", "d"), TensorArg("other", "ones")}, kF32, {4, 9})
                       .Output("out")
                       .Build(kPointwise)});
  cases.push_back({"index_select",
                   TaskBuilder()
                       .Input("x", kBF16, {7, 9})
                       .Input("rows", kI64, {4})
                       .Input("row", kI64, {})
                       .Node("picked", "index_select", "default", {TensorArg("self", "x"), IntArg("dim", 0), TensorArg("index", "rows")}, kBF16, {4, 9})
                       .Node("one", "index_select", "default", {TensorArg("self", "x"), IntArg("dim", 0), TensorArg("index", "row")}, kBF16, {1, 9})
                       .Node("sum", "add", "Tensor", {TensorArg("self", "picked"), TensorArg("other", "one")}, kBF16, {4, 9})
                       .Output("sum")
                       .Build(kPointwise)});
  cases.push_back({"gather",
                   TaskBuilder()
                       .Input("x", kBF16, {7, 9})
                       .Input("columns", kI64, {7, 3})
                       .Node("gathered", "gather", "default", {TensorArg("self", "x"), IntArg("dim", 1), TensorArg("index", "columns")}, kBF16, {7, 3})
                       .Node("scaled", "mul", "Tensor", {TensorArg("self", "gathered"), FloatArg("other", 2.0)}, kBF16, {7, 3})
                       .Output("scaled")
                       .Build(kPointwise)});
  cases.push_back({"embedding_add",
                   TaskBuilder()
                       .Input("weight", kF16, {37, 16})
                       .Input("ids", kI64, {2, 7})
                       .Input("positions", kF16, {7, 16})
                       .Node("rows", "embedding", "default", {TensorArg("weight", "weight"), TensorArg("indices", "ids")}, kF16, {2, 7, 16})
                       .Node("out", "add", "Tensor", {TensorArg("self", "rows"), TensorArg("other", "positions")}, kF16, {2, 7, 16})
                       .Output("out")
                       .Build(kPointwise)});
  cases.push_back({"copies_and_casts",
                   TaskBuilder()
                       .Input("x", kF32, {6, 10})
                       .Input("h", kF16, {6, 10})
                       .Node("copied", "contiguous", "default", {TensorArg("self", "x")}, kF32, {6, 10})
                       .Node("narrow", "to", "dtype", {TensorArg("self", "copied"), DTypeArg("dtype", kBF16)}, kBF16, {6, 10})
                       .Node("typed", "type_as", "default", {TensorArg("self", "narrow"), TensorArg("other", "h")}, kF16, {6, 10})
                       .Node("narrowed", "narrow", "default", {TensorArg("self", "typed"), IntArg("dim", 1), IntArg("start", 2), IntArg("length", 5)}, kF16, {6, 5})
                       .Node("out", "mul", "Tensor", {TensorArg("self", "narrowed"), FloatArg("other", 3.0)}, kF16, {6, 5})
                       .Output("out")
                       .Build(kPointwise)});
  return cases;
}

// Every glue op generates at the default point and at scalar width, and compiles for sm_80 and
// sm_90 without spills.
TEST(GlueFormsTest, EveryGlueOpCompiles) {
  PointwiseFamily family;
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const GlueCase& c : GlueCases()) {
    ASSERT_TRUE(family.Applies(c.task).ok()) << c.label << ": " << family.Applies(c.task);
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(c.task);
    ASSERT_TRUE(space.ok()) << c.label << ": " << space.status();
    SchedulePoint scalar = DefaultPoint(space->front());
    scalar.parameters["vector_width"] = 1;
    for (const SchedulePoint& point : {DefaultPoint(space->front()), scalar}) {
      absl::StatusOr<GeneratedKernel> kernel = family.Generate(c.task, point);
      ASSERT_TRUE(kernel.ok()) << c.label << ": " << kernel.status();
      kernels.push_back(*kernel);
      labels.push_back(absl::StrCat(c.label, " vector_width ", point.parameters.at("vector_width")));
    }
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true);
}

// cat reads only the input whose range holds the index: an if / else chain; x's 16-byte vector
// load (RoPE's x * cos reads it in place) stays outside the chain, which reads x element-wise.
TEST(GlueFormsTest, CatIsAChainOfBoundsChecks) {
  PointwiseFamily family;
  const KernelTask task = RopeTask(kF16);
  absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
  ASSERT_TRUE(space.ok()) << space.status();
  const SchedulePoint point = DefaultPoint(space->front());
  EXPECT_EQ(point.parameters.at("vector_width"), 8);
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::string& source = kernel->source;
  EXPECT_THAT(source, HasSubstr(" < 8) {"));
  EXPECT_THAT(source, HasSubstr("} else {"));
  // One vector load of x for the chunk, before the first chain.
  const size_t vector_load = source.find("reinterpret_cast<const ForgeVec<ForgeHalf, 8>*>(in0");
  ASSERT_NE(vector_load, std::string::npos);
  EXPECT_EQ(source.find("reinterpret_cast<const ForgeVec<ForgeHalf, 8>*>(in0", vector_load + 1),
            std::string::npos);
  EXPECT_LT(vector_load, source.find(" < 8) {"));
}

// The reduction family reads its prologue through the same emitter: a causal mask built in the
// graph before a softmax, and BERT's embeddings (token lookup, position lookup of an arange, add)
// before a layer norm, generate and compile at every point the family offers by default.
TEST(GlueFormsTest, ReductionProloguesReadThroughGlue) {
  const KernelFamily* family = FindFamily(forge::v1::KERNEL_FAMILY_REDUCTION);
  ASSERT_NE(family, nullptr);
  constexpr auto kReduction = forge::v1::KERNEL_FAMILY_REDUCTION;
  const std::vector<GlueCase> cases = {
      {"causal_mask_softmax",
       TaskBuilder()
           .Input("scores", kF32, {2, 9, 9})
           .Node("ones", "ones", "default", {IntsArg("size", {9, 9}), DTypeArg("dtype", kBool)}, kBool, {9, 9})
           .Node("mask", "triu", "default", {TensorArg("self", "ones"), IntArg("diagonal", 1)}, kBool, {9, 9})
           .Node("masked", "masked_fill", "Scalar", {TensorArg("self", "scores"), TensorArg("mask", "mask"), FloatArg("value", -1e4)}, kF32, {2, 9, 9})
           .Node("out", "softmax", "int", {TensorArg("self", "masked"), IntArg("dim", -1)}, kF32, {2, 9, 9})
           .Output("out")
           .Build(kReduction)},
      {"embeddings_layer_norm",
       TaskBuilder()
           .Input("tokens", kBF16, {37, 64})
           .Input("positions", kBF16, {16, 64})
           .Input("ids", kI64, {2, 11})
           .Input("w", kBF16, {64})
           .Input("b", kBF16, {64})
           .Node("range", "arange", "default", {IntArg("end", 11)}, kI64, {11})
           .Node("token_rows", "embedding", "default", {TensorArg("weight", "tokens"), TensorArg("indices", "ids")}, kBF16, {2, 11, 64})
           .Node("position_rows", "embedding", "default", {TensorArg("weight", "positions"), TensorArg("indices", "range")}, kBF16, {11, 64})
           .Node("sum", "add", "Tensor", {TensorArg("self", "token_rows"), TensorArg("other", "position_rows")}, kBF16, {2, 11, 64})
           .Node("out", "layer_norm", "default",
                 {TensorArg("input", "sum"), IntsArg("normalized_shape", {64}),
                  testing::OptionalTensorArg("weight", "w"), testing::OptionalTensorArg("bias", "b"),
                  FloatArg("eps", 1e-5)},
                 kBF16, {2, 11, 64})
           .Output("out")
           .Build(kReduction)},
  };
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const GlueCase& c : cases) {
    ASSERT_TRUE(family->Applies(c.task).ok()) << c.label << ": " << family->Applies(c.task);
    absl::StatusOr<std::vector<TemplateSpace>> spaces = family->ScheduleSpace(c.task);
    ASSERT_TRUE(spaces.ok()) << c.label << ": " << spaces.status();
    for (const TemplateSpace& space : *spaces) {
      absl::StatusOr<GeneratedKernel> kernel = family->Generate(c.task, DefaultPoint(space));
      ASSERT_TRUE(kernel.ok()) << c.label << " " << space.template_name << ": " << kernel.status();
      kernels.push_back(*kernel);
      labels.push_back(absl::StrCat(c.label, " ", space.template_name));
    }
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true);
}

// Malformed glue nodes are errors that name the node, never a crash.
TEST(GlueFormsTest, MalformedArgumentsAreErrors) {
  PointwiseFamily family;
  const std::vector<std::pair<KernelTask, std::string>> cases = {
      {TaskBuilder()
           .Input("a", kF32, {3, 4})
           .Input("b", kF32, {3, 4, 1})
           .Node("out", "cat", "default", {TensorsArg("tensors", {"a", "b"}), IntArg("dim", 1)}, kF32, {3, 8})
           .Output("out")
           .Build(kPointwise),
       "has 3 dims, the output 2"},
      {TaskBuilder()
           .Input("a", kF32, {3, 4})
           .Node("out", "cat", "default", {TensorsArg("tensors", {"a", "a"}), IntArg("dim", 2)}, kF32, {3, 8})
           .Output("out")
           .Build(kPointwise),
       "dim 2 is out of range"},
      {TaskBuilder()
           .Input("a", kF32, {3, 4})
           .Node("out", "cat", "default", {TensorsArg("tensors", {"a", "a"}), IntArg("dim", 1)}, kF32, {3, 9})
           .Output("out")
           .Build(kPointwise),
       "inputs cover 8 of the output's 9 positions"},
      {TaskBuilder()
           .Input("x", kF32, {6})
           .Input("counts", kI64, {6})
           .Node("out", "repeat_interleave", "self_int", {TensorArg("self", "x"), TensorArg("repeats", "counts")}, kF32, {12})
           .Output("out")
           .Build(kPointwise),
       "reads repeat_interleave's int repeats only"},
      {TaskBuilder()
           .Input("x", kF32, {5, 7})
           .Node("out", "roll", "default", {TensorArg("self", "x"), IntsArg("shifts", {1, 2}), IntsArg("dims", {0})}, kF32, {5, 7})
           .Output("out")
           .Build(kPointwise),
       "shifts and dims differ"},
      {TaskBuilder()
           .Input("x", kF32, {4, 5})
           .Node("out", "repeat", "default", {TensorArg("self", "x"), IntsArg("repeats", {2})}, kF32, {8, 5})
           .Output("out")
           .Build(kPointwise),
       "repeats must name every dim"},
      {TaskBuilder()
           .Input("x", kF32, {5})
           .Node("out", "triu", "default", {TensorArg("self", "x")}, kF32, {5})
           .Output("out")
           .Build(kPointwise),
       "needs a matrix"},
      {TaskBuilder()
           .Input("x", kF32, {5, 8})
           .Input("index", kI64, {5, 3, 1})
           .Node("out", "gather", "default", {TensorArg("self", "x"), IntArg("dim", 1), TensorArg("index", "index")}, kF32, {5, 3, 1})
           .Output("out")
           .Build(kPointwise),
       "differ in rank"},
      {TaskBuilder()
           .Input("w", kF32, {5, 8})
           .Input("ids", kI64, {3})
           .Node("out", "embedding", "default", {TensorArg("weight", "w"), NoneArg("indices")}, kF32, {3, 8})
           .Output("out")
           .Build(kPointwise),
       "no tensor 'indices'"},
  };
  for (const auto& [task, expected] : cases) {
    const absl::Status status = family.Applies(task);
    EXPECT_FALSE(status.ok()) << expected;
    EXPECT_THAT(std::string(status.message()), HasSubstr(expected));
  }
}

// The acceptance models (tests/fixtures: python/tests/models.py's GlueAttention and GlueOps):
// every task the partitioner gives a generated family applies, and its default candidate
// compiles for sm_90; the pointwise tasks compile at every vector width they allow.
TEST(GlueFormsModelsTest, EveryGeneratedTaskOfTheGlueModelsCompiles) {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  ASSERT_NE(directory, nullptr) << "FORGE_TEST_MODELS is not set; run through ctest";
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  int pointwise_tasks = 0;
  for (const std::string model : {"glue_attention", "glue_ops"}) {
    SCOPED_TRACE(model);
    forge::v1::Graph graph;
    std::ifstream file(std::string(directory) + "/" + model + "/graph.pb", std::ios::binary);
    ASSERT_TRUE(file && graph.ParseFromIstream(&file));
    absl::StatusOr<graph::PartitionResult> partition = graph::Partition(graph);
    ASSERT_TRUE(partition.ok()) << partition.status();
    for (const KernelTask& task : partition->tasks) {
      // ATen tasks have nothing to generate; an ATTENTION task (glue_attention's attention,
      // recognised whole) gets the sdpa_library family's library calls, nothing to compile.
      if (task.family() == forge::v1::KERNEL_FAMILY_ATEN ||
          task.family() == forge::v1::KERNEL_FAMILY_ATTENTION) {
        continue;
      }
      const KernelFamily* family = FindFamily(task.family());
      ASSERT_NE(family, nullptr);
      const bool glue = std::any_of(task.group().nodes().begin(), task.group().nodes().end(),
                                    [](const forge::v1::Node& node) { return IsGlueOp(node); });
      if (const absl::Status applies = family->Applies(task); !applies.ok()) {
        // Only another family's own limits (a 4-d matmul) may leave a task without candidates.
        EXPECT_FALSE(glue || task.family() == kPointwise) << applies;
        continue;
      }
      absl::StatusOr<std::vector<TemplateSpace>> spaces = family->ScheduleSpace(task);
      ASSERT_TRUE(spaces.ok()) << spaces.status();
      std::vector<SchedulePoint> points;
      for (const TemplateSpace& space : *spaces) points.push_back(DefaultPoint(space));
      if (task.family() == kPointwise) {
        ++pointwise_tasks;
        for (int64_t width : {1, 2, 4, 8}) {
          SchedulePoint point = DefaultPoint(spaces->front());
          point.parameters["vector_width"] = width;
          point.parameters["elements_per_thread"] = 1;
          point.parameters["threads_per_block"] = 128;
          if (family->Validate(task, point).ok()) points.push_back(point);
        }
      }
      for (const SchedulePoint& point : points) {
        absl::StatusOr<GeneratedKernel> kernel = family->Generate(task, point);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        if (kernel->kernel_name.empty()) continue;  // a library call
        kernels.push_back(*kernel);
        labels.push_back(absl::StrCat(model, " ", task.digest().substr(0, 12), " ",
                                      point.template_name));
      }
    }
  }
  EXPECT_GE(pointwise_tasks, 6);
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_90"});
}

}  // namespace
}  // namespace forge::codegen
