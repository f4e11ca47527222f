// The interpreter proper: the only file of forge::aten that includes LibTorch.
#include "aten/aten.h"

#include "aten/interpreter.h"

#include <ATen/Context.h>
#include <ATen/ScalarOps.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/digest/sha256.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/sdpa_library/sdpa_library.h"
#include "compiler/graph/op_classes.h"

namespace forge::aten {
namespace internal {

std::string NodeWhere(const v1::Node& node) {
  return absl::StrCat("node '", node.name(), "' (", node.op(), ".", node.overload(), ")");
}

absl::StatusOr<c10::OperatorHandle> FindOperator(const v1::Node& node) {
  // The dispatcher spells the default overload as the empty string.
  const std::string overload = node.overload() == "default" ? "" : node.overload();
  std::optional<c10::OperatorHandle> op = c10::Dispatcher::singleton().findSchema({node.op(), overload});
  if (!op.has_value()) {
    return absl::NotFoundError(absl::StrCat(NodeWhere(node), ": the dispatcher has no operator ",
                                            node.op(), ".", node.overload()));
  }
  if (!node.schema().empty() && node.schema() != c10::toString(op->schema())) {
    return absl::FailedPreconditionError(absl::StrCat(NodeWhere(node), ": the graph's schema '",
                                                      node.schema(), "' differs from this LibTorch's '",
                                                      c10::toString(op->schema()), "'"));
  }
  return *std::move(op);
}

}  // namespace internal

namespace {

// Runs a node that the SDPA library family rewrote (compiler/codegen/sdpa_library: the attribute
// kSdpaBackendAttribute) with only the named backend of scaled_dot_product_attention enabled, as
// torch.nn.attention.sdpa_kernel does: ATen's process-wide switches, set for the call and put
// back after it. Nodes without the attribute run as they are.
class SdpaBackendScope {
 public:
  static absl::StatusOr<SdpaBackendScope> For(const v1::Node& node) {
    SdpaBackendScope scope;
    auto it = node.attributes().find(codegen::kSdpaBackendAttribute);
    if (it == node.attributes().end()) return scope;
    const std::string& backend = it->second;
    if (backend != "flash" && backend != "efficient" && backend != "cudnn" && backend != "math") {
      return absl::InvalidArgumentError(absl::StrCat(internal::NodeWhere(node),
                                                     ": unknown SDPA backend '", backend, "'"));
    }
    at::Context& context = at::globalContext();
    scope.saved_ = {context.userEnabledFlashSDP(), context.userEnabledMemEfficientSDP(),
                    context.userEnabledCuDNNSDP(), context.userEnabledMathSDP()};
    scope.active_ = true;
    Set({backend == "flash", backend == "efficient", backend == "cudnn", backend == "math"});
    return scope;
  }
  SdpaBackendScope(SdpaBackendScope&& other) noexcept
      : saved_(other.saved_), active_(std::exchange(other.active_, false)) {}
  SdpaBackendScope(const SdpaBackendScope&) = delete;
  SdpaBackendScope& operator=(const SdpaBackendScope&) = delete;
  ~SdpaBackendScope() {
    if (active_) Set(saved_);
  }

