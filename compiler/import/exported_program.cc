#include "compiler/import/exported_program.h"

#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/digest/sha256.h"
#include "common/dtype/dtype.h"
#include "common/status/status_macros.h"
#include "compiler/import/json_value.h"
#include "compiler/import/op_schema.h"
#include "google/protobuf/util/message_differencer.h"

namespace forge::pt2 {
namespace {

using forge::v1::Argument;
using forge::v1::TensorSpec;

// The serde schema major version this importer reads (torch 2.11 writes 8.17).
constexpr std::int64_t kSchemaMajorVersion = 8;

absl::StatusOr<forge::v1::DType> DTypeFromSerde(std::int64_t scalar_type) {
  switch (scalar_type) {
    case 1: return forge::v1::DTYPE_UINT8;
    case 2: return forge::v1::DTYPE_INT8;
    case 3: return forge::v1::DTYPE_INT16;
    case 4: return forge::v1::DTYPE_INT32;
    case 5: return forge::v1::DTYPE_INT64;
    case 6: return forge::v1::DTYPE_FLOAT16;
    case 7: return forge::v1::DTYPE_FLOAT32;
    case 8: return forge::v1::DTYPE_FLOAT64;
    case 10: return forge::v1::DTYPE_COMPLEX64;
    case 12: return forge::v1::DTYPE_BOOL;
    case 13: return forge::v1::DTYPE_BFLOAT16;
    case 29: return forge::v1::DTYPE_FLOAT8_E4M3FN;
    case 30: return forge::v1::DTYPE_FLOAT8_E5M2;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "dtype ", scalar_type, " (torch.export ScalarType numbering) is not supported by Forge"));
  }
}

// Python's forge.export maps torch layouts it knows and leaves the rest unspecified.
forge::v1::Layout LayoutFromSerde(std::int64_t layout) {
  switch (layout) {
    case 1: return forge::v1::LAYOUT_SPARSE_COO;
    case 2: return forge::v1::LAYOUT_SPARSE_CSR;
    case 3: return forge::v1::LAYOUT_SPARSE_CSC;
    case 4: return forge::v1::LAYOUT_SPARSE_BSR;
    case 5: return forge::v1::LAYOUT_SPARSE_BSC;
    case 7: return forge::v1::LAYOUT_STRIDED;
    default: return forge::v1::LAYOUT_UNSPECIFIED;
  }
}

absl::StatusOr<forge::v1::MemoryFormat> MemoryFormatFromSerde(std::int64_t format) {
  switch (format) {
    case 1: return forge::v1::MEMORY_FORMAT_CONTIGUOUS;
    case 2: return forge::v1::MEMORY_FORMAT_CHANNELS_LAST;
    case 3: return forge::v1::MEMORY_FORMAT_CHANNELS_LAST_3D;
    case 4: return forge::v1::MEMORY_FORMAT_PRESERVE;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown memory format ", format));
  }
}

absl::Status StaticShapesError(const JsonRef& where, absl::string_view expression) {
  return where.Error(absl::StrCat("symbolic value '", expression,
                                  "': Forge needs static shapes; export without dynamic_shapes"));
}

// A serde SymInt / SymIntArgument / SymFloat...: the concrete member, or the static-shapes error.
absl::StatusOr<JsonRef> ConcreteMember(const JsonRef& union_ref, absl::string_view concrete) {
  FORGE_ASSIGN_OR_RETURN(auto member, union_ref.UnionMember());
  if (member.first == concrete) return member.second;
  if (member.first == "as_expr") {
    FORGE_ASSIGN_OR_RETURN(JsonRef expr, member.second.Field("expr_str"));
    FORGE_ASSIGN_OR_RETURN(std::string text, expr.String());
    return StaticShapesError(union_ref, text);
  }
  if (member.first == "as_name") {
    FORGE_ASSIGN_OR_RETURN(std::string name, member.second.String());
    return StaticShapesError(union_ref, name);
  }
  return union_ref.Error(absl::StrCat("unexpected member '", member.first, "'"));
}

absl::StatusOr<forge::v1::Device> ConvertDevice(const JsonRef& device) {
  forge::v1::Device result;
  FORGE_ASSIGN_OR_RETURN(JsonRef type, device.Field("type"));
  FORGE_ASSIGN_OR_RETURN(*result.mutable_type(), type.String());
  FORGE_ASSIGN_OR_RETURN(std::optional<JsonRef> index, device.OptionalField("index"));
  if (index.has_value()) {
    FORGE_ASSIGN_OR_RETURN(std::int64_t value, index->Int());
    if (value < 0 || value > INT32_MAX) return index->Error("device index out of range");
    result.set_index(static_cast<std::int32_t>(value));
  }
  return result;
}

// Checked product of dimension sizes; nullopt past `limit`.
std::optional<std::int64_t> ElementCount(const TensorSpec& spec, std::int64_t limit) {
  std::int64_t count = 1;
  for (std::int64_t size : spec.shape()) {
    if (size == 0) return 0;
  }
  for (std::int64_t size : spec.shape()) {
    if (count > limit / size) return std::nullopt;
    count *= size;
  }
  return count;
}

// Elements of `spec` in row-major order, gathered from `storage` as torch.as_strided would view it.
absl::StatusOr<std::string> ContiguousBytes(const TensorSpec& spec, std::int64_t elements,
                                            absl::string_view storage, absl::string_view record) {
  const std::int64_t element_bytes = DTypeBytes(spec.dtype());
  if (elements == 0) return std::string();
  const int rank = spec.shape_size();
  // Last element's index in the storage; sizes and strides are bounded, so __int128 cannot wrap.
  __int128 last = spec.storage_offset();
  bool row_major = true;
  std::int64_t expected_stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    last += static_cast<__int128>(spec.shape(d) - 1) * spec.strides(d);
    if (spec.shape(d) != 1 && spec.strides(d) != expected_stride) row_major = false;
    expected_stride *= spec.shape(d);
  }
  if ((last + 1) * element_bytes > static_cast<__int128>(storage.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        record, ": holds ", storage.size(), " bytes, too few for the tensor's sizes, strides and ",
        "storage offset"));
  }
  if (row_major) {
    return std::string(storage.substr(spec.storage_offset() * element_bytes,
                                      elements * element_bytes));
  }
  std::string bytes(elements * element_bytes, '\0');
  std::vector<std::int64_t> index(rank, 0);
  std::int64_t position = spec.storage_offset();
  for (std::int64_t i = 0; i < elements; ++i) {
    std::memcpy(bytes.data() + i * element_bytes, storage.data() + position * element_bytes,
                element_bytes);
    for (int d = rank - 1; d >= 0; --d) {
      position += spec.strides(d);
      if (++index[d] < spec.shape(d)) break;
      position -= spec.strides(d) * spec.shape(d);
      index[d] = 0;
    }
  }
  return bytes;
}

