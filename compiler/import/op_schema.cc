#include "compiler/import/op_schema.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <utility>

#include "ATen/core/dispatch/Dispatcher.h"
#include "ATen/core/function_schema.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace forge::pt2 {
namespace {

ArgumentType ClassifyType(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return ArgumentType::kTensor;
  if (auto optional = type->cast<c10::OptionalType>()) {
    if (optional->getElementType()->kind() == c10::TypeKind::TensorType) {
      return ArgumentType::kOptionalTensor;
    }
  }
  if (auto list = type->cast<c10::ListType>()) {
    const c10::TypePtr& element = list->getElementType();
    if (element->kind() == c10::TypeKind::TensorType) return ArgumentType::kTensorList;
    if (element->kind() == c10::TypeKind::BoolType) return ArgumentType::kBoolList;
    if (auto optional = element->cast<c10::OptionalType>()) {
      if (optional->getElementType()->kind() == c10::TypeKind::TensorType) {
        return ArgumentType::kOptionalTensorList;
      }
    }
  }
  return ArgumentType::kOther;
}

// The declared type without its Optional wrapper.
c10::TypeKind BaseKind(const c10::TypePtr& type) {
  if (auto optional = type->cast<c10::OptionalType>()) return optional->getElementType()->kind();
  return type->kind();
}

// torch.export serde's ScalarType numbering (torch/_export/serde/schema.py); 0 is UNKNOWN.
std::int64_t SerdeScalarType(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Byte: return 1;
    case c10::ScalarType::Char: return 2;
    case c10::ScalarType::Short: return 3;
    case c10::ScalarType::Int: return 4;
    case c10::ScalarType::Long: return 5;
    case c10::ScalarType::Half: return 6;
    case c10::ScalarType::Float: return 7;
    case c10::ScalarType::Double: return 8;
    case c10::ScalarType::ComplexHalf: return 9;
    case c10::ScalarType::ComplexFloat: return 10;
    case c10::ScalarType::ComplexDouble: return 11;
    case c10::ScalarType::Bool: return 12;
    case c10::ScalarType::BFloat16: return 13;
    case c10::ScalarType::UInt16: return 28;
    case c10::ScalarType::Float8_e4m3fn: return 29;
    case c10::ScalarType::Float8_e5m2: return 30;
    default: return 0;
  }
}

// The serde's MemoryFormat numbering; 0 is Unknown.
std::int64_t SerdeMemoryFormat(c10::MemoryFormat format) {
  switch (format) {
    case c10::MemoryFormat::Contiguous: return 1;
    case c10::MemoryFormat::ChannelsLast: return 2;
    case c10::MemoryFormat::ChannelsLast3d: return 3;
    case c10::MemoryFormat::Preserve: return 4;
    default: return 0;
  }
}

// The default the way torch.export's serializer would have written the value.
DefaultValue DefaultOf(const c10::Argument& argument) {
  using Kind = DefaultValue::Kind;
  const c10::IValue& value = *argument.default_value();
  const c10::TypeKind kind = BaseKind(argument.type());
  DefaultValue result;
  if (value.isNone()) {
    result.kind = Kind::kNone;
  } else if (kind == c10::TypeKind::ScalarTypeType && value.isInt()) {
    result.kind = Kind::kScalarType;
    result.int_value = SerdeScalarType(static_cast<c10::ScalarType>(value.toInt()));
  } else if (kind == c10::TypeKind::LayoutType && value.isInt()) {
    // Only the strided layout (serde Strided = 7) has an IR form among defaults that occur.
    if (static_cast<c10::Layout>(value.toInt()) == c10::Layout::Strided) {
      result.kind = Kind::kLayout;
      result.int_value = 7;
    } else {
      result.kind = Kind::kUnsupported;
      result.text = "a non-strided layout";
    }
  } else if (kind == c10::TypeKind::MemoryFormatType && value.isInt()) {
    result.kind = Kind::kMemoryFormat;
    result.int_value = SerdeMemoryFormat(static_cast<c10::MemoryFormat>(value.toInt()));
  } else if (value.isBool()) {
    result.kind = Kind::kBool;
    result.bool_value = value.toBool();
  } else if (value.isInt()) {
    result.kind = Kind::kInt;
    result.int_value = value.toInt();
  } else if (value.isDouble()) {
    result.kind = Kind::kFloat;
    result.float_value = value.toDouble();
  } else if (value.isString()) {
    result.kind = Kind::kString;
    result.text = value.toStringRef();
  } else if (value.isDevice()) {
    const c10::Device device = value.toDevice();
    result.kind = Kind::kDevice;
    result.text = c10::DeviceTypeName(device.type(), /*lower_case=*/true);
    result.has_device_index = device.has_index();
    result.int_value = device.has_index() ? device.index() : 0;
  } else if (value.isBoolList()) {
    result.kind = Kind::kBools;
    for (bool item : value.toBoolList()) result.bools.push_back(item);
  } else if (value.isIntList()) {
    result.kind = Kind::kInts;
    for (int64_t item : value.toIntList()) result.ints.push_back(item);
  } else if (value.isDoubleList()) {
    result.kind = Kind::kFloats;
    for (double item : value.toDoubleList()) result.floats.push_back(item);
  } else {
    result.kind = Kind::kUnsupported;
    result.text = value.tagKind();
  }
  return result;
}