 private:
  struct Enabled {
    bool flash = true, efficient = true, cudnn = true, math = true;
  };
  SdpaBackendScope() = default;
  static void Set(const Enabled& enabled) {
    at::Context& context = at::globalContext();
    context.setSDPUseFlash(enabled.flash);
    context.setSDPUseMemEfficient(enabled.efficient);
    context.setSDPUseCuDNN(enabled.cudnn);
    context.setSDPUseMath(enabled.math);
  }
  Enabled saved_;
  bool active_ = false;
};

// Forge's dtypes and the ATen scalar types they are, one to one: both directions read this table.
struct DTypeAndScalarType {
  v1::DType dtype;
  at::ScalarType scalar_type;
};
constexpr DTypeAndScalarType kScalarTypes[] = {
    {v1::DTYPE_FLOAT64, at::kDouble},
    {v1::DTYPE_FLOAT32, at::kFloat},
    {v1::DTYPE_FLOAT16, at::kHalf},
    {v1::DTYPE_BFLOAT16, at::kBFloat16},
    {v1::DTYPE_FLOAT8_E4M3FN, at::kFloat8_e4m3fn},
    {v1::DTYPE_FLOAT8_E5M2, at::kFloat8_e5m2},
    {v1::DTYPE_INT8, at::kChar},
    {v1::DTYPE_INT16, at::kShort},
    {v1::DTYPE_INT32, at::kInt},
    {v1::DTYPE_INT64, at::kLong},
    {v1::DTYPE_UINT8, at::kByte},
    {v1::DTYPE_BOOL, at::kBool},
    {v1::DTYPE_COMPLEX64, at::kComplexFloat},
};

absl::StatusOr<at::ScalarType> ToScalarType(v1::DType dtype) {
  for (const DTypeAndScalarType& entry : kScalarTypes) {
    if (entry.dtype == dtype) return entry.scalar_type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dtype ", v1::DType_Name(dtype), " has no ATen scalar type"));
}

absl::StatusOr<v1::DType> FromScalarType(at::ScalarType type) {
  for (const DTypeAndScalarType& entry : kScalarTypes) {
    if (entry.scalar_type == type) return entry.dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("ATen scalar type ", c10::toString(type), " has no Forge dtype"));
}

absl::StatusOr<at::Layout> ToLayout(v1::Layout layout) {
  switch (layout) {
    case v1::LAYOUT_UNSPECIFIED:
    case v1::LAYOUT_STRIDED: return at::kStrided;
    case v1::LAYOUT_SPARSE_COO: return at::kSparse;
    case v1::LAYOUT_SPARSE_CSR: return at::kSparseCsr;
    case v1::LAYOUT_SPARSE_CSC: return at::kSparseCsc;
    case v1::LAYOUT_SPARSE_BSR: return at::kSparseBsr;
    case v1::LAYOUT_SPARSE_BSC: return at::kSparseBsc;
    case v1::LAYOUT_MKLDNN: return at::kMkldnn;
    default: return absl::InvalidArgumentError(absl::StrCat("unknown layout ", static_cast<int>(layout)));
  }
}

absl::StatusOr<at::MemoryFormat> ToMemoryFormat(v1::MemoryFormat format) {
  switch (format) {
    case v1::MEMORY_FORMAT_CONTIGUOUS: return at::MemoryFormat::Contiguous;
    case v1::MEMORY_FORMAT_CHANNELS_LAST: return at::MemoryFormat::ChannelsLast;
    case v1::MEMORY_FORMAT_CHANNELS_LAST_3D: return at::MemoryFormat::ChannelsLast3d;
    case v1::MEMORY_FORMAT_PRESERVE: return at::MemoryFormat::Preserve;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown memory format ", static_cast<int>(format)));
  }
}

std::string ShapeString(absl::Span<const std::int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The ATen tensor holding `bytes` (row-major elements) laid out with `strides` when they describe
// a dense, non-overlapping layout; otherwise (e.g. the zero strides of an expanded tensor, whose
// bytes are already materialized) row-major.
absl::StatusOr<at::Tensor> TensorFromBytes(v1::DType dtype, absl::Span<const std::int64_t> shape,
                                           absl::Span<const std::int64_t> strides, absl::string_view bytes,
                                           absl::string_view where) {
  FORGE_ASSIGN_OR_RETURN(at::ScalarType scalar_type, ToScalarType(dtype));
  if (!strides.empty() && strides.size() != shape.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", strides.size(), " strides for shape ", ShapeString(shape)));
  }
  const auto options = at::TensorOptions().dtype(scalar_type);
  at::Tensor row_major = at::empty(c10::IntArrayRef(shape.data(), shape.size()), options);
  if (row_major.nbytes() != bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", bytes.size(), " bytes, but ",
                                                   v1::DType_Name(dtype), " ", ShapeString(shape), " takes ",
                                                   row_major.nbytes()));
  }
  std::memcpy(row_major.data_ptr(), bytes.data(), bytes.size());
  if (strides.empty() || row_major.strides().equals(c10::IntArrayRef(strides.data(), strides.size()))) {
    return row_major;
  }
  at::Tensor laid_out = at::empty_strided(c10::IntArrayRef(shape.data(), shape.size()),
                                          c10::IntArrayRef(strides.data(), strides.size()), options);
  if (!laid_out.is_non_overlapping_and_dense()) return row_major;
  laid_out.copy_(row_major);
  return laid_out;
}

absl::StatusOr<HostTensor> ToHostTensor(const at::Tensor& tensor) {
  HostTensor host;
  FORGE_ASSIGN_OR_RETURN(host.dtype, FromScalarType(tensor.scalar_type()));
  host.shape.assign(tensor.sizes().begin(), tensor.sizes().end());
  host.strides.assign(tensor.strides().begin(), tensor.strides().end());
  // One copy, straight into the row-major bytes (from the device, or gathering a strided layout).
  host.bytes.resize(tensor.nbytes());
  at::from_blob(host.bytes.data(), tensor.sizes(), at::TensorOptions().dtype(tensor.scalar_type()))
      .copy_(tensor);
  return host;
}

// The type of a schema argument with Optional[...] taken off, and whether it was there.
struct DeclaredType {
  c10::TypePtr type;
  bool optional = false;
};

DeclaredType Declared(const c10::Argument& argument) {
  // real_type, not type: type() shows ScalarType, Layout and MemoryFormat as plain int.
  c10::TypePtr type = argument.real_type();
  if (type->kind() == c10::TypeKind::OptionalType) {
    return {type->expectRef<c10::OptionalType>().getElementType(), true};
  }
  return {type, false};
}

bool IsKind(const c10::TypePtr& type, c10::TypeKind kind) { return type->kind() == kind; }

bool IsIntKind(const c10::TypePtr& type) {
  return IsKind(type, c10::TypeKind::IntType) || IsKind(type, c10::TypeKind::SymIntType);
}

// The element type of a list type; nullptr when `type` is not a list.
c10::TypePtr ListElement(const c10::TypePtr& type) {
  if (!IsKind(type, c10::TypeKind::ListType)) return nullptr;
  return type->expectRef<c10::ListType>().getElementType();
}

bool IsListOf(const c10::TypePtr& type, bool (*element_matches)(const c10::TypePtr&)) {
  c10::TypePtr element = ListElement(type);
  return element != nullptr && element_matches(element);
}

bool IsTensor(const c10::TypePtr& type) { return IsKind(type, c10::TypeKind::TensorType); }
bool IsFloat(const c10::TypePtr& type) { return IsKind(type, c10::TypeKind::FloatType); }
bool IsBool(const c10::TypePtr& type) { return IsKind(type, c10::TypeKind::BoolType); }
bool IsOptionalTensor(const c10::TypePtr& type) {
  return IsKind(type, c10::TypeKind::OptionalType) &&
         IsTensor(type->expectRef<c10::OptionalType>().getElementType());
}

// A Python number passed where the schema says Tensor (e.g. the 2.0 of `x * 2.0`, recorded as
// aten::mul.Tensor): a wrapped-number tensor, which type promotion treats like a scalar, as the
// Python binding does.
c10::IValue WrappedNumber(const at::Scalar& number) { return at::native::wrapped_scalar_tensor(number); }

// One run: the values computed so far, by name.
class Interpreter {
 public:
  Interpreter(const v1::Graph& graph, Precision precision, c10::Device device = c10::kCPU)
      : graph_(graph), precision_(precision), device_(device) {
    for (const v1::Value& value : graph.values()) specs_[value.name()] = &value.tensor();
  }

