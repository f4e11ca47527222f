#include "aten/aten.h"

#include <google/protobuf/text_format.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fixtures/test_models.h"

namespace forge::aten {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ReadBytes(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file) << "cannot open " << path;
  std::ostringstream contents;
  contents << file.rdbuf();
  return std::move(contents).str();
}

std::filesystem::path ModelsDir() {
  const char* dir = std::getenv("FORGE_TEST_MODELS");
  EXPECT_NE(dir, nullptr) << "FORGE_TEST_MODELS is not set (ctest sets it through the forge_models fixture)";
  return dir == nullptr ? std::filesystem::path() : std::filesystem::path(dir);
}

const v1::TensorSpec& SpecOf(const v1::Graph& graph, const std::string& value_name) {
  for (const v1::Value& value : graph.values()) {
    if (value.name() == value_name) return value.tensor();
  }
  ADD_FAILURE() << "the graph has no value " << value_name;
  return v1::TensorSpec::default_instance();
}

HostTensor HostFromFile(const v1::TensorSpec& spec, const std::filesystem::path& path) {
  return HostTensor{spec.dtype(), {spec.shape().begin(), spec.shape().end()}, {}, ReadBytes(path)};
}

// An exported test model (tests/fixtures/make_models.py) with its inputs and PyTorch's outputs.
struct Model {
  std::filesystem::path dir;
  v1::Graph graph;
  std::vector<HostTensor> inputs;
  std::vector<HostTensor> expected;
};

Model LoadModel(const std::string& name) {
  Model model;
  model.dir = ModelsDir() / name;
  EXPECT_TRUE(model.graph.ParseFromString(ReadBytes(model.dir / "graph.pb"))) << name;
  for (const v1::GraphInput& input : model.graph.inputs()) {
    if (input.kind() != v1::INPUT_KIND_USER_INPUT) continue;
    model.inputs.push_back(
        HostFromFile(SpecOf(model.graph, input.value_name()),
                     model.dir / "inputs" / (std::to_string(model.inputs.size()) + ".bin")));
  }
  for (const v1::GraphOutput& output : model.graph.outputs()) {
    if (output.kind() != v1::OUTPUT_KIND_USER_OUTPUT) continue;
    model.expected.push_back(
        HostFromFile(SpecOf(model.graph, output.value_name()),
                     model.dir / "expected" / (std::to_string(model.expected.size()) + ".bin")));
  }
  return model;
}

template <typename T>
T Element(const HostTensor& tensor, std::size_t index) {
  T value;
  std::memcpy(&value, tensor.bytes.data() + index * sizeof(T), sizeof(T));
  return value;
}

float Bfloat16ToFloat(std::uint16_t bits) {
  const std::uint32_t widened = static_cast<std::uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof(value));
  return value;
}

// The elements as doubles; float64 elements are first rounded to float32 when `as_float32`.
std::vector<double> Elements(const HostTensor& tensor, bool as_float32 = false) {
  std::vector<double> values;
  switch (tensor.dtype) {
    case v1::DTYPE_FLOAT32:
      for (std::size_t i = 0; i < tensor.bytes.size() / 4; ++i) values.push_back(Element<float>(tensor, i));
      break;
    case v1::DTYPE_FLOAT64:
      for (std::size_t i = 0; i < tensor.bytes.size() / 8; ++i) {
        const double value = Element<double>(tensor, i);
        values.push_back(as_float32 ? static_cast<float>(value) : value);
      }
      break;
    case v1::DTYPE_BFLOAT16:
      for (std::size_t i = 0; i < tensor.bytes.size() / 2; ++i) {
        values.push_back(Bfloat16ToFloat(Element<std::uint16_t>(tensor, i)));
      }
      break;
    case v1::DTYPE_INT64:
      for (std::size_t i = 0; i < tensor.bytes.size() / 8; ++i)
        values.push_back(Element<std::int64_t>(tensor, i));
      break;
    default: ADD_FAILURE() << "no element reader for " << v1::DType_Name(tensor.dtype);
  }
  return values;
}

