#include "compiler/import/pt2_importer.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "aten/aten.h"
#include "common/digest/sha256.h"
#include "compiler/import/pt2_archive.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/fixtures/test_models.h"

namespace forge {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Records = std::vector<std::pair<std::string, std::string>>;

std::filesystem::path ModelsDir() {
  const char* dir = std::getenv("FORGE_TEST_MODELS");
  EXPECT_NE(dir, nullptr) << "FORGE_TEST_MODELS is not set (run through ctest's fixture)";
  return dir == nullptr ? std::filesystem::path() : std::filesystem::path(dir);
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file.good()) << path;
  return std::string(std::istreambuf_iterator<char>(file), {});
}

// model.pt2 holds the functionalized program, model_raw.pt2 the program as export traced it.
std::string ArchiveBytes(const std::string& model, const std::string& file = "model.pt2") {
  return ReadFile(ModelsDir() / model / file);
}

// The records of a real archive, to be edited and written back with pt2::WriteArchive.
Records RecordsOf(const std::string& model, const std::string& file = "model.pt2") {
  auto archive = pt2::Pt2Archive::Open(ArchiveBytes(model, file), std::uint64_t{1} << 32);
  EXPECT_TRUE(archive.ok()) << archive.status();
  Records records;
  for (const std::string& name : (*archive)->record_names()) {
    auto bytes = (*archive)->ReadRecord(name);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    records.emplace_back(name, *bytes);
  }
  return records;
}

std::string& Record(Records& records, const std::string& name) {
  for (auto& [record_name, bytes] : records) {
    if (record_name == name) return bytes;
  }
  ADD_FAILURE() << "no record " << name;
  static std::string missing;
  return missing;
}

// Replaces the first occurrence of `from`, which must occur.
void ReplaceFirst(std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << "'" << from << "' does not occur";
  text.replace(at, from.size(), to);
}

absl::StatusOr<ImportedModel> ImportRecords(const Records& records,
                                            const ImportOptions& options = {}) {
  auto archive = pt2::WriteArchive(records);
  EXPECT_TRUE(archive.ok()) << archive.status();
  return ImportPt2FromBytes(*archive, "edited", options);
}

// Equal field by field, a NaN equal to a NaN (a float constant may be one).
bool SameArgument(const forge::v1::Argument& a, const forge::v1::Argument& b) {
  ::google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  MessageDifferencer differencer;
  differencer.set_field_comparator(&comparator);
  return differencer.Compare(a, b);
}

// Imported value names may differ from Python's; positions (inputs, then node outputs) pair them.
class ValueNames {
 public:
  ValueNames(const forge::v1::Graph& python, const forge::v1::Graph& imported) {
    for (int i = 0; i < python.inputs_size() && i < imported.inputs_size(); ++i) {
      to_python_[imported.inputs(i).value_name()] = python.inputs(i).value_name();
    }
    for (int n = 0; n < python.nodes_size() && n < imported.nodes_size(); ++n) {
      for (int o = 0; o < python.nodes(n).outputs_size() && o < imported.nodes(n).outputs_size();
           ++o) {
        to_python_[imported.nodes(n).outputs(o)] = python.nodes(n).outputs(o);
      }
    }
  }
  std::string ToPython(const std::string& name) const {
    auto it = to_python_.find(name);
    return it == to_python_.end() ? "<unpaired " + name + ">" : it->second;
  }
  forge::v1::Argument ToPython(forge::v1::Argument argument) const {
    switch (argument.value_case()) {
      case forge::v1::Argument::kTensor: argument.set_tensor(ToPython(argument.tensor())); break;
      case forge::v1::Argument::kOptionalTensor:
        argument.mutable_optional_tensor()->set_value_name(
            ToPython(argument.optional_tensor().value_name()));
        break;
      case forge::v1::Argument::kTensors:
        for (std::string& name : *argument.mutable_tensors()->mutable_value_names()) {
          name = ToPython(name);
        }
        break;
      case forge::v1::Argument::kOptionalTensors:
        for (auto& item : *argument.mutable_optional_tensors()->mutable_items()) {
          if (item.has_value_name()) item.set_value_name(ToPython(item.value_name()));
        }
        break;
      default: break;
    }
    return argument;
  }