class ProgramConverter {
 public:
  ProgramConverter(const ProgramRecords& records, const RecordReader& read_record,
                   const ImportOptions& options, ImportedModel& model)
      : records_(records), read_record_(read_record), options_(options), model_(model),
        graph_(model.graph) {}

  absl::Status Convert();

 private:
  // How a node target is imported. In-place targets map to their functional variant.
  struct OpInfo {
    std::string op;  // "aten::relu" for target torch.ops.aten.relu_.default
    std::string overload;
    OpSchema schema;
    bool functionalized = false;
  };
  struct Payloads {
    google::protobuf::Value document;
    std::string directory;  // "data/weights/"
    std::string file;
  };

  absl::StatusOr<google::protobuf::Value> ReadJson(const std::string& record);
  absl::StatusOr<TensorSpec> ConvertTensorMeta(const JsonRef& meta);
  absl::StatusOr<const TensorSpec*> SpecOf(const std::string& archive_name, const JsonRef& where);
  absl::Status AddValue(const std::string& name, const TensorSpec& spec, const JsonRef& where);
  absl::Status ConvertInput(const JsonRef& input, const JsonRef& spec);
  absl::Status AttachData(forge::v1::GraphInput& input, const std::string& value_name,
                          const JsonRef& where);
  absl::Status ConvertNode(const JsonRef& node);
  // Runtime checks torch.export inserts (e.g. for Tensor.float()) compute nothing and return
  // nothing; Forge specializes on the exported shapes and dtypes, so, as forge.export does, they
  // are dropped and counted in a metadata note.
  static inline const absl::flat_hash_set<std::string> kDroppedChecks = {
      "aten::_assert_tensor_metadata", "aten::_assert_async", "aten::_assert_scalar",
      "aten::sym_constrain_range", "aten::sym_constrain_range_for_size"};
  int dropped_checks_ = 0;
  absl::Status ConvertOutputs(const JsonRef& node, const std::string& node_name,
                              forge::v1::Node& ir_node);
  absl::StatusOr<Argument> ConvertArgument(const JsonRef& value, const SchemaArgument& schema);
  absl::StatusOr<Argument> ConvertDefault(const SchemaArgument& schema, const JsonRef& where);
  absl::StatusOr<std::string> TensorName(const JsonRef& tensor_argument);
  absl::StatusOr<const OpInfo*> ImportedOp(const std::string& target, const JsonRef& target_ref,
                                           const std::string& node_name);
  void MapArchiveName(const std::string& archive_name, const std::string& ir_name);
  void TrackAliasing(const OpSchema& schema, const forge::v1::Node& ir_node);
  absl::Status ConvertOutput(const JsonRef& output_spec);

  const ProgramRecords& records_;
  const RecordReader& read_record_;
  const ImportOptions& options_;
  ImportedModel& model_;
  forge::v1::Graph& graph_;

  absl::flat_hash_map<std::string, JsonRef> tensor_meta_;       // archive name -> TensorMeta
  absl::flat_hash_map<std::string, TensorSpec> specs_;          // archive name -> converted
  absl::flat_hash_map<std::string, std::string> value_of_;      // archive name -> IR value name
  absl::flat_hash_set<std::string> value_names_;                // IR value names
  absl::flat_hash_map<std::string, OpInfo> ops_;                // node target -> import
  // Every archive name that reads an IR value: an in-place op's input and result name one tensor.
  absl::flat_hash_map<std::string, std::vector<std::string>> archive_names_of_;
  // IR values an in-place op may not write, and why (graph inputs, views, tensors with views):
  // functionalizing such a write would lose its effect on the aliased tensor.
  absl::flat_hash_map<std::string, std::string> not_writable_;
  absl::flat_hash_map<std::string, std::string> storage_files_; // record -> bytes
  std::vector<Payloads> payloads_;  // weights first, then constants, as torch looks them up
};

absl::StatusOr<google::protobuf::Value> ProgramConverter::ReadJson(const std::string& record) {
  FORGE_ASSIGN_OR_RETURN(std::string text, read_record_(record));
  return ParseJson(text, record);
}