// ||actual - expected|| / ||expected||.
double RelativeError(const std::vector<double>& actual, const std::vector<double>& expected) {
  EXPECT_EQ(actual.size(), expected.size());
  double difference = 0, norm = 0;
  for (std::size_t i = 0; i < actual.size() && i < expected.size(); ++i) {
    difference += (actual[i] - expected[i]) * (actual[i] - expected[i]);
    norm += expected[i] * expected[i];
  }
  return std::sqrt(difference) / std::max(std::sqrt(norm), 1e-30);
}

class ExportedModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ExportedModelTest, NativeMatchesPyTorch) {
  const Model model = LoadModel(GetParam());
  absl::StatusOr<std::vector<HostTensor>> outputs =
      RunGraph(model.graph, model.inputs, DirectoryBlobSource(model.dir / "blobs"), Precision::kNative);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), model.expected.size());
  for (std::size_t i = 0; i < outputs->size(); ++i) {
    const HostTensor& actual = (*outputs)[i];
    EXPECT_EQ(actual.dtype, model.expected[i].dtype) << "output " << i;
    EXPECT_EQ(actual.shape, model.expected[i].shape) << "output " << i;
    EXPECT_LE(RelativeError(Elements(actual), Elements(model.expected[i])), 1e-6) << "output " << i;
  }
}

TEST_P(ExportedModelTest, Float64MatchesPyTorch) {
  const Model model = LoadModel(GetParam());
  absl::StatusOr<std::vector<HostTensor>> outputs =
      RunGraph(model.graph, model.inputs, DirectoryBlobSource(model.dir / "blobs"), Precision::kFloat64);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), model.expected.size());
  for (std::size_t i = 0; i < outputs->size(); ++i) {
    const HostTensor& actual = (*outputs)[i];
    // PyTorch's own output is rounded to its dtype: float32 to ~1e-7, bfloat16 to ~4e-3.
    const v1::DType expected_dtype = model.expected[i].dtype;
    ASSERT_TRUE(expected_dtype == v1::DTYPE_FLOAT32 || expected_dtype == v1::DTYPE_BFLOAT16)
        << "output " << i;
    const double tolerance = expected_dtype == v1::DTYPE_FLOAT32 ? 1e-5 : 1e-2;
    EXPECT_EQ(actual.dtype, v1::DTYPE_FLOAT64) << "output " << i;
    EXPECT_EQ(actual.shape, model.expected[i].shape) << "output " << i;
    EXPECT_LE(RelativeError(Elements(actual, /*as_float32=*/true), Elements(model.expected[i])),
              tolerance)
        << "output " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllModels, ExportedModelTest,
                         ::testing::ValuesIn(forge::testing::kTestModelNames),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

absl::flat_hash_map<std::string, std::string> BlobsInMemory(const std::filesystem::path& dir) {
  absl::flat_hash_map<std::string, std::string> blobs;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    blobs[entry.path().filename().string()] = ReadBytes(entry.path());
  }
  return blobs;
}

// The first parameter of the graph: it has no inline bytes, so it is read from the blob source.
const v1::GraphInput& FirstParameter(const v1::Graph& graph) {
  for (const v1::GraphInput& input : graph.inputs()) {
    if (input.kind() == v1::INPUT_KIND_PARAMETER && input.data().inline_bytes().empty()) return input;
  }
  ADD_FAILURE() << "the graph has no blob-backed parameter";
  return v1::GraphInput::default_instance();
}

TEST(ReferenceBlobTest, InMemorySourceMatchesDirectory) {
  const Model model = LoadModel("mlp");
  absl::StatusOr<std::vector<HostTensor>> outputs = RunGraph(
      model.graph, model.inputs, InMemoryBlobSource(BlobsInMemory(model.dir / "blobs")), Precision::kNative);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 1u);
  EXPECT_EQ((*outputs)[0].bytes, model.expected[0].bytes);
}