 private:
  absl::flat_hash_map<std::string, std::string> to_python_;
};

class ImportMatchesPythonExport : public ::testing::TestWithParam<std::string> {};

TEST_P(ImportMatchesPythonExport, SameGraphAndBlobs) {
  const std::filesystem::path dir = ModelsDir() / GetParam();
  forge::v1::Graph python;
  ASSERT_TRUE(python.ParseFromString(ReadFile(dir / "graph.pb")));
  auto imported_or = ImportPt2((dir / "model.pt2").string());
  ASSERT_TRUE(imported_or.ok()) << imported_or.status();
  const forge::v1::Graph& imported = imported_or->graph;
  const ValueNames names(python, imported);

  EXPECT_EQ(imported.metadata().source_format(), forge::v1::SOURCE_FORMAT_PT2_ARCHIVE);
  EXPECT_EQ(imported.metadata().torch_version(), python.metadata().torch_version());

  ASSERT_EQ(imported.nodes_size(), python.nodes_size());
  for (int n = 0; n < python.nodes_size(); ++n) {
    const forge::v1::Node& want = python.nodes(n);
    const forge::v1::Node& got = imported.nodes(n);
    SCOPED_TRACE(absl::StrCat("node ", n, " '", want.name(), "'"));
    EXPECT_EQ(got.op(), want.op());
    EXPECT_EQ(got.overload(), want.overload());
    EXPECT_EQ(got.schema(), want.schema());
    ASSERT_EQ(got.arguments_size(), want.arguments_size());
    for (int a = 0; a < want.arguments_size(); ++a) {
      const forge::v1::Argument renamed = names.ToPython(got.arguments(a));
      EXPECT_TRUE(SameArgument(renamed, want.arguments(a)))
          << "imported " << renamed.ShortDebugString() << "\npython   "
          << want.arguments(a).ShortDebugString();
    }
    ASSERT_EQ(got.outputs_size(), want.outputs_size());
  }

  ASSERT_EQ(imported.inputs_size(), python.inputs_size());
  for (int i = 0; i < python.inputs_size(); ++i) {
    forge::v1::GraphInput got = imported.inputs(i);
    got.set_value_name(names.ToPython(got.value_name()));
    EXPECT_TRUE(MessageDifferencer::Equals(got, python.inputs(i)))
        << "imported " << got.ShortDebugString() << "\npython   "
        << python.inputs(i).ShortDebugString();
  }

  ASSERT_EQ(imported.outputs_size(), python.outputs_size());
  for (int i = 0; i < python.outputs_size(); ++i) {
    forge::v1::GraphOutput got = imported.outputs(i);
    got.set_value_name(names.ToPython(got.value_name()));
    EXPECT_TRUE(MessageDifferencer::Equals(got, python.outputs(i))) << got.ShortDebugString();
  }

  absl::flat_hash_map<std::string, const forge::v1::TensorSpec*> python_specs;
  for (const forge::v1::Value& value : python.values()) python_specs[value.name()] = &value.tensor();
  ASSERT_EQ(imported.values_size(), python.values_size());
  for (const forge::v1::Value& value : imported.values()) {
    auto want = python_specs.find(names.ToPython(value.name()));
    ASSERT_NE(want, python_specs.end()) << value.name();
    EXPECT_TRUE(MessageDifferencer::Equals(value.tensor(), *want->second))
        << value.name() << ": imported " << value.tensor().ShortDebugString() << "\npython "
        << want->second->ShortDebugString();
  }

  size_t python_blobs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "blobs")) {
    ++python_blobs;
    const std::string digest = entry.path().filename().string();
    auto blob = imported_or->blobs.find(digest);
    ASSERT_NE(blob, imported_or->blobs.end()) << "missing blob " << digest;
    EXPECT_EQ(blob->second, ReadFile(entry.path())) << digest;
    EXPECT_EQ(Sha256Hex(blob->second), digest);
  }
  EXPECT_EQ(imported_or->blobs.size(), python_blobs);
}