  // Defines `value_name` from host bytes, checked against the graph's spec of the value.
  absl::Status BindInput(const std::string& value_name, const HostTensor& host, absl::string_view where) {
    const v1::TensorSpec* spec = Spec(value_name);
    if (spec != nullptr) {
      if (host.dtype != spec->dtype()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": dtype ", v1::DType_Name(host.dtype),
                                                       ", the graph declares ",
                                                       v1::DType_Name(spec->dtype())));
      }
      if (!std::equal(host.shape.begin(), host.shape.end(), spec->shape().begin(), spec->shape().end())) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": shape ", ShapeString(host.shape),
                                                       ", the graph declares ", ShapeString(spec->shape())));
      }
    }
    FORGE_ASSIGN_OR_RETURN(at::Tensor tensor,
                           TensorFromBytes(host.dtype, host.shape, host.strides, host.bytes, where));
    return Define(value_name, std::move(tensor), where);
  }

  // Defines a parameter, buffer or constant from its inline bytes or its blob, verified against
  // the digest and size the graph records.
  absl::Status BindData(const v1::GraphInput& input, const BlobSource& blobs) {
    const std::string where = absl::StrCat("input '", input.value_name(), "' (", input.target(), ")");
    const v1::TensorData& data = input.data();
    std::string bytes;
    if (!data.inline_bytes().empty()) {
      bytes = data.inline_bytes();
    } else {
      absl::StatusOr<std::string> blob = blobs.Read(data.sha256());
      if (!blob.ok()) return Annotate(blob.status(), where);
      bytes = *std::move(blob);
    }
    if (static_cast<std::int64_t>(bytes.size()) != data.size_bytes()) {
      return absl::DataLossError(absl::StrCat(where, ": blob ", data.sha256(), " has ", bytes.size(),
                                              " bytes, the graph records ", data.size_bytes()));
    }
    if (std::string actual = Sha256Hex(bytes); actual != data.sha256()) {
      return absl::DataLossError(absl::StrCat(where, ": blob ", data.sha256(), " has digest ", actual));
    }
    const v1::TensorSpec* spec = Spec(input.value_name());
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": the graph has no value spec for it"));
    }
    FORGE_ASSIGN_OR_RETURN(at::Tensor tensor,
                           TensorFromBytes(spec->dtype(), spec->shape(), spec->strides(), bytes, where));
    return Define(input.value_name(), std::move(tensor), where);
  }

  absl::Status RunNodes() {
    for (const v1::Node& node : graph_.nodes()) FORGE_RETURN_IF_ERROR(RunNode(node));
    return absl::OkStatus();
  }

  absl::Status Define(const std::string& value_name, at::Tensor tensor, absl::string_view where) {
    if (!values_.emplace(value_name, Upcast(OnDevice(std::move(tensor)))).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": value '", value_name, "' is defined twice"));
    }
    return absl::OkStatus();
  }

  absl::flat_hash_map<std::string, at::Tensor> TakeValues() { return std::move(values_); }

  absl::StatusOr<HostTensor> Fetch(const std::string& value_name) const {
    auto it = values_.find(value_name);
    if (it == values_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("output '", value_name, "' is not computed by the graph"));
    }
    absl::StatusOr<HostTensor> host = ToHostTensor(it->second);
    if (!host.ok()) return Annotate(host.status(), absl::StrCat("output '", value_name, "'"));
    return host;
  }

 private:
  const v1::TensorSpec* Spec(const std::string& value_name) const {
    auto it = specs_.find(value_name);
    return it == specs_.end() ? nullptr : it->second;
  }

  // `tensor` on the interpreter's device, moved before any upcast so that the copy moves the
  // narrower dtype; `to` keeps the strides of a dense layout.
  at::Tensor OnDevice(at::Tensor tensor) const {
    return tensor.device() == device_ ? tensor : tensor.to(device_);
  }

  // In float64 mode, a floating tensor in float64; any other tensor as it is.
  at::Tensor Upcast(at::Tensor tensor) const {
    if (precision_ == Precision::kFloat64 && at::isFloatingType(tensor.scalar_type())) {
      return tensor.to(at::kDouble);
    }
    return tensor;
  }

  absl::StatusOr<at::Tensor> Lookup(const std::string& value_name, absl::string_view where) const {
    auto it = values_.find(value_name);
    if (it == values_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": value '", value_name, "' is not defined before this node"));
    }
    return it->second;
  }

  // In float64 mode every floating dtype an op is told to produce becomes float64.
  at::ScalarType Promoted(at::ScalarType type) const {
    return precision_ == Precision::kFloat64 && at::isFloatingType(type) ? at::kDouble : type;
  }

  // A node that takes no tensors but produces some (arange, full, scalar_tensor): the factory ops.
  static bool IsFactory(const v1::Node& node) {
    if (node.outputs().empty()) return false;
    for (const v1::Argument& argument : node.arguments()) {
      switch (argument.value_case()) {
        case v1::Argument::kTensor:
        case v1::Argument::kOptionalTensor:
        case v1::Argument::kTensors:
        case v1::Argument::kOptionalTensors: return false;
        default: break;
      }
    }
    return true;
  }

  // A factory node that produces a floating tensor: with dtype=None it would use torch's default
  // float32, so float64 mode names float64 instead.
  bool IsFloatingFactory(const v1::Node& node) const {
    if (precision_ != Precision::kFloat64 || !IsFactory(node)) return false;
    const v1::TensorSpec* spec = Spec(node.outputs(0));
    if (spec == nullptr) return false;
    absl::StatusOr<at::ScalarType> type = ToScalarType(spec->dtype());
    return type.ok() && at::isFloatingType(*type);
  }

  // The IValue of one node argument, as the schema argument's type wants it.
  absl::StatusOr<c10::IValue> ConvertArgument(const v1::Argument& argument,
                                              const c10::Argument& schema_argument,
                                              absl::string_view where) const {
    const auto [type, optional] = Declared(schema_argument);
    auto mismatch = [&] {
      const auto* field = v1::Argument::descriptor()->FindFieldByNumber(argument.value_case());
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": a ", field != nullptr ? field->name() : "missing",
                       " value does not fit schema type ", schema_argument.real_type()->str()));
    };
    switch (argument.value_case()) {
      case v1::Argument::kNone:
        if (!optional && !IsKind(type, c10::TypeKind::NoneType)) return mismatch();
        return c10::IValue();
      case v1::Argument::kTensor:
        if (!IsTensor(type)) return mismatch();
        return Lookup(argument.tensor(), where);
      case v1::Argument::kOptionalTensor:
        if (!IsTensor(type)) return mismatch();
        if (!argument.optional_tensor().has_value_name()) {
          if (!optional) return mismatch();
          return c10::IValue();
        }
        return Lookup(argument.optional_tensor().value_name(), where);
      case v1::Argument::kTensors: {
        if (!IsListOf(type, IsTensor)) return mismatch();
        c10::List<at::Tensor> tensors;
        for (const std::string& name : argument.tensors().value_names()) {
          FORGE_ASSIGN_OR_RETURN(at::Tensor tensor, Lookup(name, where));
          tensors.push_back(std::move(tensor));
        }
        return tensors;
      }
      case v1::Argument::kOptionalTensors: {
        if (!IsListOf(type, IsOptionalTensor)) return mismatch();
        c10::List<std::optional<at::Tensor>> tensors;
        for (const v1::OptionalTensor& item : argument.optional_tensors().items()) {
          if (!item.has_value_name()) {
            tensors.push_back(std::nullopt);
            continue;
          }
          FORGE_ASSIGN_OR_RETURN(at::Tensor tensor, Lookup(item.value_name(), where));
          tensors.push_back(std::move(tensor));
        }
        return tensors;
      }
      case v1::Argument::kIntValue: {
        const std::int64_t value = argument.int_value();
        if (IsIntKind(type) || IsKind(type, c10::TypeKind::NumberType)) return value;
        if (IsFloat(type)) return static_cast<double>(value);
        if (IsTensor(type)) return WrappedNumber(value);
        // `int[2] padding=0`: one integer stands for the whole fixed-size list.
        if (IsListOf(type, IsIntKind) && schema_argument.N().has_value()) {
          return c10::List<std::int64_t>(std::vector<std::int64_t>(*schema_argument.N(), value));
        }
        return mismatch();
      }
      case v1::Argument::kFloatValue:
        if (IsFloat(type) || IsKind(type, c10::TypeKind::NumberType)) return argument.float_value();
        if (IsTensor(type)) return WrappedNumber(argument.float_value());
        return mismatch();
      case v1::Argument::kBoolValue:
        if (IsBool(type) || IsKind(type, c10::TypeKind::NumberType)) return argument.bool_value();
        if (IsTensor(type)) return WrappedNumber(argument.bool_value());
        return mismatch();
      case v1::Argument::kStringValue:
        if (!IsKind(type, c10::TypeKind::StringType)) return mismatch();
        return argument.string_value();
      case v1::Argument::kInts: {
        const auto& values = argument.ints().values();
        if (IsListOf(type, IsIntKind))
          return c10::List<std::int64_t>(std::vector<std::int64_t>(values.begin(), values.end()));
        if (IsListOf(type, IsFloat))
          return c10::List<double>(std::vector<double>(values.begin(), values.end()));
        return mismatch();
      }
      case v1::Argument::kFloats: {
        if (!IsListOf(type, IsFloat)) return mismatch();
        const auto& values = argument.floats().values();
        return c10::List<double>(std::vector<double>(values.begin(), values.end()));
      }
      case v1::Argument::kBools: {
        if (!IsListOf(type, IsBool)) return mismatch();
        c10::List<bool> values;
        for (bool value : argument.bools().values()) values.push_back(value);
        return values;
      }
      case v1::Argument::kDtype: {
        if (!IsKind(type, c10::TypeKind::ScalarTypeType)) return mismatch();
        absl::StatusOr<at::ScalarType> scalar_type = ToScalarType(argument.dtype());
        if (!scalar_type.ok()) return Annotate(scalar_type.status(), where);
        return *scalar_type;
      }
      case v1::Argument::kDevice:
        if (!IsKind(type, c10::TypeKind::DeviceObjType)) return mismatch();
        // The interpreter runs on its own device whatever device the model was exported for.
        return device_;
      case v1::Argument::kLayout: {
        if (!IsKind(type, c10::TypeKind::LayoutType)) return mismatch();
        absl::StatusOr<at::Layout> layout = ToLayout(argument.layout());
        if (!layout.ok()) return Annotate(layout.status(), where);
        return *layout;
      }
      case v1::Argument::kMemoryFormat: {
        if (!IsKind(type, c10::TypeKind::MemoryFormatType)) return mismatch();
        absl::StatusOr<at::MemoryFormat> format = ToMemoryFormat(argument.memory_format());
        if (!format.ok()) return Annotate(format.status(), where);
        return *format;
      }
      case v1::Argument::VALUE_NOT_SET: break;
    }
    return absl::InvalidArgumentError(absl::StrCat(where, ": the argument has no value"));
  }

  // The boxed stack for `node`: one IValue per schema argument, given or defaulted.
  absl::StatusOr<torch::jit::Stack> BuildStack(const v1::Node& node, const c10::FunctionSchema& schema,
                                               absl::string_view where) const {
    absl::flat_hash_map<std::string, const v1::Argument*> given;
    for (const v1::Argument& argument : node.arguments()) {
      if (!given.emplace(argument.name(), &argument).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": argument '", argument.name(), "' is given twice"));
      }
    }
    const bool floating_factory = IsFloatingFactory(node);
    const bool factory = IsFactory(node);
    torch::jit::Stack stack;
    for (const c10::Argument& schema_argument : schema.arguments()) {
      const std::string argument_where = absl::StrCat(where, " argument '", schema_argument.name(), "'");
      c10::IValue value;
      if (auto it = given.find(schema_argument.name()); it != given.end()) {
        FORGE_ASSIGN_OR_RETURN(value, ConvertArgument(*it->second, schema_argument, argument_where));
        given.erase(it);
      } else if (schema_argument.default_value().has_value()) {
        value = *schema_argument.default_value();
      } else {
        return absl::InvalidArgumentError(absl::StrCat(argument_where, ": required, and not given"));
      }
      if (IsKind(Declared(schema_argument).type, c10::TypeKind::ScalarTypeType)) {
        if (value.isNone() && floating_factory) {
          value = at::kDouble;
        } else if (!value.isNone()) {
          value = Promoted(value.toScalarType());
        }
      }
      // device=None would make a factory's tensor on the CPU, wherever the interpreter runs.
      if (factory && value.isNone() && IsKind(Declared(schema_argument).type, c10::TypeKind::DeviceObjType)) {
        value = device_;
      }
      stack.push_back(std::move(value));
    }
    if (!given.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": argument '", given.begin()->first,
                                                     "' is not in the schema ", c10::toString(schema)));
    }
    return stack;
  }

  // Whether a node or the graph's outputs read `value_name`. Asked only of a result that differs
  // from its spec, so the common path builds nothing.
  bool IsRead(const std::string& value_name) const {
    for (const v1::GraphOutput& output : graph_.outputs()) {
      if (output.value_name() == value_name) return true;
    }
    for (const v1::Node& node : graph_.nodes()) {
      for (const std::string& name : graph::TensorArgumentNames(node)) {
        if (name == value_name) return true;
      }
    }
    return false;
  }

  // Checks a node's result against the graph's spec of the value: a wrong argument reading shows
  // up here rather than as a silently different reference. A result nothing reads is not checked:
  // some differ by device, as batch norm's saved statistics in inference ([0] on the CPU, where
  // graphs are exported; [C] in float32 on CUDA).
  absl::Status CheckResult(const std::string& value_name, const at::Tensor& tensor,
                           absl::string_view where) const {
    const v1::TensorSpec* spec = Spec(value_name);
    if (spec == nullptr) return absl::OkStatus();
    if (!std::equal(tensor.sizes().begin(), tensor.sizes().end(), spec->shape().begin(),
                    spec->shape().end())) {
      if (!IsRead(value_name)) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(where, ": output '", value_name, "' has shape ",
                                              ShapeString(tensor.sizes()), ", the graph declares ",
                                              ShapeString(spec->shape())));
    }
    FORGE_ASSIGN_OR_RETURN(at::ScalarType declared, ToScalarType(spec->dtype()));
    if (tensor.scalar_type() != Promoted(declared)) {
      if (!IsRead(value_name)) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(where, ": output '", value_name, "' has dtype ",
                                              c10::toString(tensor.scalar_type()), ", expected ",
                                              c10::toString(Promoted(declared))));
    }
    return absl::OkStatus();
  }

  absl::Status RunNode(const v1::Node& node) {
    const std::string where = internal::NodeWhere(node);
    FORGE_ASSIGN_OR_RETURN(c10::OperatorHandle op, internal::FindOperator(node));
    const c10::FunctionSchema& schema = op.schema();
    FORGE_ASSIGN_OR_RETURN(torch::jit::Stack stack, BuildStack(node, schema, where));
    FORGE_ASSIGN_OR_RETURN(const SdpaBackendScope backend, SdpaBackendScope::For(node));
    try {
      op.callBoxed(stack);
    } catch (const c10::Error& error) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ATen failed: ", error.what_without_backtrace()));
    } catch (const std::exception& error) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ATen failed: ", error.what()));
    }
    std::vector<at::Tensor> results;
    for (const c10::IValue& returned : stack) {
      if (returned.isTensor()) {
        results.push_back(returned.toTensor());
      } else if (returned.isTensorList()) {
        for (const at::Tensor& tensor : returned.toTensorVector()) results.push_back(tensor);
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": returns a ", returned.tagKind(), "; the graph carries tensors only"));
      }
    }
    if (results.size() != static_cast<std::size_t>(node.outputs_size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": returns ", results.size(), " tensors, the node names ", node.outputs_size(), " outputs"));
    }
    for (int i = 0; i < node.outputs_size(); ++i) {
      // Upcast first: an op that makes floats from integers (true division, sigmoid) gives
      // torch's default float32 even in float64 mode.
      at::Tensor result = Upcast(std::move(results[i]));
      FORGE_RETURN_IF_ERROR(CheckResult(node.outputs(i), result, where));
      FORGE_RETURN_IF_ERROR(Define(node.outputs(i), std::move(result), where));
    }
    return absl::OkStatus();
  }

  const v1::Graph& graph_;
  const Precision precision_;
  const c10::Device device_;
  absl::flat_hash_map<std::string, const v1::TensorSpec*> specs_;
  absl::flat_hash_map<std::string, at::Tensor> values_;
};