TEST(ReferenceBlobTest, WrongDigestNamesTheInput) {
  const Model model = LoadModel("mlp");
  const v1::GraphInput& parameter = FirstParameter(model.graph);
  auto blobs = BlobsInMemory(model.dir / "blobs");
  blobs[parameter.data().sha256()][0] ^= 1;
  absl::Status status =
      RunGraph(model.graph, model.inputs, InMemoryBlobSource(std::move(blobs)), Precision::kNative).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr(parameter.value_name()), HasSubstr(parameter.target()),
                                      HasSubstr("has digest")));
}

TEST(ReferenceBlobTest, WrongSizeNamesTheInput) {
  const Model model = LoadModel("mlp");
  const v1::GraphInput& parameter = FirstParameter(model.graph);
  auto blobs = BlobsInMemory(model.dir / "blobs");
  blobs[parameter.data().sha256()].pop_back();
  absl::Status status =
      RunGraph(model.graph, model.inputs, InMemoryBlobSource(std::move(blobs)), Precision::kNative).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr(parameter.value_name()), HasSubstr("bytes")));
}

TEST(ReferenceBlobTest, MissingBlobNamesTheInput) {
  const Model model = LoadModel("mlp");
  const v1::GraphInput& parameter = FirstParameter(model.graph);
  auto blobs = BlobsInMemory(model.dir / "blobs");
  blobs.erase(parameter.data().sha256());
  absl::Status status =
      RunGraph(model.graph, model.inputs, InMemoryBlobSource(std::move(blobs)), Precision::kNative).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_THAT(status.message(), HasSubstr(parameter.value_name()));
}

TEST(ReferenceBlobTest, WrongUserInputShapeIsRejected) {
  Model model = LoadModel("mlp");
  model.inputs[0].shape = {64, 8};
  absl::Status status =
      RunGraph(model.graph, model.inputs, DirectoryBlobSource(model.dir / "blobs"), Precision::kNative)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("user input 0"), HasSubstr("[64, 8]")));
}

v1::KernelTask ParseTask(const std::string& text) {
  v1::KernelTask task;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &task)) << text;
  return task;
}

std::string FloatBytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// A group with a broadcast add (alpha=2), a multiply by a Python number, a cast to bfloat16 and a
// two-output reduction: mul = (a + 2b) * 0.5; max = max(bfloat16(mul), dim=1).
constexpr char kGroupTask[] = R"pb(
  digest: "hand-built"
  family: KERNEL_FAMILY_REDUCTION
  group {
    values {
      name: "a"
      tensor {
        dtype: DTYPE_FLOAT32
        shape: [ 2, 3 ]
      }
    }
    values {
      name: "b"
      tensor {
        dtype: DTYPE_FLOAT32
        shape: [ 3 ]
      }
    }
    values {
      name: "add"
      tensor {
        dtype: DTYPE_FLOAT32
        shape: [ 2, 3 ]
      }
    }
    values {
      name: "mul"
      tensor {
        dtype: DTYPE_FLOAT32
        shape: [ 2, 3 ]
      }
    }
    values {
      name: "to_bf16"
      tensor {
        dtype: DTYPE_BFLOAT16
        shape: [ 2, 3 ]
      }
    }
    values {
      name: "max.0"
      tensor {
        dtype: DTYPE_BFLOAT16
        shape: [ 2 ]
      }
    }
    values {
      name: "max.1"
      tensor {
        dtype: DTYPE_INT64
        shape: [ 2 ]
      }
    }
    inputs { kind: INPUT_KIND_USER_INPUT value_name: "a" }
    inputs { kind: INPUT_KIND_USER_INPUT value_name: "b" }
    nodes {
      name: "add"
      op: "aten::add"
      overload: "Tensor"
      schema: "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
      arguments { name: "self" tensor: "a" }
      arguments { name: "other" tensor: "b" }
      arguments { name: "alpha" keyword: true int_value: 2 }
      outputs: "add"
    }
    nodes {
      name: "mul"
      op: "aten::mul"
      overload: "Tensor"
      arguments { name: "self" tensor: "add" }
      arguments { name: "other" float_value: 0.5 }
      outputs: "mul"
    }
    nodes {
      name: "to_bf16"
      op: "aten::_to_copy"
      overload: "default"
      arguments { name: "self" tensor: "mul" }
      arguments { name: "dtype" keyword: true dtype: DTYPE_BFLOAT16 }
      outputs: "to_bf16"
    }
    nodes {
      name: "max"
      op: "aten::max"
      overload: "dim"
      arguments { name: "self" tensor: "to_bf16" }
      arguments { name: "dim" int_value: 1 }
      outputs: "max.0"
      outputs: "max.1"
    }
    outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "mul" }
    outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "max.0" }
    outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "max.1" }
  }
)pb";