absl::StatusOr<TensorSpec> ProgramConverter::ConvertTensorMeta(const JsonRef& meta) {
  TensorSpec spec;
  FORGE_ASSIGN_OR_RETURN(JsonRef dtype_ref, meta.Field("dtype"));
  FORGE_ASSIGN_OR_RETURN(std::int64_t dtype_number, dtype_ref.Int());
  auto dtype = DTypeFromSerde(dtype_number);
  if (!dtype.ok()) return dtype_ref.Error(dtype.status().message());
  spec.set_dtype(*dtype);

  FORGE_ASSIGN_OR_RETURN(JsonRef sizes_ref, meta.Field("sizes"));
  FORGE_ASSIGN_OR_RETURN(std::vector<JsonRef> sizes, sizes_ref.Elements());
  if (static_cast<std::int64_t>(sizes.size()) > options_.max_rank) {
    return absl::ResourceExhaustedError(
        absl::StrCat(sizes_ref.location(), ": rank ", sizes.size(), " is over the limit of ",
                     options_.max_rank, " (ImportOptions::max_rank)"));
  }
  FORGE_ASSIGN_OR_RETURN(JsonRef strides_ref, meta.Field("strides"));
  FORGE_ASSIGN_OR_RETURN(std::vector<JsonRef> strides, strides_ref.Elements());
  if (strides.size() != sizes.size()) {
    return strides_ref.Error(absl::StrCat(strides.size(), " strides for ", sizes.size(), " sizes"));
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    FORGE_ASSIGN_OR_RETURN(JsonRef size_ref, ConcreteMember(sizes[d], "as_int"));
    FORGE_ASSIGN_OR_RETURN(std::int64_t size, size_ref.Int());
    if (size < 0) return size_ref.Error("negative size");
    spec.add_shape(size);
    FORGE_ASSIGN_OR_RETURN(JsonRef stride_ref, ConcreteMember(strides[d], "as_int"));
    FORGE_ASSIGN_OR_RETURN(std::int64_t stride, stride_ref.Int());
    if (stride < 0) return stride_ref.Error("negative stride");
    spec.add_strides(stride);
  }
  if (!ElementCount(spec, options_.max_tensor_elements).has_value()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(sizes_ref.location(), ": more than ", options_.max_tensor_elements,
                     " elements (ImportOptions::max_tensor_elements)"));
  }
  FORGE_ASSIGN_OR_RETURN(JsonRef offset_union, meta.Field("storage_offset"));
  FORGE_ASSIGN_OR_RETURN(JsonRef offset_ref, ConcreteMember(offset_union, "as_int"));
  FORGE_ASSIGN_OR_RETURN(std::int64_t offset, offset_ref.Int());
  if (offset < 0) return offset_ref.Error("negative storage offset");
  spec.set_storage_offset(offset);

  FORGE_ASSIGN_OR_RETURN(JsonRef device, meta.Field("device"));
  FORGE_ASSIGN_OR_RETURN(*spec.mutable_device(), ConvertDevice(device));
  FORGE_ASSIGN_OR_RETURN(JsonRef layout_ref, meta.Field("layout"));
  FORGE_ASSIGN_OR_RETURN(std::int64_t layout, layout_ref.Int());
  spec.set_layout(LayoutFromSerde(layout));
  return spec;
}

absl::StatusOr<const TensorSpec*> ProgramConverter::SpecOf(const std::string& archive_name,
                                                           const JsonRef& where) {
  if (auto it = specs_.find(archive_name); it != specs_.end()) return &it->second;
  auto meta = tensor_meta_.find(archive_name);
  if (meta == tensor_meta_.end()) {
    return where.Error(absl::StrCat("tensor '", archive_name, "' has no entry in graph.tensor_values"));
  }
  FORGE_ASSIGN_OR_RETURN(TensorSpec spec, ConvertTensorMeta(meta->second));
  return &specs_.emplace(archive_name, std::move(spec)).first->second;
}

absl::Status ProgramConverter::AddValue(const std::string& name, const TensorSpec& spec,
                                        const JsonRef& where) {
  if (!value_names_.insert(name).second) {
    return where.Error(absl::StrCat("value '", name, "' is defined twice"));
  }
  forge::v1::Value* value = graph_.add_values();
  value->set_name(name);
  *value->mutable_tensor() = spec;
  return absl::OkStatus();
}

absl::Status ProgramConverter::Convert() {
  FORGE_ASSIGN_OR_RETURN(google::protobuf::Value document, ReadJson(records_.program));
  const JsonRef program(document, absl::StrCat(records_.program, ":"));

  FORGE_ASSIGN_OR_RETURN(JsonRef version, program.Field("schema_version"));
  FORGE_ASSIGN_OR_RETURN(JsonRef major_ref, version.Field("major"));
  FORGE_ASSIGN_OR_RETURN(std::int64_t major, major_ref.Int());
  if (major != kSchemaMajorVersion) {
    return major_ref.Error(absl::StrCat("serialization schema major version ", major,
                                        " is not supported (this importer reads ",
                                        kSchemaMajorVersion, ")"));
  }
  FORGE_ASSIGN_OR_RETURN(std::optional<JsonRef> torch_version,
                         program.OptionalField("torch_version"));
  if (torch_version.has_value()) {
    FORGE_ASSIGN_OR_RETURN(*graph_.mutable_metadata()->mutable_torch_version(),
                           torch_version->String());
  }

  for (const auto& [file, directory] :
       {std::pair{records_.weights_config, "data/weights/"},
        std::pair{records_.constants_config, "data/constants/"}}) {
    if (file.empty()) continue;
    FORGE_ASSIGN_OR_RETURN(google::protobuf::Value config, ReadJson(file));
    payloads_.push_back({std::move(config), directory, file});
  }

  FORGE_ASSIGN_OR_RETURN(JsonRef module, program.Field("graph_module"));
  FORGE_ASSIGN_OR_RETURN(JsonRef graph, module.Field("graph"));
  FORGE_ASSIGN_OR_RETURN(JsonRef signature, module.Field("signature"));
  FORGE_ASSIGN_OR_RETURN(JsonRef tensor_values, graph.Field("tensor_values"));
  FORGE_ASSIGN_OR_RETURN(auto metas, tensor_values.Members());
  for (auto& [name, meta] : metas) tensor_meta_.emplace(name, meta);

  FORGE_ASSIGN_OR_RETURN(JsonRef nodes_ref, graph.Field("nodes"));
  FORGE_ASSIGN_OR_RETURN(std::vector<JsonRef> nodes, nodes_ref.Elements());
  if (static_cast<std::int64_t>(nodes.size()) > options_.max_nodes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(nodes_ref.location(), ": ", nodes.size(), " nodes, over the limit of ",
                     options_.max_nodes, " (ImportOptions::max_nodes)"));
  }

  FORGE_ASSIGN_OR_RETURN(JsonRef inputs_ref, graph.Field("inputs"));
  FORGE_ASSIGN_OR_RETURN(std::vector<JsonRef> inputs, inputs_ref.Elements());
  FORGE_ASSIGN_OR_RETURN(JsonRef input_specs_ref, signature.Field("input_specs"));
  FORGE_ASSIGN_OR_RETURN(std::vector<JsonRef> input_specs, input_specs_ref.Elements());
  if (inputs.size() != input_specs.size()) {
    return input_specs_ref.Error(absl::StrCat(input_specs.size(), " input specs for ",
                                              inputs.size(), " graph inputs"));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    FORGE_RETURN_IF_ERROR(ConvertInput(inputs[i], input_specs[i]));
  }
  for (const JsonRef& node : nodes) FORGE_RETURN_IF_ERROR(ConvertNode(node));
  if (dropped_checks_ > 0) {
    graph_.mutable_metadata()->add_notes(absl::StrCat(
        "dropped ", dropped_checks_,
        " runtime shape/dtype checks (e.g. aten::_assert_tensor_metadata)"));
  }

  FORGE_ASSIGN_OR_RETURN(JsonRef output_specs_ref, signature.Field("output_specs"));
  FORGE_ASSIGN_OR_RETURN(std::vector<JsonRef> output_specs, output_specs_ref.Elements());
  for (const JsonRef& output_spec : output_specs) FORGE_RETURN_IF_ERROR(ConvertOutput(output_spec));
  return absl::OkStatus();
}