absl::StatusOr<std::vector<HostTensor>> FetchOutputs(const Interpreter& interpreter, const v1::Graph& graph,
                                                     bool user_outputs_only) {
  std::vector<HostTensor> outputs;
  for (const v1::GraphOutput& output : graph.outputs()) {
    if (user_outputs_only && output.kind() != v1::OUTPUT_KIND_USER_OUTPUT) continue;
    FORGE_ASSIGN_OR_RETURN(HostTensor host, interpreter.Fetch(output.value_name()));
    outputs.push_back(std::move(host));
  }
  return outputs;
}

// Runs a task's group on `interpreter` once bind(i, value name, where) has bound each of its
// `input_count` inputs; InvalidArgument when that is not the group's input count.
template <typename Bind>
absl::Status RunGroup(const v1::KernelTask& task, std::size_t input_count, Interpreter& interpreter,
                      const Bind& bind) {
  const v1::Graph& group = task.group();
  if (input_count != static_cast<std::size_t>(group.inputs_size())) {
    return absl::InvalidArgumentError(absl::StrCat("task ", task.digest(), ": the group takes ",
                                                   group.inputs_size(), " inputs, ", input_count,
                                                   " given"));
  }
  for (int i = 0; i < group.inputs_size(); ++i) {
    const std::string& name = group.inputs(i).value_name();
    FORGE_RETURN_IF_ERROR(
        bind(i, name, absl::StrCat("task ", task.digest(), " input ", i, " '", name, "'")));
  }
  return interpreter.RunNodes();
}

}  // namespace

