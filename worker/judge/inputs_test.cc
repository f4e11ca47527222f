#include "worker/judge/inputs.h"

#include <cmath>
#include <set>

#include "absl/strings/match.h"
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

}  // namespace
}  // namespace forge::judge