// python/tests/models.py, as tests/fixtures/make_models.py names them.
const auto kTestModels = ::testing::ValuesIn(forge::testing::kTestModelNames);
INSTANTIATE_TEST_SUITE_P(TestModels, ImportMatchesPythonExport, kTestModels);
const auto kNonFiniteModels = ::testing::ValuesIn(forge::testing::kNonFiniteConstantModelNames);
INSTANTIATE_TEST_SUITE_P(NonFiniteConstants, ImportMatchesPythonExport, kNonFiniteModels);

const forge::v1::TensorSpec& SpecOf(const forge::v1::Graph& graph, const std::string& value_name) {
  for (const forge::v1::Value& value : graph.values()) {
    if (value.name() == value_name) return value.tensor();
  }
  ADD_FAILURE() << "the graph has no value " << value_name;
  return forge::v1::TensorSpec::default_instance();
}

// The values of a float32 or bfloat16 tensor (a bfloat16 is the top half of a float32).
std::vector<float> Floats(const aten::HostTensor& tensor) {
  if (tensor.dtype == forge::v1::DTYPE_BFLOAT16) {
    std::vector<float> values(tensor.bytes.size() / sizeof(uint16_t));
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t half_bits;
      std::memcpy(&half_bits, tensor.bytes.data() + 2 * i, sizeof(half_bits));
      const uint32_t bits = static_cast<uint32_t>(half_bits) << 16;
      std::memcpy(&values[i], &bits, sizeof(bits));
    }
    return values;
  }
  EXPECT_EQ(tensor.dtype, forge::v1::DTYPE_FLOAT32);
  std::vector<float> values(tensor.bytes.size() / sizeof(float));
  std::memcpy(values.data(), tensor.bytes.data(), values.size() * sizeof(float));
  return values;
}

// Archives as users hold them: torch.export.export's program, with in-place ops (resnet18's
// relu_ and add_) and CompositeImplicit ops (batch_norm, chunk, reshape) kept.
class RawArchiveImports : public ::testing::TestWithParam<std::string> {};

TEST_P(RawArchiveImports, FunctionalAndRunsLikePyTorch) {
  const std::filesystem::path dir = ModelsDir() / GetParam();
  auto imported = ImportPt2((dir / "model_raw.pt2").string());
  ASSERT_TRUE(imported.ok()) << imported.status();
  const forge::v1::Graph& graph = imported->graph;

  absl::flat_hash_set<std::string> defined;
  for (const forge::v1::GraphInput& input : graph.inputs()) defined.insert(input.value_name());
  for (const forge::v1::Node& node : graph.nodes()) {
    SCOPED_TRACE(node.name());
    EXPECT_THAT(node.schema(), ::testing::Not(HasSubstr("!"))) << "a mutating op remains";
    for (const forge::v1::Argument& argument : node.arguments()) {
      std::vector<std::string> reads(argument.tensors().value_names().begin(),
                                     argument.tensors().value_names().end());
      if (argument.has_tensor()) reads.push_back(argument.tensor());
      if (argument.has_optional_tensor()) reads.push_back(argument.optional_tensor().value_name());
      for (const auto& item : argument.optional_tensors().items()) reads.push_back(item.value_name());
      for (const std::string& name : reads) {
        EXPECT_TRUE(name.empty() || defined.contains(name)) << name << " read before definition";
      }
    }
    for (const std::string& output : node.outputs()) defined.insert(output);
  }

  std::vector<aten::HostTensor> inputs;
  for (const forge::v1::GraphInput& input : graph.inputs()) {
    if (input.kind() != forge::v1::INPUT_KIND_USER_INPUT) continue;
    const forge::v1::TensorSpec& spec = SpecOf(graph, input.value_name());
    inputs.push_back({spec.dtype(), {spec.shape().begin(), spec.shape().end()}, {},
                      ReadFile(dir / "inputs" / absl::StrCat(inputs.size(), ".bin"))});
  }
  auto outputs = aten::RunGraph(graph, inputs, aten::InMemoryBlobSource(imported->blobs),
                                aten::Precision::kNative);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  for (size_t i = 0; i < outputs->size(); ++i) {
    SCOPED_TRACE(absl::StrCat("output ", i));
    const std::vector<float> actual = Floats((*outputs)[i]);
    // expected/<i>.bin holds PyTorch's output in the output's own dtype.
    const std::vector<float> expected = Floats(
        {(*outputs)[i].dtype, {}, {}, ReadFile(dir / "expected" / absl::StrCat(i, ".bin"))});
    ASSERT_EQ(actual.size(), expected.size());
    double difference = 0, norm = 0;
    for (size_t k = 0; k < actual.size(); ++k) {
      difference += (actual[k] - expected[k]) * (actual[k] - expected[k]);
      norm += expected[k] * expected[k];
    }
    EXPECT_LE(std::sqrt(difference), 1e-5 * std::sqrt(norm)) << "relative L2 error too large";
  }
}