absl::StatusOr<std::vector<HostTensor>> RunGraph(const v1::Graph& graph,
                                                 absl::Span<const HostTensor> user_inputs,
                                                 const BlobSource& blobs, Precision precision) {
  // Autograd bookkeeping is of no use to a reference.
  c10::InferenceMode inference_mode;
  Interpreter interpreter(graph, precision);
  std::size_t next_user_input = 0;
  for (const v1::GraphInput& input : graph.inputs()) {
    if (input.kind() != v1::INPUT_KIND_USER_INPUT) {
      FORGE_RETURN_IF_ERROR(interpreter.BindData(input, blobs));
      continue;
    }
    const std::string where = absl::StrCat("user input ", next_user_input, " '", input.value_name(), "'");
    if (next_user_input >= user_inputs.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": only ", user_inputs.size(), " user inputs given"));
    }
    FORGE_RETURN_IF_ERROR(interpreter.BindInput(input.value_name(), user_inputs[next_user_input++], where));
  }
  if (next_user_input != user_inputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the graph takes ", next_user_input, " user inputs, ", user_inputs.size(), " given"));
  }
  FORGE_RETURN_IF_ERROR(interpreter.RunNodes());
  return FetchOutputs(interpreter, graph, /*user_outputs_only=*/true);
}

absl::StatusOr<std::vector<HostTensor>> RunTaskGroup(const v1::KernelTask& task,
                                                     absl::Span<const HostTensor> inputs,
                                                     Precision precision) {
  return internal::RunTaskGroupOn(task, inputs, precision, c10::kCPU);
}

