#include "worker/judge/inputs.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace forge::judge {
namespace {

forge::v1::TensorSpec Spec(forge::v1::DType dtype, std::vector<int64_t> shape) {
  forge::v1::TensorSpec spec;
  spec.set_dtype(dtype);
  for (int64_t size : shape) spec.add_shape(size);
  return spec;
}

double Mean(const std::vector<double>& values) {
  double sum = 0;
  for (double value : values) sum += value;
  return sum / values.size();
}

double StandardDeviation(const std::vector<double>& values) {
  double mean = Mean(values);
  double sum = 0;
  for (double value : values) sum += (value - mean) * (value - mean);
  return std::sqrt(sum / values.size());
}

TEST(DrawInputTest, DrawsDifferInDistributionAndAreReproducible) {
  forge::v1::TensorSpec spec = Spec(forge::v1::DTYPE_FLOAT32, {100, 100});
  std::vector<double> normal = DrawInput(spec, {}, 0, 0, 7)->ToDoubles();
  std::vector<double> uniform = DrawInput(spec, {}, 1, 0, 7)->ToDoubles();
  EXPECT_NEAR(Mean(normal), 0, 0.05);
  EXPECT_NEAR(StandardDeviation(normal), 1, 0.05);
  EXPECT_NEAR(StandardDeviation(uniform), 4 / std::sqrt(12.0), 0.05);  // uniform(-2, 2)
  for (double value : uniform) ASSERT_TRUE(value >= -2 && value <= 2);
  EXPECT_EQ(DrawInput(spec, {}, 0, 0, 7)->storage, DrawInput(spec, {}, 0, 0, 7)->storage);
  EXPECT_NE(DrawInput(spec, {}, 0, 0, 7)->storage, DrawInput(spec, {}, 0, 0, 8)->storage);
  EXPECT_NE(DrawInput(spec, {}, 0, 0, 7)->storage, DrawInput(spec, {}, 0, 1, 7)->storage);
  EXPECT_NE(DrawInput(spec, {}, 0, 0, 7)->storage, DrawInput(spec, {}, 3, 0, 7)->storage);
  EXPECT_EQ(DescribeDraw(1), "uniform(-2, 2)");
}

TEST(DrawInputTest, LargeDrawsAreTheSameOnAnyNumberOfThreadsAndChunksDiffer) {
  // Five chunks, the last one partial.
  const int64_t count = 4 * ThreadPool::kChunkElements + 123;
  const forge::v1::TensorSpec spec = Spec(forge::v1::DTYPE_BFLOAT16, {count});
  ThreadPool one(1), four(4);
  for (int draw = 0; draw < 3; ++draw) {
    absl::StatusOr<HostTensor> serial = DrawInput(spec, {}, draw, 1, 7, one);
    absl::StatusOr<HostTensor> parallel = DrawInput(spec, {}, draw, 1, 7, four);
    ASSERT_TRUE(serial.ok() && parallel.ok());
    EXPECT_EQ(serial->storage, parallel->storage) << "draw " << draw;
  }
  // Each chunk has its own stream: no chunk repeats the first one's values.
  const std::vector<double> values = DrawInput(spec, {}, 0, 1, 7, four)->ToDoubles();
  for (int64_t chunk = 1; chunk < 5; ++chunk) {
    EXPECT_FALSE(std::equal(values.begin(), values.begin() + 100,
                            values.begin() + chunk * ThreadPool::kChunkElements))
        << "chunk " << chunk;
  }
  EXPECT_NEAR(Mean(values), 0, 0.01);
  EXPECT_NEAR(StandardDeviation(values), 1, 0.01);
}

TEST(DrawInputTest, ScaledDrawGivesEachInputItsOwnScale) {
  forge::v1::TensorSpec spec = Spec(forge::v1::DTYPE_FLOAT32, {200, 100});
  std::set<double> scales;
  for (int input = 0; input < 5; ++input) {
    double deviation = StandardDeviation(DrawInput(spec, {}, 2, input, 1)->ToDoubles());
    EXPECT_NEAR(deviation / InputScale(2, input), 1, 0.05) << input;
    scales.insert(InputScale(2, input));
  }
  EXPECT_EQ(scales.size(), 5u);
  EXPECT_EQ(InputScale(0, 3), 1.0);
}

TEST(DrawInputTest, NeverZero) {
  for (forge::v1::DType dtype :
       {forge::v1::DTYPE_FLOAT8_E4M3FN, forge::v1::DTYPE_FLOAT16, forge::v1::DTYPE_BFLOAT16}) {
    for (int draw = 0; draw < 3; ++draw) {
      for (double value : DrawInput(Spec(dtype, {4096}), {}, draw, 4, 3)->ToDoubles()) {
        ASSERT_NE(value, 0) << forge::v1::DType_Name(dtype);
      }
    }
  }
}

TEST(DrawInputTest, DomainsAreRespected) {
  InputDomain classes{InputDomain::Kind::kIntegerRange, {0, 10}, "classes"};
  std::set<double> seen;
  for (double value : DrawInput(Spec(forge::v1::DTYPE_INT64, {1000}), classes, 0, 0, 1)->ToDoubles()) {
    ASSERT_TRUE(value >= 0 && value < 10) << value;
    seen.insert(value);
  }
  EXPECT_EQ(seen.size(), 10u);
  InputDomain positive{InputDomain::Kind::kPositive, {}, "variance"};
  for (int draw = 0; draw < 3; ++draw) {
    for (double value : DrawInput(Spec(forge::v1::DTYPE_FLOAT32, {1000}), positive, draw, 0, 1)
                            ->ToDoubles()) {
      ASSERT_GT(value, 0);
    }
  }
  std::set<double> booleans;
  for (double value : DrawInput(Spec(forge::v1::DTYPE_BOOL, {100}), {}, 0, 0, 1)->ToDoubles()) {
    booleans.insert(value);
  }
  EXPECT_EQ(booleans, (std::set<double>{0, 1}));
}

// The draws' element encoding (draw_element.h, also compiled for the GPU) stores what the judge's
// EncodeElement stores, for every dtype: normal values, ties, subnormals of the format, overflow,
// zeros, infinities and NaN.
TEST(DrawElementTest, EncodingIsEncodeElements) {
  const std::vector<forge::v1::DType> dtypes = {
      forge::v1::DTYPE_FLOAT64,       forge::v1::DTYPE_FLOAT32,     forge::v1::DTYPE_FLOAT16,
      forge::v1::DTYPE_BFLOAT16,      forge::v1::DTYPE_FLOAT8_E4M3FN, forge::v1::DTYPE_FLOAT8_E5M2,
      forge::v1::DTYPE_INT8,          forge::v1::DTYPE_INT16,       forge::v1::DTYPE_INT32,
      forge::v1::DTYPE_INT64,         forge::v1::DTYPE_UINT8,       forge::v1::DTYPE_BOOL};
  std::vector<double> values = {0.0, -0.0, 1.0, -1.0, 448.0, 464.0, 480.0, 500.0, 65504.0, 65519.0,
                                65520.0, 1e6, 1e39, -1e39, 57344.0, 61440.0, 6e-8, 3e-8, 2.9e-8,
                                1e-40, 5e-324, std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(),
                                std::numeric_limits<double>::quiet_NaN()};
  std::mt19937_64 generator(11);
  std::uniform_real_distribution<double> exponent(-30, 20);
  std::uniform_int_distribution<int> integers(-300, 300);
  for (int k = 0; k < 20000; ++k) {
    values.push_back((k % 2 ? -1 : 1) * std::exp2(exponent(generator)));
    values.push_back(integers(generator));
  }
  // Exact ties of every small format: a kept mantissa and half a quantum below it.
  for (int bits = 1; bits < 256; ++bits) {
    for (int quantum_exponent : {-24, -17, -10, -9, -3, 0, 4}) {
      values.push_back(std::ldexp(bits + 0.5, quantum_exponent));
    }
  }
  for (forge::v1::DType dtype : dtypes) {
    const DrawDType draw_dtype = *DrawDTypeOf(dtype);
    const int bytes = DrawElementBytes(draw_dtype);
    for (double value : values) {
      if (!IsFloatingPoint(dtype) && !(std::isfinite(value) && std::trunc(value) == value)) continue;
      std::byte expected[8] = {};
      EncodeElement(dtype, value, expected);
      const uint64_t bits = EncodeDrawValue(draw_dtype, value);
      ASSERT_EQ(std::memcmp(expected, &bits, bytes), 0)
          << forge::v1::DType_Name(dtype) << " " << value;
      if (IsFloatingPoint(dtype) && !std::isnan(value)) {
        const double decoded = DecodeDrawValue(draw_dtype, bits);
        const double want = DecodeElement(dtype, expected);
        ASSERT_TRUE(decoded == want || (std::isnan(decoded) && std::isnan(want)))
            << forge::v1::DType_Name(dtype) << " " << value;
      }
    }
  }
}

TEST(DrawElementTest, LogarithmIsAccurate) {
  std::mt19937_64 generator(5);
  std::uniform_real_distribution<double> unit(1e-12, 1.0);
  for (int k = 0; k < 100000; ++k) {
    const double x = k == 0 ? 1.0 : unit(generator);
    ASSERT_NEAR(DrawLog(x), std::log(x), 4e-16 * std::max(1.0, std::fabs(std::log(x)))) << x;
  }
}

TEST(DrawElementTest, StridedDrawsPlaceLogicalElements) {
  forge::v1::TensorSpec strided = Spec(forge::v1::DTYPE_FLOAT32, {3, 4});
  for (int64_t stride : {1, 5}) strided.add_strides(stride);  // column-major with a gap
  forge::v1::TensorSpec dense = Spec(forge::v1::DTYPE_FLOAT32, {12});
  absl::StatusOr<HostTensor> a = DrawInput(strided, {}, 0, 0, 9);
  absl::StatusOr<HostTensor> b = DrawInput(dense, {}, 0, 0, 9);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(a->Get(i), b->Get(i)) << i;
  EXPECT_EQ(DrawInput(Spec(forge::v1::DTYPE_INT64, {4}),
                      {InputDomain::Kind::kIntegerRange, {3, 3}, "empty"}, 0, 0, 1)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DrawDTypeOf(forge::v1::DTYPE_COMPLEX64).status().code(),
            absl::StatusCode::kUnimplemented);
}

// A task with the group's inputs named as value names and one node using them.
forge::v1::KernelTask TaskWithNode(const std::string& op,
                                   std::vector<std::pair<std::string, forge::v1::TensorSpec>> inputs,
                                   std::vector<forge::v1::Argument> arguments) {
  forge::v1::KernelTask task;
  for (auto& [name, spec] : inputs) {
    task.mutable_group()->add_inputs()->set_value_name(name);
    *task.add_inputs() = spec;
  }
  forge::v1::Node* node = task.mutable_group()->add_nodes();
  node->set_op(op);
  for (auto& argument : arguments) *node->add_arguments() = argument;
  return task;
}

forge::v1::Argument TensorArgument(const std::string& name, const std::string& value) {
  forge::v1::Argument argument;
  argument.set_name(name);
  argument.set_tensor(value);
  return argument;
}

TEST(InferInputDomainsTest, CrossEntropyTargetsAreClasses) {
  forge::v1::KernelTask task = TaskWithNode(
      "aten::nll_loss_forward",
      {{"logits", Spec(forge::v1::DTYPE_FLOAT32, {32, 10})},
       {"labels", Spec(forge::v1::DTYPE_INT64, {32})}},
      {TensorArgument("self", "logits"), TensorArgument("target", "labels")});
  std::vector<InputDomain> domains = InferInputDomains(task);
  ASSERT_EQ(domains.size(), 2u);
  EXPECT_EQ(domains[0].kind, InputDomain::Kind::kAny);
  EXPECT_EQ(domains[1].kind, InputDomain::Kind::kIntegerRange);
  EXPECT_EQ(domains[1].range.high, 10);
  EXPECT_TRUE(absl::StrContains(domains[1].reason, "[0, 10)")) << domains[1].reason;
}

TEST(InferInputDomainsTest, GatherIndicesFollowTheDim) {
  forge::v1::Argument dim;
  dim.set_name("dim");
  dim.set_int_value(-1);
  forge::v1::KernelTask task = TaskWithNode(
      "aten::gather",
      {{"x", Spec(forge::v1::DTYPE_FLOAT32, {8, 33})}, {"i", Spec(forge::v1::DTYPE_INT64, {8, 4})}},
      {TensorArgument("self", "x"), dim, TensorArgument("index", "i")});
  std::vector<InputDomain> domains = InferInputDomains(task);
  EXPECT_EQ(domains[1].kind, InputDomain::Kind::kIntegerRange);
  EXPECT_EQ(domains[1].range.high, 33);
}

TEST(InferInputDomainsTest, RunningVarianceIsPositive) {
  forge::v1::KernelTask task = TaskWithNode(
      "aten::_native_batch_norm_legit_no_training",
      {{"x", Spec(forge::v1::DTYPE_FLOAT32, {2, 3, 4, 4})},
       {"var", Spec(forge::v1::DTYPE_FLOAT32, {3})}},
      {TensorArgument("input", "x"), TensorArgument("running_var", "var")});
  std::vector<InputDomain> domains = InferInputDomains(task);
  EXPECT_EQ(domains[0].kind, InputDomain::Kind::kAny);
  EXPECT_EQ(domains[1].kind, InputDomain::Kind::kPositive);
}

// The kinds of `draws`, in order.
std::vector<ops::AdversarialDraw> Kinds(const std::vector<AdversarialDraw>& draws) {
  std::vector<ops::AdversarialDraw> kinds;
  for (const AdversarialDraw& draw : draws) kinds.push_back(draw.kind);
  return kinds;
}

std::vector<AdversarialDraw> AdversarialOf(const forge::v1::KernelTask& task) {
  return ChooseAdversarialDraws(task, InferInputDomains(task));
}

TEST(ChooseAdversarialDrawsTest, EachOpFamilyGetsItsDistributions) {
  const forge::v1::TensorSpec rows = Spec(forge::v1::DTYPE_FLOAT32, {32, 10});
  EXPECT_EQ(Kinds(AdversarialOf(
                TaskWithNode("aten::_softmax", {{"x", rows}}, {TensorArgument("self", "x")}))),
            std::vector<ops::AdversarialDraw>{ops::kLargeLogits});
  EXPECT_EQ(Kinds(AdversarialOf(TaskWithNode("aten::native_layer_norm", {{"x", rows}},
                                             {TensorArgument("input", "x")}))),
            (std::vector<ops::AdversarialDraw>{ops::kLargeMean, ops::kTinyVariance}));
  EXPECT_EQ(Kinds(AdversarialOf(
                TaskWithNode("aten::sum", {{"x", rows}}, {TensorArgument("self", "x")}))),
            (std::vector<ops::AdversarialDraw>{ops::kCancellation, ops::kZerosAndSubnormals}));
  EXPECT_EQ(Kinds(AdversarialOf(
                TaskWithNode("aten::relu", {{"x", rows}}, {TensorArgument("self", "x")}))),
            (std::vector<ops::AdversarialDraw>{ops::kActivationKinks, ops::kZerosAndSubnormals}));
  // A GEMM asks for none; exp neither (a large logit overflows in eager too).
  EXPECT_TRUE(AdversarialOf(TaskWithNode("aten::mm", {{"a", rows}, {"b", rows}},
                                         {TensorArgument("self", "a"), TensorArgument("mat2", "b")}))
                  .empty());
  EXPECT_TRUE(
      AdversarialOf(TaskWithNode("aten::exp", {{"x", rows}}, {TensorArgument("self", "x")}))
          .empty());
  // Cross-entropy: large logits for its scores, the ends of the class range for its targets.
  const std::vector<AdversarialDraw> loss = AdversarialOf(TaskWithNode(
      "aten::cross_entropy_loss",
      {{"logits", rows}, {"labels", Spec(forge::v1::DTYPE_INT64, {32})}},
      {TensorArgument("self", "logits"), TensorArgument("target", "labels")}));
  ASSERT_EQ(Kinds(loss),
            (std::vector<ops::AdversarialDraw>{ops::kLargeLogits, ops::kIntegerEdges}));
  EXPECT_EQ(loss[0].inputs, std::vector<int>{0});
  EXPECT_EQ(loss[1].inputs, std::vector<int>{1});
  EXPECT_TRUE(absl::StrContains(loss[0].reason, "self of aten::cross_entropy_loss"))
      << loss[0].reason;
  EXPECT_TRUE(absl::StrContains(loss[1].reason, "target of aten::cross_entropy_loss, target of "
                                                "aten::cross_entropy_loss: classes [0, 10)"))
      << loss[1].reason;
  // Gather's index gets the edges; scatter's, whose repeated indices race, does not.
  forge::v1::Argument dim;
  dim.set_name("dim");
  dim.set_int_value(1);
  for (const char* op : {"aten::gather", "aten::scatter"}) {
    const std::vector<AdversarialDraw> draws = AdversarialOf(TaskWithNode(
        op, {{"x", rows}, {"i", Spec(forge::v1::DTYPE_INT64, {32, 4})}},
        {TensorArgument("self", "x"), dim, TensorArgument("index", "i")}));
    EXPECT_EQ(Kinds(draws), std::string(op) == "aten::gather"
                                ? std::vector<ops::AdversarialDraw>{ops::kIntegerEdges}
                                : std::vector<ops::AdversarialDraw>{})
        << op;
  }
}

TEST(ChooseAdversarialDrawsTest, EveryReaderMustAskAndViewsAreLookedThrough) {
  const forge::v1::TensorSpec rows = Spec(forge::v1::DTYPE_FLOAT32, {32, 10});
  // x -> view -> softmax: the view passes x on.
  forge::v1::KernelTask viewed =
      TaskWithNode("aten::view", {{"x", rows}}, {TensorArgument("self", "x")});
  viewed.mutable_group()->mutable_nodes(0)->add_outputs("v");
  forge::v1::Node* softmax = viewed.mutable_group()->add_nodes();
  softmax->set_op("aten::_softmax");
  *softmax->add_arguments() = TensorArgument("self", "v");
  EXPECT_EQ(Kinds(AdversarialOf(viewed)), std::vector<ops::AdversarialDraw>{ops::kLargeLogits});
  // x read by softmax and by exp: exp does not ask, so x keeps the standard draws.
  forge::v1::KernelTask shared = viewed;
  forge::v1::Node* exp = shared.mutable_group()->add_nodes();
  exp->set_op("aten::exp");
  *exp->add_arguments() = TensorArgument("self", "x");
  EXPECT_TRUE(AdversarialOf(shared).empty());
  // relu(x) + y: x gets the kinks (both readers ask for zeros; only relu for kinks: not x).
  forge::v1::KernelTask sum =
      TaskWithNode("aten::relu", {{"x", rows}, {"y", rows}}, {TensorArgument("self", "x")});
  sum.mutable_group()->mutable_nodes(0)->add_outputs("r");
  forge::v1::Node* add = sum.mutable_group()->add_nodes();
  add->set_op("aten::add");
  *add->add_arguments() = TensorArgument("self", "r");
  *add->add_arguments() = TensorArgument("other", "x");
  const std::vector<AdversarialDraw> draws = AdversarialOf(sum);
  ASSERT_EQ(Kinds(draws), std::vector<ops::AdversarialDraw>{ops::kZerosAndSubnormals});
  EXPECT_EQ(draws[0].inputs, std::vector<int>{0});  // y is read by nothing
}

// A view with many outputs (unbind, split) of an input: every output leads back to it, however
// often the value map grows while they are entered (an iterator into it was once read after
// inserting, which trapped on hardened Abseil once the map rehashed).
TEST(ChooseAdversarialDrawsTest, ViewsWithManyOutputsAreLookedThrough) {
  constexpr int kOutputs = 200;
  forge::v1::KernelTask task = TaskWithNode(
      "aten::unbind", {{"x", Spec(forge::v1::DTYPE_FLOAT32, {kOutputs, 10})}},
      {TensorArgument("self", "x")});
  for (int i = 0; i < kOutputs; ++i) {
    task.mutable_group()->mutable_nodes(0)->add_outputs(absl::StrCat("row", i));
    forge::v1::Node* softmax = task.mutable_group()->add_nodes();
    softmax->set_op("aten::_softmax");
    *softmax->add_arguments() = TensorArgument("self", absl::StrCat("row", i));
  }
  const std::vector<AdversarialDraw> draws = AdversarialOf(task);
  ASSERT_EQ(Kinds(draws), std::vector<ops::AdversarialDraw>{ops::kLargeLogits});
  EXPECT_EQ(draws[0].inputs, std::vector<int>{0});
}

std::vector<double> Adversarial(forge::v1::DType dtype, ops::AdversarialDraw kind,
                                InputDomain domain = {}) {
  absl::StatusOr<HostTensor> drawn =
      DrawAdversarialInput(Spec(dtype, {64, 64}), domain, kind, 3, 0, 11);
  EXPECT_TRUE(drawn.ok()) << drawn.status();
  return drawn.ok() ? drawn->ToDoubles() : std::vector<double>{};
}

TEST(DrawAdversarialInputTest, DrawsHaveTheNamedProperties) {
  // Large logits: scale 1000, every value finite in float16 (65504) too.
  std::vector<double> logits = Adversarial(forge::v1::DTYPE_FLOAT32, ops::kLargeLogits);
  EXPECT_NEAR(StandardDeviation(logits), 1000, 50);
  for (double value : Adversarial(forge::v1::DTYPE_FLOAT16, ops::kLargeLogits)) {
    ASSERT_TRUE(std::isfinite(value));
  }
  EXPECT_GT(*std::max_element(logits.begin(), logits.end()), 100);  // exp overflows float32
  // Large mean, tiny variance.
  std::vector<double> shifted = Adversarial(forge::v1::DTYPE_FLOAT32, ops::kLargeMean);
  EXPECT_NEAR(Mean(shifted), 256, 0.1);
  EXPECT_NEAR(StandardDeviation(shifted), 1, 0.05);
  std::vector<double> narrow = Adversarial(forge::v1::DTYPE_FLOAT32, ops::kTinyVariance);
  EXPECT_NEAR(StandardDeviation(narrow), 1e-3, 1e-4);
  // Cancellation: each pair sums to normal(0, 1) from terms of scale 8, signs mixed.
  std::vector<double> pairs = Adversarial(forge::v1::DTYPE_FLOAT32, ops::kCancellation);
  std::vector<double> pair_sums;
  int negative = 0;
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
    pair_sums.push_back(pairs[i] + pairs[i + 1]);
    negative += pairs[i] < 0;
  }
  EXPECT_NEAR(StandardDeviation(pairs), 8, 0.5);
  EXPECT_NEAR(StandardDeviation(pair_sums), 1, 0.1);
  EXPECT_NEAR(negative, pair_sums.size() / 2, pair_sums.size() / 10);
  // Kinks: half exactly at one, the rest within 0.1 of one.
  int at_kink = 0;
  for (double value : Adversarial(forge::v1::DTYPE_FLOAT32, ops::kActivationKinks)) {
    double nearest = 1e9;
    for (double kink : {0.0, 1.0, -1.0, 3.0, -3.0, 6.0}) {
      nearest = std::min(nearest, std::fabs(value - kink));
    }
    ASSERT_LT(nearest, 0.1) << value;
    at_kink += nearest == 0;
  }
  EXPECT_NEAR(at_kink, 64 * 64 / 2, 64 * 64 / 10);
  // Zeros of both signs and subnormals, in every floating dtype.
  for (forge::v1::DType dtype : {forge::v1::DTYPE_FLOAT32, forge::v1::DTYPE_FLOAT16,
                                 forge::v1::DTYPE_BFLOAT16, forge::v1::DTYPE_FLOAT64}) {
    int positive_zeros = 0, negative_zeros = 0, subnormals = 0;
    for (double value : Adversarial(dtype, ops::kZerosAndSubnormals)) {
      if (value == 0) (std::signbit(value) ? negative_zeros : positive_zeros)++;
      if (value != 0 && std::fabs(value) < 1e-30 && dtype != forge::v1::DTYPE_FLOAT16) ++subnormals;
      if (dtype == forge::v1::DTYPE_FLOAT16 && value != 0 && std::fabs(value) < 6.1e-5) ++subnormals;
    }
    EXPECT_GT(positive_zeros, 800) << forge::v1::DType_Name(dtype);
    EXPECT_GT(negative_zeros, 800) << forge::v1::DType_Name(dtype);
    EXPECT_GT(subnormals, 800) << forge::v1::DType_Name(dtype);
  }
  // Integer edges: mostly the ends of the range, never outside it.
  InputDomain classes{InputDomain::Kind::kIntegerRange, {0, 10}, "classes"};
  int ends = 0;
  for (double value : Adversarial(forge::v1::DTYPE_INT64, ops::kIntegerEdges, classes)) {
    ASSERT_TRUE(value >= 0 && value < 10) << value;
    ends += value == 0 || value == 9;
  }
  EXPECT_GT(ends, 64 * 64 * 7 / 10);
  // A distribution that does not suit the input is refused.
  EXPECT_FALSE(DrawAdversarialInput(Spec(forge::v1::DTYPE_INT64, {4}), classes,
                                    ops::kLargeLogits, 3, 0, 1)
                   .ok());
  // Reproducible.
  EXPECT_EQ(Adversarial(forge::v1::DTYPE_FLOAT32, ops::kLargeMean), shifted);
}

}  // namespace
}  // namespace forge::judge