INSTANTIATE_TEST_SUITE_P(TestModels, RawArchiveImports, kTestModels);
INSTANTIATE_TEST_SUITE_P(NonFiniteConstants, RawArchiveImports, kNonFiniteModels);

// The float arguments of the graph's nodes with operator `op`, in order.
std::vector<double> FloatArguments(const forge::v1::Graph& graph, const std::string& op) {
  std::vector<double> values;
  for (const forge::v1::Node& node : graph.nodes()) {
    if (node.op() != op) continue;
    for (const forge::v1::Argument& argument : node.arguments()) {
      if (argument.has_float_value()) values.push_back(argument.float_value());
    }
  }
  return values;
}

// The archive spells them "NaN", "Infinity" and "-Infinity"; they import as those values.
TEST(ImportPt2, NonFiniteFloatConstants) {
  auto causal = ImportPt2((ModelsDir() / "causal_mask_softmax" / "model.pt2").string());
  ASSERT_TRUE(causal.ok()) << causal.status();
  EXPECT_THAT(FloatArguments(causal->graph, "aten::masked_fill"),
              ::testing::ElementsAre(-std::numeric_limits<double>::infinity()));

  auto constants = ImportPt2((ModelsDir() / "nonfinite_constants" / "model.pt2").string());
  ASSERT_TRUE(constants.ok()) << constants.status();
  const std::vector<double> fills = FloatArguments(constants->graph, "aten::masked_fill");
  ASSERT_EQ(fills.size(), 2);
  EXPECT_TRUE(std::isnan(fills[0]));
  EXPECT_EQ(fills[1], std::numeric_limits<double>::infinity());
  EXPECT_THAT(FloatArguments(constants->graph, "aten::clamp"),
              ::testing::ElementsAre(-std::numeric_limits<double>::infinity(), 4.0));
}

const char kModelJson[] = "models/model.json";
const char kWeightsConfig[] = "data/weights/model_weights_config.json";

TEST(ImportPt2Errors, TruncatedArchive) {
  std::string bytes = ArchiveBytes("mlp");
  bytes.resize(bytes.size() / 2);
  auto imported = ImportPt2FromBytes(bytes, "truncated");
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("not a readable torch.export archive"));
}

TEST(ImportPt2Errors, RandomBytes) {
  std::mt19937 random(7);
  std::string bytes(4096, '\0');
  for (char& byte : bytes) byte = static_cast<char>(random());
  auto imported = ImportPt2FromBytes(bytes, "random");
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("not a readable torch.export archive"));
}

TEST(ImportPt2Errors, MissingFileNamesThePath) {
  auto imported = ImportPt2("/nonexistent/model.pt2");
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(imported.status().message(), HasSubstr("/nonexistent/model.pt2"));
}

TEST(ImportPt2Errors, ArchiveWithoutProgram) {
  Records records = RecordsOf("mlp");
  std::erase_if(records, [](const auto& record) { return record.first == kModelJson; });
  auto imported = ImportRecords(records);
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("models/<name>.json is missing"));
}

TEST(ImportPt2Errors, WrongArchiveFormat) {
  Records records = RecordsOf("mlp");
  Record(records, "archive_format") = "zip";
  auto imported = ImportRecords(records);
  EXPECT_THAT(imported.status().message(), AllOf(HasSubstr("archive_format"), HasSubstr("'pt2'")));
}

TEST(ImportPt2Errors, MalformedJson) {
  Records records = RecordsOf("mlp");
  std::string& json = Record(records, kModelJson);
  json.resize(json.size() / 2);
  auto imported = ImportRecords(records);
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("models/model.json: malformed JSON"));
}