absl::Status ProgramConverter::ConvertInput(const JsonRef& input, const JsonRef& spec) {
  FORGE_ASSIGN_OR_RETURN(auto input_member, input.UnionMember());
  if (input_member.first != "as_tensor") {
    return input.Error(absl::StrCat("graph input is '", input_member.first,
                                     "': Forge graphs take tensor inputs only"));
  }
  FORGE_ASSIGN_OR_RETURN(JsonRef name_ref, input_member.second.Field("name"));
  FORGE_ASSIGN_OR_RETURN(std::string name, name_ref.String());

  FORGE_ASSIGN_OR_RETURN(auto spec_member, spec.UnionMember());
  const auto& [kind, body] = spec_member;
  forge::v1::GraphInput ir_input;
  ir_input.set_value_name(name);
  std::string target;
  if (kind == "user_input") {
    ir_input.set_kind(forge::v1::INPUT_KIND_USER_INPUT);
    target = name;
  } else if (kind == "parameter") {
    ir_input.set_kind(forge::v1::INPUT_KIND_PARAMETER);
    FORGE_ASSIGN_OR_RETURN(JsonRef ref, body.Field("parameter_name"));
    FORGE_ASSIGN_OR_RETURN(target, ref.String());
  } else if (kind == "buffer") {
    ir_input.set_kind(forge::v1::INPUT_KIND_BUFFER);
    FORGE_ASSIGN_OR_RETURN(JsonRef ref, body.Field("buffer_name"));
    FORGE_ASSIGN_OR_RETURN(target, ref.String());
    FORGE_ASSIGN_OR_RETURN(JsonRef persistent, body.Field("persistent"));
    FORGE_ASSIGN_OR_RETURN(bool is_persistent, persistent.Bool());
    ir_input.set_persistent(is_persistent);
  } else if (kind == "tensor_constant") {
    FORGE_ASSIGN_OR_RETURN(JsonRef ref, body.Field("tensor_constant_name"));
    FORGE_ASSIGN_OR_RETURN(target, ref.String());
    ir_input.set_kind(absl::StartsWith(target, "lifted_tensor")
                          ? forge::v1::INPUT_KIND_LIFTED_CONSTANT
                          : forge::v1::INPUT_KIND_CONSTANT_TENSOR);
  } else {
    return spec.Error(absl::StrCat("input '", name, "' is of kind '", kind,
                                   "', which Forge does not support"));
  }
  ir_input.set_target(target);
  // The value must be the one the spec describes.
  FORGE_ASSIGN_OR_RETURN(JsonRef spec_arg, body.Field("arg"));
  const JsonRef* spec_tensor = &spec_arg;
  std::optional<JsonRef> unwrapped;
  if (kind == "user_input") {
    FORGE_ASSIGN_OR_RETURN(auto member, spec_arg.UnionMember());
    if (member.first != "as_tensor") {
      return spec_arg.Error(absl::StrCat("user input is '", member.first,
                                         "': Forge graphs take tensor inputs only"));
    }
    unwrapped = member.second;
    spec_tensor = &*unwrapped;
  }
  FORGE_ASSIGN_OR_RETURN(JsonRef spec_name_ref, spec_tensor->Field("name"));
  FORGE_ASSIGN_OR_RETURN(std::string spec_name, spec_name_ref.String());
  if (spec_name != name) {
    return spec_name_ref.Error(
        absl::StrCat("names input '", spec_name, "' where the graph has '", name, "'"));
  }

  if (kind == "user_input") {
    FORGE_ASSIGN_OR_RETURN(const TensorSpec* value_spec, SpecOf(name, input));
    FORGE_RETURN_IF_ERROR(AddValue(name, *value_spec, input));
  } else {
    FORGE_RETURN_IF_ERROR(AttachData(ir_input, name, spec));
  }
  MapArchiveName(name, name);
  not_writable_.emplace(name, "a graph input (user input, parameter, buffer or constant)");
  *graph_.add_inputs() = std::move(ir_input);
  return absl::OkStatus();
}