namespace internal {

absl::StatusOr<std::vector<HostTensor>> RunTaskGroupOn(const v1::KernelTask& task,
                                                       absl::Span<const HostTensor> inputs,
                                                       Precision precision, c10::Device device) {
  c10::InferenceMode inference_mode;
  Interpreter interpreter(task.group(), precision, device);
  FORGE_RETURN_IF_ERROR(RunGroup(task, inputs.size(), interpreter,
                                 [&](int i, const std::string& name, const std::string& where) {
                                   return interpreter.BindInput(name, inputs[i], where);
                                 }));
  return FetchOutputs(interpreter, task.group(), /*user_outputs_only=*/false);
}

absl::StatusOr<std::vector<at::Tensor>> RunTaskGroupOnTensors(const v1::KernelTask& task,
                                                              std::vector<at::Tensor> inputs,
                                                              Precision precision,
                                                              c10::Device device) {
  c10::InferenceMode inference_mode;
  const v1::Graph& group = task.group();
  Interpreter interpreter(group, precision, device);
  FORGE_RETURN_IF_ERROR(RunGroup(task, inputs.size(), interpreter,
                                 [&](int i, const std::string& name, const std::string& where) {
                                   return interpreter.Define(name, std::move(inputs[i]), where);
                                 }));
  absl::flat_hash_map<std::string, at::Tensor> values = interpreter.TakeValues();
  std::vector<at::Tensor> outputs;
  for (const v1::GraphOutput& output : group.outputs()) {
    auto it = values.find(output.value_name());
    if (it == values.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("output '", output.value_name(), "' is not computed by the graph"));
    }
    outputs.push_back(it->second);
  }
  return outputs;
}