TEST(ImportPt2Errors, BadFieldNamesTheLocation) {
  Records records = RecordsOf("mlp");
  ReplaceFirst(Record(records, kModelJson), "\"x\": {\"dtype\": 7", "\"x\": {\"dtype\": \"float\"");
  auto imported = ImportRecords(records);
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(),
              AllOf(HasSubstr("models/model.json: graph_module.graph.tensor_values[\"x\"].dtype"),
                    HasSubstr("expected an integer, found a string")));
}

TEST(ImportPt2Errors, OtherStringsAreNotFloats) {
  Records records = RecordsOf("nonfinite_constants");
  ReplaceFirst(Record(records, kModelJson), "{\"as_float\": \"NaN\"}",
               "{\"as_float\": \"nan\"}");
  auto imported = ImportRecords(records);
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(),
              AllOf(HasSubstr("node 'masked_fill'"), HasSubstr("as_float"),
                    HasSubstr("found the string \"nan\"")));
}

TEST(ImportPt2Errors, UnknownArgumentKind) {
  Records records = RecordsOf("conv_bn_relu");
  ReplaceFirst(Record(records, kModelJson), "\"as_ints\"", "\"as_complex\"");
  auto imported = ImportRecords(records);
  EXPECT_THAT(imported.status().message(),
              AllOf(HasSubstr("node 'conv2d'"), HasSubstr("argument 'stride'"),
                    HasSubstr("'as_complex'")));
}

TEST(ImportPt2Errors, SymbolicShape) {
  Records records = RecordsOf("mlp");
  ReplaceFirst(Record(records, kModelJson), "\"x\": {\"dtype\": 7, \"sizes\": [{\"as_int\": 8}",
               "\"x\": {\"dtype\": 7, \"sizes\": [{\"as_expr\": {\"expr_str\": \"s0\"}}");
  auto imported = ImportRecords(records);
  EXPECT_THAT(imported.status().message(),
              AllOf(HasSubstr("tensor_values[\"x\"].sizes[0]"), HasSubstr("'s0'"),
                    HasSubstr("static shapes")));
}

// In mlp, node 'gelu' reads the first linear's result 'linear'.
const char kGeluReadsLinear[] = "{\"name\": \"self\", \"arg\": {\"as_tensor\": {\"name\": \"linear\"}}";

TEST(ImportPt2, InPlaceOpOnIntermediateBecomesFunctional) {
  Records records = RecordsOf("mlp");
  std::string& json = Record(records, kModelJson);
  ReplaceFirst(json, "torch.ops.aten.gelu.default", "torch.ops.aten.gelu_.default");
  // The second linear reads the written tensor under its old name: it must see gelu_'s result.
  ReplaceFirst(json, "{\"name\": \"input\", \"arg\": {\"as_tensor\": {\"name\": \"gelu\"}}",
               "{\"name\": \"input\", \"arg\": {\"as_tensor\": {\"name\": \"linear\"}}");
  auto imported = ImportRecords(records);
  ASSERT_TRUE(imported.ok()) << imported.status();
  auto functional = ImportPt2FromBytes(ArchiveBytes("mlp"), "edited");
  ASSERT_TRUE(functional.ok()) << functional.status();
  ASSERT_EQ(imported->graph.nodes_size(), 3);
  for (int n = 0; n < 3; ++n) {
    EXPECT_TRUE(MessageDifferencer::Equals(imported->graph.nodes(n), functional->graph.nodes(n)))
        << "imported " << imported->graph.nodes(n).ShortDebugString() << "\nfunctional "
        << functional->graph.nodes(n).ShortDebugString();
  }
}

// A fuzz seed: mul, then add_ and relu_ writing it, relu_ and the graph output naming it 'mul'.
TEST(ImportPt2, InPlaceChainReadsTheLatestResult) {
  auto imported = ImportRecords(
      {{"archive_format", "pt2"},
       {"archive_version", "0"},
       {kModelJson, ReadFile(std::filesystem::path(FORGE_FUZZ_SEEDS) / "inplace_chain.json")}});
  ASSERT_TRUE(imported.ok()) << imported.status();
  const forge::v1::Graph& graph = imported->graph;
  ASSERT_EQ(graph.nodes_size(), 3);
  EXPECT_EQ(graph.nodes(1).op(), "aten::add");
  EXPECT_EQ(graph.nodes(1).arguments(0).tensor(), "mul");
  EXPECT_EQ(graph.nodes(2).op(), "aten::relu");
  EXPECT_EQ(graph.nodes(2).arguments(0).tensor(), "add_");
  ASSERT_EQ(graph.outputs_size(), 1);
  EXPECT_EQ(graph.outputs(0).value_name(), "relu_");
}