// Parameters, buffers and constants: the value spec and bytes come from the payload that holds the
// target, as Python's forge.export takes them from the state dict or the constants.
absl::Status ProgramConverter::AttachData(forge::v1::GraphInput& input,
                                          const std::string& value_name, const JsonRef& where) {
  const std::string& target = input.target();
  for (const Payloads& payloads : payloads_) {
    const JsonRef root(payloads.document, absl::StrCat(payloads.file, ":"));
    FORGE_ASSIGN_OR_RETURN(JsonRef config, root.Field("config"));
    FORGE_ASSIGN_OR_RETURN(std::optional<JsonRef> entry, config.OptionalField(target));
    if (!entry.has_value()) continue;
    FORGE_ASSIGN_OR_RETURN(JsonRef path_ref, entry->Field("path_name"));
    FORGE_ASSIGN_OR_RETURN(std::string path_name, path_ref.String());
    const std::string record = absl::StrCat(payloads.directory, path_name);
    FORGE_ASSIGN_OR_RETURN(JsonRef pickle_ref, entry->Field("use_pickle"));
    FORGE_ASSIGN_OR_RETURN(bool use_pickle, pickle_ref.Bool());
    if (use_pickle) {
      return pickle_ref.Error(absl::StrCat("'", target, "' is stored pickled in ", record,
                                           "; Forge never unpickles archive data"));
    }
    FORGE_ASSIGN_OR_RETURN(JsonRef meta, entry->Field("tensor_meta"));
    FORGE_ASSIGN_OR_RETURN(TensorSpec spec, ConvertTensorMeta(meta));
    if (spec.layout() != forge::v1::LAYOUT_STRIDED) {
      return meta.Error(absl::StrCat("'", target, "' is not a dense strided tensor"));
    }
    FORGE_RETURN_IF_ERROR(AddValue(value_name, spec, where));

    auto storage = storage_files_.find(record);
    if (storage == storage_files_.end()) {
      FORGE_ASSIGN_OR_RETURN(std::string bytes, read_record_(record));
      storage = storage_files_.emplace(record, std::move(bytes)).first;
    }
    const std::int64_t elements = *ElementCount(spec, options_.max_tensor_elements);
    FORGE_ASSIGN_OR_RETURN(std::string data,
                           ContiguousBytes(spec, elements, storage->second, record));
    const std::string digest = Sha256Hex(data);
    forge::v1::TensorData* tensor_data = input.mutable_data();
    tensor_data->set_sha256(digest);
    tensor_data->set_size_bytes(static_cast<std::int64_t>(data.size()));
    if (static_cast<std::int64_t>(data.size()) <= options_.inline_limit_bytes) {
      tensor_data->set_inline_bytes(data);
    }
    model_.blobs.try_emplace(digest, std::move(data));
    return absl::OkStatus();
  }
  return where.Error(absl::StrCat("'", target, "' is in neither ",
                                  records_.weights_config.empty() ? "(absent) weights config"
                                                                  : records_.weights_config,
                                  " nor ",
                                  records_.constants_config.empty() ? "(absent) constants config"
                                                                    : records_.constants_config));
}

absl::Status ProgramConverter::ConvertNode(const JsonRef& node) {
  FORGE_ASSIGN_OR_RETURN(JsonRef name_ref, node.Field("name"));
  FORGE_ASSIGN_OR_RETURN(std::string name, name_ref.String());
  auto annotate = [&](const absl::Status& status) {
    return Annotate(status, absl::StrCat("node '", name, "'"));
  };
  FORGE_ASSIGN_OR_RETURN(JsonRef target_ref, node.Field("target"));
  FORGE_ASSIGN_OR_RETURN(std::string target, target_ref.String());

  FORGE_ASSIGN_OR_RETURN(const OpInfo* op_info, ImportedOp(target, target_ref, name));
  if (kDroppedChecks.contains(op_info->op)) {
    ++dropped_checks_;
    return absl::OkStatus();
  }
  const OpSchema& schema = op_info->schema;
  forge::v1::Node ir_node;
  ir_node.set_name(name);
  ir_node.set_op(op_info->op);
  ir_node.set_overload(op_info->overload);
  ir_node.set_schema(schema.text);

  FORGE_ASSIGN_OR_RETURN(JsonRef inputs_ref, node.Field("inputs"));
  FORGE_ASSIGN_OR_RETURN(std::vector<JsonRef> inputs, inputs_ref.Elements());
  absl::flat_hash_map<std::string, JsonRef> given;
  for (const JsonRef& input : inputs) {
    FORGE_ASSIGN_OR_RETURN(JsonRef arg_name_ref, input.Field("name"));
    FORGE_ASSIGN_OR_RETURN(std::string arg_name, arg_name_ref.String());
    FORGE_ASSIGN_OR_RETURN(JsonRef arg, input.Field("arg"));
    if (!given.emplace(arg_name, arg).second) {
      return annotate(arg_name_ref.Error(absl::StrCat("argument '", arg_name, "' given twice")));
    }
  }
  for (const auto& [arg_name, arg] : given) {
    bool known = false;
    for (const SchemaArgument& argument : schema.arguments) known |= argument.name == arg_name;
    if (!known) {
      return annotate(arg.Error(absl::StrCat("argument '", arg_name, "' is not in schema ",
                                             schema.text)));
    }
  }
  // Canonical argument list (the rule of Python's forge.export, so digests agree): schema order,
  // up to the last argument whose value differs from its schema default.
  std::vector<std::optional<Argument>> converted(schema.arguments.size());
  int last = -1;
  for (size_t i = 0; i < schema.arguments.size(); ++i) {
    const SchemaArgument& argument = schema.arguments[i];
    auto it = given.find(argument.name);
    if (it == given.end()) continue;
    auto value = ConvertArgument(it->second, argument);
    if (!value.ok()) return annotate(value.status());
    bool is_default = false;
    if (argument.has_default && value->value_case() != Argument::kTensor &&
        value->value_case() != Argument::kOptionalTensor &&
        value->value_case() != Argument::kTensors &&
        value->value_case() != Argument::kOptionalTensors) {
      auto default_value = ConvertDefault(argument, it->second);
      is_default = default_value.ok() &&
                   google::protobuf::util::MessageDifferencer::Equals(*value, *default_value);
    }
    if (!is_default) last = static_cast<int>(i);
    converted[i] = *std::move(value);
  }
  for (int i = 0; i <= last; ++i) {
    const SchemaArgument& argument = schema.arguments[i];
    Argument* ir_argument = ir_node.add_arguments();
    if (converted[i].has_value()) {
      *ir_argument = *std::move(converted[i]);
    } else if (argument.has_default) {
      auto default_value = ConvertDefault(argument, inputs_ref);
      if (!default_value.ok()) return annotate(default_value.status());
      *ir_argument = *std::move(default_value);
    } else {
      return annotate(inputs_ref.Error(
          absl::StrCat("required argument '", argument.name, "' is missing")));
    }
    ir_argument->set_name(argument.name);
    ir_argument->set_keyword(argument.keyword_only);
  }

  FORGE_ASSIGN_OR_RETURN(JsonRef metadata, node.Field("metadata"));
  FORGE_ASSIGN_OR_RETURN(std::optional<JsonRef> stack_trace, metadata.OptionalField("stack_trace"));
  if (stack_trace.has_value()) {
    FORGE_ASSIGN_OR_RETURN(std::string trace, stack_trace->String());
    if (!trace.empty()) (*ir_node.mutable_attributes())["stack_trace"] = trace;
  }
  // The functional op writes its result where the in-place op wrote `self` (its first argument):
  // later readers of the written tensor, under any of its archive names, read the result.
  std::string written_value;
  if (op_info->functionalized) {
    if (ir_node.arguments().empty() || !ir_node.arguments(0).has_tensor()) {
      return annotate(inputs_ref.Error(absl::StrCat("in-place op ", op_info->op,
                                                    "_ writes no tensor")));
    }
    written_value = ir_node.arguments(0).tensor();
    auto reason = not_writable_.find(written_value);
    if (reason != not_writable_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          records_.program, ": mutating op ", op_info->op, "_ at node '", name, "' writes '",
          written_value, "', ", reason->second, "; Forge functionalizes in-place ops on "
          "intermediates only: re-export after ep.run_decompositions({})"));
    }
  }
  if (absl::Status status = ConvertOutputs(node, name, ir_node); !status.ok()) {
    return annotate(status);
  }
  if (op_info->functionalized) {
    std::vector<std::string> aliases = std::move(archive_names_of_[written_value]);
    archive_names_of_.erase(written_value);
    for (const std::string& archive_name : aliases) MapArchiveName(archive_name, ir_node.outputs(0));
  }
  TrackAliasing(schema, ir_node);
  *graph_.add_nodes() = std::move(ir_node);
  return absl::OkStatus();
}