const std::vector<float> kA = {1.01f, -2.0f, 0.3f, 4.0f, 5.1f, -6.0f};
const std::vector<float> kB = {0.25f, 0.5f, 1.0f};

std::vector<HostTensor> GroupInputs() {
  return {HostTensor{v1::DTYPE_FLOAT32, {2, 3}, {}, FloatBytes(kA)},
          HostTensor{v1::DTYPE_FLOAT32, {3}, {}, FloatBytes(kB)}};
}

// (a + 2b) * 0.5 in the given arithmetic, row-major.
template <typename T>
std::vector<double> ExpectedMul() {
  std::vector<double> values;
  for (int i = 0; i < 6; ++i) {
    values.push_back((static_cast<T>(kA[i]) + T{2} * static_cast<T>(kB[i % 3])) * T{0.5});
  }
  return values;
}

TEST(ReferenceTaskTest, RunsGroupNatively) {
  absl::StatusOr<std::vector<HostTensor>> outputs =
      RunTaskGroup(ParseTask(kGroupTask), GroupInputs(), Precision::kNative);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 3u);
  const HostTensor& mul = (*outputs)[0];
  EXPECT_EQ(mul.dtype, v1::DTYPE_FLOAT32);
  EXPECT_EQ(Elements(mul), ExpectedMul<float>());
  const HostTensor& max_values = (*outputs)[1];
  EXPECT_EQ(max_values.dtype, v1::DTYPE_BFLOAT16);
  const std::vector<double> exact = ExpectedMul<double>();
  // Row maxima: 0.5*(0.3+2) in row 0, 0.5*(5.1+1) in row 1, rounded to bfloat16 (8 bits).
  EXPECT_NEAR(Elements(max_values)[0], exact[2], exact[2] / 128);
  EXPECT_NEAR(Elements(max_values)[1], exact[4], exact[4] / 128);
  EXPECT_NE(Elements(max_values)[0], static_cast<float>(exact[2]));
  const HostTensor& max_indices = (*outputs)[2];
  EXPECT_EQ(max_indices.dtype, v1::DTYPE_INT64);
  EXPECT_THAT(Elements(max_indices), ElementsAre(2, 1));
}

// A result no node and no output reads may differ from its declared spec (batch norm's saved
// statistics are [0] on the CPU, [C] on CUDA); a result that is read may not.
TEST(ReferenceTaskTest, OnlyResultsThatAreReadMustMatchTheirSpecs) {
  v1::KernelTask task = ParseTask(kGroupTask);
  for (v1::Value& value : *task.mutable_group()->mutable_values()) {
    if (value.name() == "max.1") value.mutable_tensor()->set_shape(0, 5);
  }
  absl::Status read = RunTaskGroup(task, GroupInputs(), Precision::kNative).status();
  EXPECT_EQ(read.code(), absl::StatusCode::kInvalidArgument) << read;
  EXPECT_THAT(read.message(),
              HasSubstr("output 'max.1' has shape [2], the graph declares [5]"));

  task.mutable_group()->mutable_outputs()->RemoveLast();  // max.1 is no longer read
  absl::StatusOr<std::vector<HostTensor>> outputs =
      RunTaskGroup(task, GroupInputs(), Precision::kNative);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ(outputs->size(), 2u);
}