TEST(ImportPt2Errors, InPlaceOpOnGraphInput) {
  for (const std::string input : {"x", "p_up_weight"}) {
    SCOPED_TRACE(input);
    Records records = RecordsOf("mlp");
    std::string& json = Record(records, kModelJson);
    ReplaceFirst(json, "torch.ops.aten.gelu.default", "torch.ops.aten.gelu_.default");
    ReplaceFirst(json, kGeluReadsLinear,
                 "{\"name\": \"self\", \"arg\": {\"as_tensor\": {\"name\": \"" + input + "\"}}");
    auto imported = ImportRecords(records);
    EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(imported.status().message(),
                AllOf(HasSubstr("mutating op aten::gelu_ at node 'gelu' writes '" + input +
                                "', a graph input"),
                      HasSubstr("re-export after ep.run_decompositions({})")))
        << imported.status();
  }
}

TEST(ImportPt2Errors, InPlaceOpOnView) {
  Records records = RecordsOf("llama_block", "model_raw.pt2");
  // neg reads the second half of a chunk (rotate_half), a view of the attention projection.
  ReplaceFirst(Record(records, kModelJson), "torch.ops.aten.neg.default",
               "torch.ops.aten.neg_.default");
  auto imported = ImportRecords(records);
  EXPECT_THAT(imported.status().message(),
              HasSubstr("mutating op aten::neg_ at node 'neg' writes 'chunk.1', a view of another "
                        "tensor"))
      << imported.status();
}

TEST(ImportPt2Errors, InPlaceOpOnTensorWithView) {
  Records records = RecordsOf("llama_block", "model_raw.pt2");
  // 'linear' (the query projection) is viewed by 'view'; silu_ writing it would have to update
  // the view, which later nodes read, too.
  std::string& json = Record(records, kModelJson);
  ReplaceFirst(json, "torch.ops.aten.neg.default", "torch.ops.aten.silu_.default");
  ReplaceFirst(json, "{\"as_tensor\": {\"name\": \"getitem_1\"}}",
               "{\"as_tensor\": {\"name\": \"linear\"}}");
  auto imported = ImportRecords(records);
  EXPECT_THAT(imported.status().message(),
              HasSubstr("mutating op aten::silu_ at node 'neg' writes 'linear', a tensor a view "
                        "was taken of"))
      << imported.status();
}

TEST(ImportPt2Errors, OutVariantIsNotFunctionalized) {
  Records records = RecordsOf("mlp");
  ReplaceFirst(Record(records, kModelJson), "torch.ops.aten.gelu.default",
               "torch.ops.aten.gelu.out");
  auto imported = ImportRecords(records);
  EXPECT_THAT(imported.status().message(),
              AllOf(HasSubstr("mutating op aten::gelu at node 'gelu'"),
                    HasSubstr("not an in-place op"),
                    HasSubstr("re-export after ep.run_decompositions({})")));
}

TEST(ImportPt2Errors, UnregisteredOp) {
  Records records = RecordsOf("mlp");
  ReplaceFirst(Record(records, kModelJson), "torch.ops.aten.gelu.default",
               "torch.ops.forge_test.nothing.default");
  auto imported = ImportRecords(records);
  EXPECT_THAT(imported.status().message(),
              AllOf(HasSubstr("node 'gelu'"), HasSubstr("forge_test::nothing.default"),
                    HasSubstr("not registered")));
}

TEST(ImportPt2Errors, NonTensorOutput) {
  Records records = RecordsOf("mlp");
  ReplaceFirst(Record(records, kModelJson),
               "\"user_output\": {\"arg\": {\"as_tensor\": {\"name\": \"linear_1\"}}}",
               "\"user_output\": {\"arg\": {\"as_int\": 3}}");
  auto imported = ImportRecords(records);
  EXPECT_THAT(imported.status().message(),
              AllOf(HasSubstr("output_specs[0].user_output.arg"), HasSubstr("'as_int'"),
                    HasSubstr("tensors only")));
}