absl::StatusOr<at::Tensor> ToTensor(const HostTensor& host, absl::string_view where) {
  return TensorFromBytes(host.dtype, host.shape, host.strides, host.bytes, where);
}

absl::StatusOr<HostTensor> ToHost(const at::Tensor& tensor) { return ToHostTensor(tensor); }

absl::StatusOr<at::Tensor> WrapMemory(void* data, const v1::TensorSpec& spec, c10::Device device) {
  FORGE_ASSIGN_OR_RETURN(at::ScalarType scalar_type, ToScalarType(spec.dtype()));
  const auto options = at::TensorOptions().dtype(scalar_type).device(device);
  const c10::IntArrayRef shape(spec.shape().data(), spec.shape().size());
  if (c10::multiply_integers(shape) == 0) return at::empty(shape, options);
  if (spec.strides_size() != spec.shape_size()) return at::from_blob(data, shape, options);
  return at::from_blob(data, shape, c10::IntArrayRef(spec.strides().data(), spec.strides().size()),
                       options);
}

absl::Status RunNodes(const v1::Graph& graph, c10::Device device,
                      absl::flat_hash_map<std::string, at::Tensor>& values) {
  c10::InferenceMode inference_mode;
  Interpreter interpreter(graph, Precision::kNative, device);
  for (auto& [name, tensor] : values) {
    FORGE_RETURN_IF_ERROR(interpreter.Define(name, tensor, absl::StrCat("value '", name, "'")));
  }
  FORGE_RETURN_IF_ERROR(interpreter.RunNodes());
  values = interpreter.TakeValues();
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace forge::aten