// "torch.ops.<namespace>.<op>.<overload>" -> operator and schema. In-place ops (relu_, add_.Tensor)
// become their functional variants (relu, add.Tensor); ConvertNode checks what they write.
absl::StatusOr<const ProgramConverter::OpInfo*> ProgramConverter::ImportedOp(
    const std::string& target, const JsonRef& target_ref, const std::string& node_name) {
  if (auto cached = ops_.find(target); cached != ops_.end()) return &cached->second;
  constexpr absl::string_view kOpsPrefix = "torch.ops.";
  std::vector<std::string> parts;
  if (absl::StartsWith(target, kOpsPrefix)) {
    parts = absl::StrSplit(absl::string_view(target).substr(kOpsPrefix.size()), '.');
  }
  const auto annotate = [&](const absl::Status& status) {
    return Annotate(status, absl::StrCat("node '", node_name, "'"));
  };
  if (parts.size() != 3) {
    return annotate(target_ref.Error(absl::StrCat(
        "target '", target, "' is not an operator overload (torch.ops.<namespace>.<op>.<overload>)")));
  }
  OpInfo info;
  info.op = absl::StrCat(parts[0], "::", parts[1]);
  info.overload = parts[2];
  const std::string& overload = info.overload;
  auto looked_up = LookupOpSchema(info.op, overload);
  if (!looked_up.ok()) {
    return annotate(target_ref.Error(absl::StrCat(
        looked_up.status().message(), "; Forge needs the schema of every operator")));
  }
  info.schema = *std::move(looked_up);
  if (info.schema.is_mutable || absl::EndsWith(parts[1], "_")) {
    auto functional = LookupFunctionalVariant(info.op, overload);
    if (!functional.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          records_.program, ": mutating op ", info.op, " at node '", node_name, "' (",
          functional.status().message(), "): re-export after ep.run_decompositions({})"));
    }
    info.op.pop_back();
    info.schema = *std::move(functional);
    info.functionalized = true;
  }
  return &ops_.emplace(target, std::move(info)).first->second;
}

void ProgramConverter::MapArchiveName(const std::string& archive_name, const std::string& ir_name) {
  value_of_[archive_name] = ir_name;
  archive_names_of_[ir_name].push_back(archive_name);
}

// A view's results and the tensors it views alias each other; an in-place op writing either
// cannot be functionalized.
void ProgramConverter::TrackAliasing(const OpSchema& schema, const forge::v1::Node& ir_node) {
  if (!schema.result_aliases_argument) return;
  for (const std::string& output : ir_node.outputs()) {
    not_writable_.emplace(output, "a view of another tensor");
  }
  // The node's arguments are a prefix of the schema's, in schema order.
  for (int i = 0; i < ir_node.arguments_size(); ++i) {
    if (!schema.arguments[i].aliased_by_result) continue;
    const Argument& argument = ir_node.arguments(i);
    std::vector<std::string> viewed;
    if (argument.has_tensor()) viewed.push_back(argument.tensor());
    if (argument.has_optional_tensor()) viewed.push_back(argument.optional_tensor().value_name());
    for (const std::string& name : argument.tensors().value_names()) viewed.push_back(name);
    for (const std::string& name : viewed) not_writable_.emplace(name, "a tensor a view was taken of");
  }
}