TEST(ImportPt2Errors, PickledPayloadIsNotRead) {
  Records records = RecordsOf("mlp");
  ReplaceFirst(Record(records, kWeightsConfig), "\"use_pickle\": false", "\"use_pickle\": true");
  auto imported = ImportRecords(records);
  EXPECT_THAT(imported.status().message(),
              AllOf(HasSubstr(kWeightsConfig), HasSubstr("'up.weight'"), HasSubstr("never unpickles")));
}

TEST(ImportPt2Errors, TooManyNodes) {
  ImportOptions options;
  options.max_nodes = 3;
  auto imported = ImportPt2FromBytes(ArchiveBytes("llama_block"), "llama_block", options);
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(imported.status().message(),
              AllOf(HasSubstr("graph_module.graph.nodes"), HasSubstr("max_nodes")));
}

TEST(ImportPt2Errors, RankAndElementLimits) {
  ImportOptions options;
  options.max_rank = 1;
  auto imported = ImportPt2FromBytes(ArchiveBytes("mlp"), "mlp", options);
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(imported.status().message(), AllOf(HasSubstr(".sizes"), HasSubstr("max_rank")));

  options = ImportOptions();
  options.max_tensor_elements = 1000;
  imported = ImportPt2FromBytes(ArchiveBytes("mlp"), "mlp", options);
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(imported.status().message(), HasSubstr("max_tensor_elements"));
}

TEST(ImportPt2Errors, ArchiveSizeLimit) {
  ImportOptions options;
  options.max_archive_bytes = 1000;
  auto imported = ImportPt2((ModelsDir() / "mlp" / "model.pt2").string(), options);
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(imported.status().message(), HasSubstr("max_archive_bytes"));
}

// The archive stores a tensor's whole storage; the blob is the tensor's elements in row-major
// order, read through its sizes, strides and storage offset.
TEST(ImportPt2, WeightsAreReadThroughTheirStrides) {
  Records records = RecordsOf("mlp");
  const std::string storage = Record(records, "data/weights/weight_0");  // up.weight, 256x64 f32
  ReplaceFirst(Record(records, kWeightsConfig),
               "\"sizes\": [{\"as_int\": 256}, {\"as_int\": 64}], \"requires_grad\": true, "
               "\"device\": {\"type\": \"cpu\", \"index\": null}, "
               "\"strides\": [{\"as_int\": 64}, {\"as_int\": 1}], "
               "\"storage_offset\": {\"as_int\": 0}",
               "\"sizes\": [{\"as_int\": 63}, {\"as_int\": 255}], \"requires_grad\": true, "
               "\"device\": {\"type\": \"cpu\", \"index\": null}, "
               "\"strides\": [{\"as_int\": 1}, {\"as_int\": 64}], "
               "\"storage_offset\": {\"as_int\": 65}");
  auto imported = ImportRecords(records);
  ASSERT_TRUE(imported.ok()) << imported.status();
  const forge::v1::GraphInput& input = imported->graph.inputs(0);
  ASSERT_EQ(input.target(), "up.weight");

  std::string expected;  // the transposed view, starting at element (1, 1) of the 256x64 storage
  for (int row = 0; row < 63; ++row) {
    for (int column = 0; column < 255; ++column) {
      expected.append(storage.substr((65 + row + 64 * column) * 4, 4));
    }
  }
  EXPECT_EQ(input.data().sha256(), Sha256Hex(expected));
  EXPECT_EQ(input.data().size_bytes(), static_cast<std::int64_t>(expected.size()));
  EXPECT_EQ(imported->blobs.at(input.data().sha256()), expected);
}

TEST(ImportPt2Errors, TensorPastItsStorage) {
  Records records = RecordsOf("mlp");
  ReplaceFirst(Record(records, kWeightsConfig), "\"storage_offset\": {\"as_int\": 0}",
               "\"storage_offset\": {\"as_int\": 1}");
  auto imported = ImportRecords(records);
  EXPECT_THAT(imported.status().message(),
              AllOf(HasSubstr("data/weights/weight_0"), HasSubstr("too few")));
}

}  // namespace
}  // namespace forge