TEST(ReferenceTaskTest, Float64ModeReplacesFloatingDtypeArguments) {
  absl::StatusOr<std::vector<HostTensor>> outputs =
      RunTaskGroup(ParseTask(kGroupTask), GroupInputs(), Precision::kFloat64);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 3u);
  EXPECT_EQ((*outputs)[0].dtype, v1::DTYPE_FLOAT64);
  EXPECT_EQ(Elements((*outputs)[0]), ExpectedMul<double>());
  // The cast to bfloat16 became a cast to float64: the maxima are exact.
  const std::vector<double> exact = ExpectedMul<double>();
  EXPECT_EQ((*outputs)[1].dtype, v1::DTYPE_FLOAT64);
  EXPECT_THAT(Elements((*outputs)[1]), ElementsAre(exact[2], exact[4]));
  EXPECT_EQ((*outputs)[2].dtype, v1::DTYPE_INT64);
  EXPECT_THAT(Elements((*outputs)[2]), ElementsAre(2, 1));
}

// A factory with dtype=None (torch's default float32) and a CUDA device, as a GPU export records
// it: the reference runs it on the CPU, and in float64 when asked.
constexpr char kFactoryTask[] = R"pb(
  digest: "factory"
  group {
    values {
      name: "full"
      tensor {
        dtype: DTYPE_FLOAT32
        shape: [ 2 ]
      }
    }
    nodes {
      name: "full"
      op: "aten::full"
      overload: "default"
      arguments {
        name: "size"
        ints { values: [ 2 ] }
      }
      arguments { name: "fill_value" float_value: 0.1 }
      arguments {
        name: "device"
        keyword: true
        device { type: "cuda" index: 0 }
      }
      outputs: "full"
    }
    outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "full" }
  }
)pb";

TEST(ReferenceTaskTest, FactoryWithDefaultDtypeFollowsPrecision) {
  absl::StatusOr<std::vector<HostTensor>> native =
      RunTaskGroup(ParseTask(kFactoryTask), {}, Precision::kNative);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_EQ((*native)[0].dtype, v1::DTYPE_FLOAT32);
  EXPECT_THAT(Elements((*native)[0]), ElementsAre(0.1f, 0.1f));
  absl::StatusOr<std::vector<HostTensor>> wide =
      RunTaskGroup(ParseTask(kFactoryTask), {}, Precision::kFloat64);
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ((*wide)[0].dtype, v1::DTYPE_FLOAT64);
  EXPECT_THAT(Elements((*wide)[0]), ElementsAre(0.1, 0.1));
}

TEST(ReferenceTaskTest, InputStridesAreHonored) {
  std::vector<HostTensor> inputs = GroupInputs();
  inputs[0].strides = {1, 2};  // column-major storage of the same row-major elements
  absl::StatusOr<std::vector<HostTensor>> outputs =
      RunTaskGroup(ParseTask(kGroupTask), inputs, Precision::kNative);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ(Elements((*outputs)[0]), ExpectedMul<float>());
  // Elementwise ATen ops keep their input's layout.
  EXPECT_THAT((*outputs)[0].strides, ElementsAre(1, 2));
}

TEST(ReferenceTaskTest, WrongInputCountIsRejected) {
  std::vector<HostTensor> inputs = GroupInputs();
  inputs.pop_back();
  absl::Status status = RunTaskGroup(ParseTask(kGroupTask), inputs, Precision::kNative).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("takes 2 inputs, 1 given"));
}

// kGroupTask with its first node's text replaced.
v1::KernelTask TaskWithFirstNode(const std::string& node_text) {
  v1::KernelTask task = ParseTask(kGroupTask);
  v1::Node* node = task.mutable_group()->mutable_nodes(0);
  node->Clear();
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(node_text, node)) << node_text;
  return task;
}

