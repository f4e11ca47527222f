// Operator schemas from LibTorch's dispatcher, in the terms the importer needs. Internal to the
// importer: this header is LibTorch-free, the lookup lives in op_schema.cc. It is protobuf-free
// as well: LibTorch's include folder ships an older protobuf whose headers would shadow ours in
// op_schema.cc.
#ifndef FORGE_COMPILER_IMPORT_OP_SCHEMA_H_
#define FORGE_COMPILER_IMPORT_OP_SCHEMA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace forge::pt2 {

// How a schema argument's type decides the IR form of its value.
enum class ArgumentType {
  kTensor,              // Tensor
  kOptionalTensor,      // Tensor?
  kTensorList,          // Tensor[]
  kOptionalTensorList,  // Tensor?[]
  kBoolList,            // bool[]
  kOther,               // scalars, strings, int/float lists, dtypes, devices, ...
};

// A schema default, spelled as torch.export's serde spells argument values (the Argument union
// of torch/_export/serde/schema.py), so that one conversion to IR serves archive values and
// defaults alike. Enumerations (dtype, layout, memory format) use the serde's numbering.
struct DefaultValue {
  enum class Kind {
    kNone, kBool, kInt, kFloat, kString, kInts, kFloats, kBools,
    kScalarType, kLayout, kMemoryFormat, kDevice,
    kUnsupported,  // no IR form; `text` says what it is
  };
  Kind kind = Kind::kNone;
  bool bool_value = false;
  std::int64_t int_value = 0;  // also the enumerations and the device index
  double float_value = 0;
  std::string text;            // string value, device type, or what is unsupported
  bool has_device_index = false;
  std::vector<std::int64_t> ints;
  std::vector<double> floats;
  std::vector<bool> bools;
};

struct SchemaArgument {
  std::string name;
  ArgumentType type = ArgumentType::kOther;
  bool keyword_only = false;
  bool has_default = false;
  DefaultValue default_value;  // when has_default
  // An alias annotation that lets a result alias this argument ("Tensor(a) self" of a view op),
  // or one that writes it ("Tensor(a!) self").
  bool aliased_by_result = false;
  bool written = false;
};

struct OpSchema {
  // The schema as the dispatcher prints it (what Python's str(op._schema) gives).
  std::string text;
  std::vector<SchemaArgument> arguments;
  // Whether an argument is written in place (an alias annotation with "!", e.g. add_ or out=).
  bool is_mutable = false;
  // Whether a result may alias an argument (views, in-place ops): then it is not a fresh tensor.
  bool result_aliases_argument = false;
};

// The schema of `qualified_name` (e.g. "aten::addmm") at `overload` as torch.export spells it
// ("default" for the dispatcher's ""). NotFound when LibTorch does not register the operator.
absl::StatusOr<OpSchema> LookupOpSchema(absl::string_view qualified_name,
                                        absl::string_view overload);

// The functional counterpart of an in-place op: for "aten::relu_" at `overload`, the schema of
// "aten::relu" at the same overload. NotFound, saying why, unless the in-place op writes exactly
// its first argument and returns it, and the functional op exists, mutates nothing and has the
// same arguments and result type apart from the alias annotations.
absl::StatusOr<OpSchema> LookupFunctionalVariant(absl::string_view qualified_name,
                                                 absl::string_view overload);

}  // namespace forge::pt2

#endif  // FORGE_COMPILER_IMPORT_OP_SCHEMA_H_