// A single tensor result is named after the node; the elements of a tuple or list result are
// "<node>.<i>" (torch's getitem nodes are folded away), as in Python's forge.export.
absl::Status ProgramConverter::ConvertOutputs(const JsonRef& node, const std::string& node_name,
                                              forge::v1::Node& ir_node) {
  FORGE_ASSIGN_OR_RETURN(JsonRef outputs_ref, node.Field("outputs"));
  FORGE_ASSIGN_OR_RETURN(std::vector<JsonRef> outputs, outputs_ref.Elements());
  std::vector<std::pair<std::string, JsonRef>> results;  // archive name, where
  bool single = false;
  for (const JsonRef& output : outputs) {
    FORGE_ASSIGN_OR_RETURN(auto member, output.UnionMember());
    if (member.first == "as_tensor") {
      FORGE_ASSIGN_OR_RETURN(JsonRef name_ref, member.second.Field("name"));
      FORGE_ASSIGN_OR_RETURN(std::string name, name_ref.String());
      results.emplace_back(std::move(name), output);
      single = outputs.size() == 1;
    } else if (member.first == "as_tensors") {
      FORGE_ASSIGN_OR_RETURN(std::vector<JsonRef> elements, member.second.Elements());
      for (const JsonRef& element : elements) {
        FORGE_ASSIGN_OR_RETURN(JsonRef name_ref, element.Field("name"));
        FORGE_ASSIGN_OR_RETURN(std::string name, name_ref.String());
        results.emplace_back(std::move(name), element);
      }
    } else {
      return output.Error(absl::StrCat("result is '", member.first,
                                       "': Forge graphs carry tensors only"));
    }
  }
  if (results.empty()) return outputs_ref.Error("the node returns nothing");
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& [archive_name, where] = results[i];
    const std::string ir_name = single ? node_name : absl::StrCat(node_name, ".", i);
    FORGE_ASSIGN_OR_RETURN(const TensorSpec* spec, SpecOf(archive_name, where));
    FORGE_RETURN_IF_ERROR(AddValue(ir_name, *spec, where));
    if (value_of_.contains(archive_name)) {
      return where.Error(absl::StrCat("tensor '", archive_name, "' is defined twice"));
    }
    MapArchiveName(archive_name, ir_name);
    ir_node.add_outputs(ir_name);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ProgramConverter::TensorName(const JsonRef& tensor_argument) {
  FORGE_ASSIGN_OR_RETURN(JsonRef name_ref, tensor_argument.Field("name"));
  FORGE_ASSIGN_OR_RETURN(std::string name, name_ref.String());
  auto it = value_of_.find(name);
  if (it == value_of_.end()) {
    return name_ref.Error(
        absl::StrCat("tensor '", name, "' is not defined by an input or an earlier node"));
  }
  return it->second;
}

// Lists whose elements say nothing about their type (empty ones) take it from the schema, and
// integral lists stay integral, the way Python's forge.export fills them.
void SetEmptyList(Argument& argument, ArgumentType type) {
  switch (type) {
    case ArgumentType::kTensorList: argument.mutable_tensors(); break;
    case ArgumentType::kOptionalTensorList: argument.mutable_optional_tensors(); break;
    case ArgumentType::kBoolList: argument.mutable_bools(); break;
    default: argument.mutable_ints(); break;
  }
}

absl::StatusOr<Argument> ProgramConverter::ConvertArgument(const JsonRef& value,
                                                           const SchemaArgument& schema) {
  FORGE_ASSIGN_OR_RETURN(auto member, value.UnionMember());
  const auto& [kind, body] = member;
  Argument result;
  if (kind == "as_none") {
    result.mutable_none();
  } else if (kind == "as_tensor") {
    FORGE_ASSIGN_OR_RETURN(std::string name, TensorName(body));
    if (schema.type == ArgumentType::kOptionalTensor) {
      result.mutable_optional_tensor()->set_value_name(name);
    } else {
      result.set_tensor(name);
    }
  } else if (kind == "as_optional_tensor") {
    FORGE_ASSIGN_OR_RETURN(auto inner, body.UnionMember());
    if (inner.first == "as_none") {
      result.mutable_none();
    } else if (inner.first == "as_tensor") {
      FORGE_ASSIGN_OR_RETURN(std::string name, TensorName(inner.second));
      result.mutable_optional_tensor()->set_value_name(name);
    } else {
      return body.Error(absl::StrCat("unexpected member '", inner.first, "'"));
    }
  } else if (kind == "as_int") {
    FORGE_ASSIGN_OR_RETURN(std::int64_t number, body.Int());
    result.set_int_value(number);
  } else if (kind == "as_sym_int") {
    FORGE_ASSIGN_OR_RETURN(JsonRef concrete, ConcreteMember(body, "as_int"));
    FORGE_ASSIGN_OR_RETURN(std::int64_t number, concrete.Int());
    result.set_int_value(number);
  } else if (kind == "as_float") {
    FORGE_ASSIGN_OR_RETURN(double number, body.Number());
    result.set_float_value(number);
  } else if (kind == "as_sym_float") {
    FORGE_ASSIGN_OR_RETURN(JsonRef concrete, ConcreteMember(body, "as_float"));
    FORGE_ASSIGN_OR_RETURN(double number, concrete.Number());
    result.set_float_value(number);
  } else if (kind == "as_bool") {
    FORGE_ASSIGN_OR_RETURN(bool flag, body.Bool());
    result.set_bool_value(flag);
  } else if (kind == "as_sym_bool") {
    FORGE_ASSIGN_OR_RETURN(JsonRef concrete, ConcreteMember(body, "as_bool"));
    FORGE_ASSIGN_OR_RETURN(bool flag, concrete.Bool());
    result.set_bool_value(flag);
  } else if (kind == "as_string") {
    FORGE_ASSIGN_OR_RETURN(*result.mutable_string_value(), body.String());
  } else if (kind == "as_scalar_type") {
    FORGE_ASSIGN_OR_RETURN(std::int64_t number, body.Int());
    auto dtype = DTypeFromSerde(number);
    if (!dtype.ok()) return body.Error(dtype.status().message());
    result.set_dtype(*dtype);
  } else if (kind == "as_layout") {
    FORGE_ASSIGN_OR_RETURN(std::int64_t number, body.Int());
    result.set_layout(LayoutFromSerde(number));
  } else if (kind == "as_memory_format") {
    FORGE_ASSIGN_OR_RETURN(std::int64_t number, body.Int());
    auto format = MemoryFormatFromSerde(number);
    if (!format.ok()) return body.Error(format.status().message());
    result.set_memory_format(*format);
  } else if (kind == "as_device") {
    FORGE_ASSIGN_OR_RETURN(*result.mutable_device(), ConvertDevice(body));
  } else if (kind == "as_tensors" || kind == "as_optional_tensors" || kind == "as_ints" ||
             kind == "as_sym_ints" || kind == "as_floats" || kind == "as_sym_floats" ||
             kind == "as_bools" || kind == "as_sym_bools") {
    FORGE_ASSIGN_OR_RETURN(std::vector<JsonRef> items, body.Elements());
    if (items.empty()) {
      SetEmptyList(result, schema.type);
      return result;
    }
    for (const JsonRef& item : items) {
      if (kind == "as_tensors") {
        FORGE_ASSIGN_OR_RETURN(std::string name, TensorName(item));
        result.mutable_tensors()->add_value_names(name);
      } else if (kind == "as_optional_tensors") {
        FORGE_ASSIGN_OR_RETURN(auto inner, item.UnionMember());
        forge::v1::OptionalTensor* entry = result.mutable_optional_tensors()->add_items();
        if (inner.first == "as_tensor") {
          FORGE_ASSIGN_OR_RETURN(std::string name, TensorName(inner.second));
          entry->set_value_name(name);
        } else if (inner.first != "as_none") {
          return item.Error(absl::StrCat("unexpected member '", inner.first, "'"));
        }
      } else if (kind == "as_ints" || kind == "as_sym_ints") {
        std::optional<JsonRef> concrete;
        if (kind == "as_sym_ints") {
          FORGE_ASSIGN_OR_RETURN(concrete, ConcreteMember(item, "as_int"));
        }
        FORGE_ASSIGN_OR_RETURN(std::int64_t number, (concrete ? *concrete : item).Int());
        result.mutable_ints()->add_values(number);
      } else if (kind == "as_floats" || kind == "as_sym_floats") {
        std::optional<JsonRef> concrete;
        if (kind == "as_sym_floats") {
          FORGE_ASSIGN_OR_RETURN(concrete, ConcreteMember(item, "as_float"));
        }
        FORGE_ASSIGN_OR_RETURN(double number, (concrete ? *concrete : item).Number());
        result.mutable_floats()->add_values(number);
      } else {
        std::optional<JsonRef> concrete;
        if (kind == "as_sym_bools") {
          FORGE_ASSIGN_OR_RETURN(concrete, ConcreteMember(item, "as_bool"));
        }
        FORGE_ASSIGN_OR_RETURN(bool flag, (concrete ? *concrete : item).Bool());
        // Python's forge.export keeps booleans as bools only where the schema says bool[].
        if (schema.type == ArgumentType::kBoolList) {
          result.mutable_bools()->add_values(flag);
        } else {
          result.mutable_ints()->add_values(flag ? 1 : 0);
        }
      }
    }
  } else {
    return value.Error(absl::StrCat("argument '", schema.name, "' is of kind '", kind,
                                    "', which Forge's graph IR cannot represent"));
  }
  return result;
}

absl::StatusOr<Argument> ProgramConverter::ConvertDefault(const SchemaArgument& schema,
                                                          const JsonRef& where) {
  using Kind = DefaultValue::Kind;
  const DefaultValue& value = schema.default_value;
  Argument result;
  switch (value.kind) {
    case Kind::kNone: result.mutable_none(); break;
    case Kind::kBool: result.set_bool_value(value.bool_value); break;
    case Kind::kInt: result.set_int_value(value.int_value); break;
    case Kind::kFloat: result.set_float_value(value.float_value); break;
    case Kind::kString: result.set_string_value(value.text); break;
    case Kind::kInts:
      if (value.ints.empty()) {
        SetEmptyList(result, schema.type);
      } else {
        result.mutable_ints()->mutable_values()->Add(value.ints.begin(), value.ints.end());
      }
      break;
    case Kind::kFloats:
      if (value.floats.empty()) {
        SetEmptyList(result, schema.type);
      } else {
        result.mutable_floats()->mutable_values()->Add(value.floats.begin(), value.floats.end());
      }
      break;
    case Kind::kBools:
      if (value.bools.empty()) SetEmptyList(result, schema.type);
      for (bool flag : value.bools) result.mutable_bools()->add_values(flag);
      break;
    case Kind::kScalarType: {
      auto dtype = DTypeFromSerde(value.int_value);
      if (!dtype.ok()) return where.Error(dtype.status().message());
      result.set_dtype(*dtype);
      break;
    }
    case Kind::kLayout: result.set_layout(LayoutFromSerde(value.int_value)); break;
    case Kind::kMemoryFormat: {
      auto format = MemoryFormatFromSerde(value.int_value);
      if (!format.ok()) return where.Error(format.status().message());
      result.set_memory_format(*format);
      break;
    }
    case Kind::kDevice:
      result.mutable_device()->set_type(value.text);
      if (value.has_device_index) result.mutable_device()->set_index(value.int_value);
      break;
    case Kind::kUnsupported:
      return where.Error(absl::StrCat("the default of argument '", schema.name, "' (", value.text,
                                      ") has no form in Forge's graph IR"));
  }
  return result;
}

absl::Status ProgramConverter::ConvertOutput(const JsonRef& output_spec) {
  FORGE_ASSIGN_OR_RETURN(auto member, output_spec.UnionMember());
  const auto& [kind, body] = member;
  forge::v1::GraphOutput output;
  FORGE_ASSIGN_OR_RETURN(JsonRef arg, body.Field("arg"));
  JsonRef tensor = arg;
  if (kind == "user_output") {
    output.set_kind(forge::v1::OUTPUT_KIND_USER_OUTPUT);
    FORGE_ASSIGN_OR_RETURN(auto arg_member, arg.UnionMember());
    if (arg_member.first != "as_tensor") {
      return arg.Error(absl::StrCat("the output is '", arg_member.first,
                                    "': Forge graphs return tensors only"));
    }
    tensor = arg_member.second;
  } else if (kind == "buffer_mutation") {
    output.set_kind(forge::v1::OUTPUT_KIND_BUFFER_MUTATION);
    FORGE_ASSIGN_OR_RETURN(JsonRef target, body.Field("buffer_name"));
    FORGE_ASSIGN_OR_RETURN(*output.mutable_target(), target.String());
  } else if (kind == "user_input_mutation") {
    output.set_kind(forge::v1::OUTPUT_KIND_USER_INPUT_MUTATION);
    FORGE_ASSIGN_OR_RETURN(JsonRef target, body.Field("user_input_name"));
    FORGE_ASSIGN_OR_RETURN(*output.mutable_target(), target.String());
  } else {
    return output_spec.Error(absl::StrCat("output kind '", kind, "' is not supported by Forge"));
  }
  FORGE_ASSIGN_OR_RETURN(*output.mutable_value_name(), TensorName(tensor));
  *graph_.add_outputs() = std::move(output);
  return absl::OkStatus();
}

}  // namespace

absl::Status ConvertExportedProgram(const ProgramRecords& records, const RecordReader& read_record,
                                    const ImportOptions& options, ImportedModel& model) {
  return ProgramConverter(records, read_record, options, model).Convert();
}

}  // namespace forge::pt2