absl::Status RunWithFirstNode(const std::string& node_text) {
  return RunTaskGroup(TaskWithFirstNode(node_text), GroupInputs(), Precision::kNative).status();
}

TEST(ReferenceErrorTest, UnknownOperatorNamesTheNode) {
  absl::Status status = RunWithFirstNode(R"pb(
    name: "add"
    op: "aten::does_not_exist"
    overload: "default"
    arguments { name: "self" tensor: "a" }
    outputs: "add"
  )pb");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("node 'add'"), HasSubstr("aten::does_not_exist")));
}

TEST(ReferenceErrorTest, ArgumentOfTheWrongKindNamesNodeAndArgument) {
  absl::Status status = RunWithFirstNode(R"pb(
    name: "add"
    op: "aten::add"
    overload: "Tensor"
    arguments { name: "self" tensor: "a" }
    arguments { name: "other" string_value: "b" }
    outputs: "add"
  )pb");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("node 'add'"), HasSubstr("argument 'other'"),
                                      HasSubstr("string_value"), HasSubstr("Tensor")));
}

TEST(ReferenceErrorTest, ArgumentNotInSchemaIsRejected) {
  absl::Status status = RunWithFirstNode(R"pb(
    name: "add"
    op: "aten::add"
    overload: "Tensor"
    arguments { name: "self" tensor: "a" }
    arguments { name: "other" tensor: "b" }
    arguments { name: "beta" int_value: 2 }
    outputs: "add"
  )pb");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("node 'add'"), HasSubstr("argument 'beta'")));
}

TEST(ReferenceErrorTest, MissingRequiredArgumentNamesIt) {
  absl::Status status = RunWithFirstNode(R"pb(
    name: "add"
    op: "aten::add"
    overload: "Tensor"
    arguments { name: "self" tensor: "a" }
    outputs: "add"
  )pb");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("node 'add'"), HasSubstr("argument 'other'"), HasSubstr("required")));
}

TEST(ReferenceErrorTest, UndefinedValueNamesIt) {
  absl::Status status = RunWithFirstNode(R"pb(
    name: "add"
    op: "aten::add"
    overload: "Tensor"
    arguments { name: "self" tensor: "a" }
    arguments { name: "other" tensor: "nowhere" }
    outputs: "add"
  )pb");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("node 'add'"), HasSubstr("'nowhere'")));
}

TEST(ReferenceErrorTest, SchemaFromAnotherTorchIsRejected) {
  absl::Status status = RunWithFirstNode(R"pb(
    name: "add"
    op: "aten::add"
    overload: "Tensor"
    schema: "aten::add.Tensor(Tensor self, Tensor other) -> Tensor"
    arguments { name: "self" tensor: "a" }
    arguments { name: "other" tensor: "b" }
    outputs: "add"
  )pb");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("node 'add'"), HasSubstr("Scalar alpha=1")));
}

TEST(ReferenceErrorTest, AtenFailureNamesTheNode) {
  // [2, 3] + [2] does not broadcast.
  v1::KernelTask task = TaskWithFirstNode(R"pb(
    name: "add"
    op: "aten::add"
    overload: "Tensor"
    arguments { name: "self" tensor: "a" }
    arguments { name: "other" tensor: "b" }
    outputs: "add"
  )pb");
  task.mutable_group()->mutable_values(1)->mutable_tensor()->set_shape(0, 2);
  std::vector<HostTensor> inputs = GroupInputs();
  inputs[1] = HostTensor{v1::DTYPE_FLOAT32, {2}, {}, FloatBytes({1.0f, 2.0f})};
  absl::Status status = RunTaskGroup(task, inputs, Precision::kNative).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("node 'add'"), HasSubstr("ATen failed")));
}

}  // namespace
}  // namespace forge::aten