std::optional<c10::OperatorHandle> FindOperator(absl::string_view qualified_name,
                                                absl::string_view overload) {
  const std::string dispatcher_overload = overload == "default" ? "" : std::string(overload);
  return c10::Dispatcher::singleton().findSchema(
      c10::OperatorName(std::string(qualified_name), dispatcher_overload));
}

absl::Status NotRegistered(absl::string_view qualified_name, absl::string_view overload) {
  return absl::NotFoundError(absl::StrCat("operator ", qualified_name, ".", overload,
                                          " is not registered with LibTorch's dispatcher"));
}

OpSchema ConvertSchema(const c10::FunctionSchema& schema) {
  OpSchema result;
  std::ostringstream text;
  text << schema;
  result.text = text.str();
  result.is_mutable = schema.is_mutable();
  for (const c10::Argument& argument : schema.arguments()) {
    SchemaArgument& out = result.arguments.emplace_back();
    out.name = argument.name();
    out.type = ClassifyType(argument.type());
    out.keyword_only = argument.kwarg_only();
    out.has_default = argument.default_value().has_value();
    if (out.has_default) out.default_value = DefaultOf(argument);
    if (const c10::AliasInfo* alias = argument.alias_info()) {
      out.written = alias->isWrite();
      out.aliased_by_result = !out.written;
      // Views name the argument a result aliases ("Tensor(a -> *) self" of chunk) even where
      // the result's own annotation sits on a list's elements.
      result.result_aliases_argument |= out.aliased_by_result;
    }
  }
  for (const c10::Argument& result_argument : schema.returns()) {
    result.result_aliases_argument |= result_argument.alias_info() != nullptr;
  }
  return result;
}

c10::Argument WithoutAliasAnnotation(const c10::Argument& argument) {
  return c10::Argument(argument.name(), argument.type(), argument.real_type(), argument.N(),
                       argument.default_value(), argument.kwarg_only(), std::nullopt);
}

// Whether the two lists agree apart from alias annotations.
bool SameApartFromAliases(const std::vector<c10::Argument>& in_place,
                          const std::vector<c10::Argument>& functional) {
  if (in_place.size() != functional.size()) return false;
  for (size_t i = 0; i < in_place.size(); ++i) {
    if (WithoutAliasAnnotation(in_place[i]) != WithoutAliasAnnotation(functional[i])) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<OpSchema> LookupOpSchema(absl::string_view qualified_name,
                                        absl::string_view overload) {
  std::optional<c10::OperatorHandle> handle = FindOperator(qualified_name, overload);
  if (!handle.has_value()) return NotRegistered(qualified_name, overload);
  return ConvertSchema(handle->schema());
}

absl::StatusOr<OpSchema> LookupFunctionalVariant(absl::string_view qualified_name,
                                                 absl::string_view overload) {
  std::optional<c10::OperatorHandle> in_place = FindOperator(qualified_name, overload);
  if (!in_place.has_value()) return NotRegistered(qualified_name, overload);
  const c10::FunctionSchema& in_place_schema = in_place->schema();
  const std::vector<c10::Argument>& arguments = in_place_schema.arguments();
  const std::vector<c10::Argument>& returns = in_place_schema.returns();
  const auto writes = [](const c10::Argument& argument) {
    return argument.alias_info() != nullptr && argument.alias_info()->isWrite();
  };
  const bool writes_first_only =
      !arguments.empty() && writes(arguments[0]) &&
      std::none_of(arguments.begin() + 1, arguments.end(), writes);
  if (!absl::EndsWith(qualified_name, "_") || !writes_first_only || returns.size() != 1 ||
      !writes(returns[0])) {
    return absl::NotFoundError(absl::StrCat(
        qualified_name, ".", overload,
        " is not an in-place op (one that writes its first argument and returns it)"));
  }
  const absl::string_view functional_name =
      qualified_name.substr(0, qualified_name.size() - 1);
  std::optional<c10::OperatorHandle> functional = FindOperator(functional_name, overload);
  if (!functional.has_value()) {
    return absl::NotFoundError(absl::StrCat(qualified_name, ".", overload,
                                            " has no functional variant: ",
                                            NotRegistered(functional_name, overload).message()));
  }
  const c10::FunctionSchema& functional_schema = functional->schema();
  if (functional_schema.is_mutable() ||
      !SameApartFromAliases(arguments, functional_schema.arguments()) ||
      !SameApartFromAliases(returns, functional_schema.returns())) {
    std::ostringstream schemas;
    schemas << in_place_schema << " vs " << functional_schema;
    return absl::NotFoundError(absl::StrCat(qualified_name, ".", overload,
                                            " and its functional variant differ: ",
                                            schemas.str()));
  }
  return ConvertSchema(functional_schema);
}

}  // namespace forge::pt2
