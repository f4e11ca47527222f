#include "compiler/codegen/cuda_expr.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace forge::codegen {
namespace {

using forge::v1::Argument;
using forge::v1::DType;
using forge::v1::Node;

absl::string_view OpName(const Node& node) {
  absl::string_view op = node.op();
  absl::ConsumePrefix(&op, "aten::");
  return op;
}

// Ops computed one element at a time; the arguments they read are listed in EmitPointwise.
const std::set<std::string, std::less<>>& PointwiseOps() {
  static const auto* ops = new std::set<std::string, std::less<>>{
      "abs",        "acos",      "acosh",       "add",         "addcdiv",     "addcmul",
      "asin",       "asinh",     "atan",        "atan2",       "atanh",       "ceil",
      "clamp",      "clamp_max", "clamp_min",   "cos",         "cosh",        "div",
      "elu",        "eq",        "erf",         "erfc",        "exp",         "exp2",
      "expm1",      "floor",     "floor_divide", "fmod",       "ge",          "gelu",
      "gt",         "hardsigmoid", "hardswish", "hardtanh",    "isnan",       "le",
      "leaky_relu", "log",       "log10",       "log1p",       "log2",        "logical_and",
      "logical_not", "logical_or", "logical_xor", "lt",         "masked_fill", "maximum",
      "minimum",    "mish",      "mul",         "ne",          "neg",         "pow",
      "reciprocal", "relu",      "relu6",       "remainder",   "round",       "rsqrt",
      "rsub",       "sigmoid",   "sign",        "silu",        "sin",         "sinh",
      "softplus",   "sqrt",      "square",      "sub",         "tan",         "tanh",
      "trunc",      "where",     "_to_copy",    "clone",       "alias",       "detach",
      "lift_fresh_copy"};
  return *ops;
}

const std::set<std::string, std::less<>>& ViewOps() {
  static const auto* ops = new std::set<std::string, std::less<>>{
      "view",      "_unsafe_view", "reshape", "view_copy", "squeeze",  "squeeze_copy",
      "unsqueeze", "unsqueeze_copy", "flatten", "permute",  "permute_copy", "transpose",
      "transpose_copy", "t",       "t_copy",  "expand",   "expand_copy", "slice",
      "slice_copy", "select",      "select_copy"};
  return *ops;
}

bool IsIdentifierOrLiteral(absl::string_view expr) {
  if (expr.empty()) return false;
  for (char c : expr) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

std::string Join(const Index& index) { return absl::StrJoin(index, ","); }

int64_t NormalizeDim(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }

// An operand of a pointwise op: a computed element or a scalar literal from the node.
struct Operand {
  std::string expr;
  DType dtype = forge::v1::DTYPE_UNSPECIFIED;  // for literals: FLOAT64, INT64 or BOOL
  bool literal = false;
  double literal_value = 0;
};

std::string FormatDouble(double value) {
  if (std::isnan(value)) return "forge_nan()";
  if (std::isinf(value)) return value > 0 ? "forge_inf()" : "(-forge_inf())";
  return absl::StrFormat("(%.17g)", value);
}

}  // namespace

absl::StatusOr<std::string> StorageType(DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT64: return std::string("double");
    case forge::v1::DTYPE_FLOAT32: return std::string("float");
    case forge::v1::DTYPE_FLOAT16: return std::string("ForgeHalf");
    case forge::v1::DTYPE_BFLOAT16: return std::string("ForgeBFloat16");
    case forge::v1::DTYPE_INT8: return std::string("signed char");
    case forge::v1::DTYPE_INT16: return std::string("short");
    case forge::v1::DTYPE_INT32: return std::string("int");
    case forge::v1::DTYPE_INT64: return std::string("long long");
    case forge::v1::DTYPE_UINT8: return std::string("unsigned char");
    case forge::v1::DTYPE_BOOL: return std::string("bool");
    default:
      return absl::UnimplementedError(
          absl::StrCat("dtype ", DTypeName(dtype), " is not supported by the generators"));
  }
}

absl::StatusOr<std::string> RegisterType(DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT16:
    case forge::v1::DTYPE_BFLOAT16:
    case forge::v1::DTYPE_FLOAT32: return std::string("float");
    default: return StorageType(dtype);
  }
}

int64_t ElementBytes(DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT64:
    case forge::v1::DTYPE_INT64: return 8;
    case forge::v1::DTYPE_FLOAT32:
    case forge::v1::DTYPE_INT32: return 4;
    case forge::v1::DTYPE_FLOAT16:
    case forge::v1::DTYPE_BFLOAT16:
    case forge::v1::DTYPE_INT16: return 2;
    case forge::v1::DTYPE_INT8:
    case forge::v1::DTYPE_UINT8:
    case forge::v1::DTYPE_BOOL: return 1;
    default: return 0;
  }
}

bool IsFloatingDType(DType dtype) {
  return dtype == forge::v1::DTYPE_FLOAT64 || dtype == forge::v1::DTYPE_FLOAT32 ||
         dtype == forge::v1::DTYPE_FLOAT16 || dtype == forge::v1::DTYPE_BFLOAT16;
}

std::string LoadConversion(DType dtype, absl::string_view element) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT16: return absl::StrCat("forge_half_to_float(", element, ")");
    case forge::v1::DTYPE_BFLOAT16: return absl::StrCat("forge_bfloat16_to_float(", element, ")");
    default: return std::string(element);
  }
}

std::string StoreConversion(DType dtype, absl::string_view value) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT16: return absl::StrCat("forge_float_to_half(", value, ")");
    case forge::v1::DTYPE_BFLOAT16: return absl::StrCat("forge_float_to_bfloat16(", value, ")");
    default: return std::string(value);
  }
}

std::vector<std::string> VectorStore(DType dtype, const std::vector<std::string>& values,
                                     absl::string_view variable, absl::string_view address,
                                     absl::string_view condition) {
  const std::string guard = condition.empty() ? "" : absl::StrCat("if (", condition, ") ");
  const int width = static_cast<int>(values.size());
  const bool half = dtype == forge::v1::DTYPE_FLOAT16;
  const bool packed = (half || dtype == forge::v1::DTYPE_BFLOAT16) && width % 2 == 0;
  const std::string vector =
      packed ? absl::StrCat("ForgeVec<unsigned, ", width / 2, ">")
             : absl::StrCat("ForgeVec<", *StorageType(dtype), ", ", width, ">");
  std::vector<std::string> statements = {absl::StrCat(vector, " ", variable, ";")};
  if (packed) {
    for (int pair = 0; pair < width / 2; ++pair) {
      statements.push_back(absl::StrCat(variable, ".v[", pair, "] = ",
                                        half ? "forge_pack_half2(" : "forge_pack_bfloat162(",
                                        values[2 * pair], ", ", values[2 * pair + 1], ");"));
    }
  } else {
    for (int v = 0; v < width; ++v) {
      statements.push_back(
          absl::StrCat(variable, ".v[", v, "] = ", StoreConversion(dtype, values[v]), ";"));
    }
  }
  statements.push_back(
      absl::StrCat(guard, "*reinterpret_cast<", vector, "*>(", address, ") = ", variable, ";"));
  return statements;
}

int64_t NumElements(const google::protobuf::RepeatedField<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t size : shape) count *= size;
  return count;
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * std::max<int64_t>(shape[d + 1], 1);
  }
  return strides;
}

bool IsContiguous(const forge::v1::TensorSpec& spec) {
  std::vector<int64_t> shape(spec.shape().begin(), spec.shape().end());
  std::vector<int64_t> expected = ContiguousStrides(shape);
  if (spec.strides_size() != spec.shape_size()) return false;
  for (int d = 0; d < spec.shape_size(); ++d) {
    if (spec.shape(d) > 1 && spec.strides(d) != expected[d]) return false;
  }
  return true;
}

int64_t MaxOffset(const forge::v1::TensorSpec& spec) {
  int64_t offset = 0;
  for (int d = 0; d < spec.shape_size() && d < spec.strides_size(); ++d) {
    if (spec.shape(d) == 0) return 0;
    offset += (spec.shape(d) - 1) * std::abs(spec.strides(d));
  }
  return offset;
}

absl::string_view KernelPrelude() {
  static constexpr char kPrelude[] = R"(// float16 and bfloat16 as bits, converted by PTX instructions: NVRTC does not ship
// cuda_fp16.h / cuda_bf16.h built in, and the generated source must compile without an include
// path. bfloat16 rounding needs sm_80 or newer.
struct __align__(2) ForgeHalf {
  unsigned short bits;
};
struct __align__(2) ForgeBFloat16 {
  unsigned short bits;
};
__device__ __forceinline__ float forge_half_to_float(ForgeHalf h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}
__device__ __forceinline__ ForgeHalf forge_float_to_half(float f) {
  ForgeHalf h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
__device__ __forceinline__ ForgeHalf forge_double_to_half(double d) {
  ForgeHalf h;
  asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.bits) : "d"(d));
  return h;
}
// The bits as the high half of a word: ptxas then takes an element of a loaded vector with one
// byte permute, where a shift of the zero-extended half took two instructions for odd elements.
__device__ __forceinline__ float forge_bfloat16_to_float(ForgeBFloat16 b) {
  float f;
  asm("mov.b32 %0, {%1, %2};" : "=f"(f) : "h"((unsigned short)0), "h"(b.bits));
  return f;
}
__device__ __forceinline__ ForgeBFloat16 forge_float_to_bfloat16(float f) {
  ForgeBFloat16 b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.bits) : "f"(f));
  return b;
}
// Two floats rounded to float16 / bfloat16 and packed in one word, the first in the low half (the
// lower address): one instruction where two conversions and a pack would be.
__device__ __forceinline__ unsigned forge_pack_half2(float first, float second) {
  unsigned packed;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(second), "f"(first));
  return packed;
}
__device__ __forceinline__ unsigned forge_pack_bfloat162(float first, float second) {
  unsigned packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(second), "f"(first));
  return packed;
}

template <typename T, int N>
struct __align__(sizeof(T) * N) ForgeVec {
  T v[N];
};

__device__ __forceinline__ double forge_inf() { return __longlong_as_double(0x7ff0000000000000LL); }
__device__ __forceinline__ double forge_nan() { return __longlong_as_double(0x7ff8000000000000LL); }

__device__ __forceinline__ float forge_exp(float x) { return expf(x); }
__device__ __forceinline__ double forge_exp(double x) { return exp(x); }
__device__ __forceinline__ float forge_log(float x) { return logf(x); }
__device__ __forceinline__ double forge_log(double x) { return log(x); }
__device__ __forceinline__ float forge_rsqrt(float x) { return rsqrtf(x); }
__device__ __forceinline__ double forge_rsqrt(double x) { return rsqrt(x); }
// 2^x through the SFU's ex2 for float (relative error about 2^-22, results below 2^-126 flushed
// to 0: far inside float32's tolerance, one instruction where exp2f takes several); exp2 for
// double.
__device__ __forceinline__ float forge_fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ double forge_fast_exp2(double x) { return exp2(x); }

// GELU, erf form: x * Phi(x) = max(x, 0) - |x| h(|x|), where h(t) = erfc(t / sqrt 2) / 2 =
// 2^(Q(t) - t^2 log2(e) / 2) and Q a polynomial in t (compiler/codegen/tools/fit_gelu_erf.py
// derives it and checks the errors). Past t = 6 the kernel keeps Q(6) and t = 6 in the product:
// absolute error below 6e-9 there, with no cancellation in the negative tail, where
// 1 + erf(x / sqrt 2) loses digits. GELU(+inf) is +inf (|x| h would be inf * 0); GELU(-inf) is
// its limit 0, where ATen's formula gives NaN. One branch-free path of FMAs, a min, a max and an
// ex2, where erff selects coefficients per element and branches (with this form at degree 10 and
// a select for the sign, the layer norm + GELU anchor's kernel went from 38 to 29 instructions
// per element on the H200).
__device__ __forceinline__ float forge_gelu_from_q(float x, float t, float q) {
  const float h = forge_fast_exp2(fmaf(fabsf(x) * fabsf(x), -0.72134752044448170f, q));
  return fmaf(-t, h, fmaxf(x, 0.0f));
}
// Degree 8: relative error below 4.1e-6 for |x| <= 6 (float32's tolerance is 1e-4).
__device__ __forceinline__ float forge_gelu_erf(float x) {
  const float t = fminf(fabsf(x), 6.0f);
  float q = -7.981907579e-09f;
  q = fmaf(q, t, -1.698060487e-06f);
  q = fmaf(q, t, 6.081363608e-05f);
  q = fmaf(q, t, -9.293854237e-04f);
  q = fmaf(q, t, 8.512792177e-03f);
  q = fmaf(q, t, -5.397995561e-02f);
  q = fmaf(q, t, 2.629072070e-01f);
  q = fmaf(q, t, -1.151260376e+00f);
  q = fmaf(q, t, -9.999947548e-01f);
  return forge_gelu_from_q(x, t, q);
}
// Degree 6, for a GELU whose result is float16 or bfloat16: relative error below 4.8e-5 for
// |x| <= 6, a tenth of float16's rounding (4.9e-4) and a fortieth of bfloat16's (2e-3), two FMAs
// fewer per element.
__device__ __forceinline__ float forge_gelu_erf_16bit(float x) {
  const float t = fminf(fabsf(x), 6.0f);
  float q = 2.299924927e-05f;
  q = fmaf(q, t, -6.114901626e-04f);
  q = fmaf(q, t, 7.200188935e-03f);
  q = fmaf(q, t, -5.120821297e-02f);
  q = fmaf(q, t, 2.601252794e-01f);
  q = fmaf(q, t, -1.150214434e+00f);
  q = fmaf(q, t, -1.000058889e+00f);
  return forge_gelu_from_q(x, t, q);
}
__device__ __forceinline__ double forge_gelu_erf(double x) {
  return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
}

// NaN-propagating max and min, as ATen's maximum, minimum, clamp and relu.
template <typename T>
__device__ __forceinline__ T forge_max(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T>
__device__ __forceinline__ T forge_min(T a, T b) { return (a != a || a < b) ? a : b; }

// Python's floor division and remainder, as ATen's div(rounding_mode="floor") and remainder.
template <typename T>
__device__ __forceinline__ T forge_floor_divide_float(T a, T b) {
  if (b == T(0)) return a / b;
  T mod = fmod(a, b);
  T div = (a - mod) / b;
  if (mod != T(0) && (b < T(0)) != (mod < T(0))) div -= T(1);
  if (div == T(0)) return copysign(T(0), a / b);
  T floored = floor(div);
  if (div - floored > T(0.5)) floored += T(1);
  return floored;
}
__device__ __forceinline__ float forge_floor_divide(float a, float b) {
  return forge_floor_divide_float<float>(a, b);
}
__device__ __forceinline__ double forge_floor_divide(double a, double b) {
  return forge_floor_divide_float<double>(a, b);
}
template <typename T>
__device__ __forceinline__ T forge_floor_divide(T a, T b) {
  T quotient = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --quotient;
  return quotient;
}
__device__ __forceinline__ float forge_remainder(float a, float b) {
  float mod = fmodf(a, b);
  return (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) ? mod + b : mod;
}
__device__ __forceinline__ double forge_remainder(double a, double b) {
  double mod = fmod(a, b);
  return (mod != 0.0 && ((b < 0.0) != (mod < 0.0))) ? mod + b : mod;
}
template <typename T>
__device__ __forceinline__ T forge_remainder(T a, T b) {
  T mod = a % b;
  return (mod != 0 && ((b < 0) != (mod < 0))) ? mod + b : mod;
}
template <typename T>
__device__ __forceinline__ T forge_ipow(T base, T exponent) {
  T result = 1;
  while (exponent > 0) {
    if (exponent & 1) result *= base;
    base *= base;
    exponent >>= 1;
  }
  return result;
}
)";
  return kPrelude;
}

// ---- GroupView ----

absl::StatusOr<GroupView> GroupView::Create(const forge::v1::KernelTask& task) {
  GroupView view(task);
  const forge::v1::Graph& group = task.group();
  for (const forge::v1::Value& value : group.values()) view.values_[value.name()] = &value;
  for (int i = 0; i < group.inputs_size(); ++i) {
    const std::string& name = group.inputs(i).value_name();
    if (!view.values_.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("task ", task.digest(), ": group input '", name, "' has no Value"));
    }
    view.input_positions_[name] = i;
  }
  for (const Node& node : group.nodes()) {
    for (const std::string& output : node.outputs()) {
      if (!view.values_.contains(output)) {
        return absl::InvalidArgumentError(absl::StrCat("task ", task.digest(), ": output '", output,
                                                       "' of ", DescribeNode(node),
                                                       " has no Value"));
      }
      view.producers_[output] = &node;
    }
  }
  for (const forge::v1::GraphOutput& output : group.outputs()) {
    if (!view.values_.contains(output.value_name())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task ", task.digest(), ": group output '", output.value_name(), "' has no Value"));
    }
  }
  if (task.inputs_size() != group.inputs_size() || task.outputs_size() != group.outputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", task.digest(), ": ", task.inputs_size(), " input and ", task.outputs_size(),
        " output TensorSpecs for a group of ", group.inputs_size(), " inputs and ",
        group.outputs_size(), " outputs"));
  }
  return view;
}

const forge::v1::Value* GroupView::FindValue(absl::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : it->second;
}

const Node* GroupView::Producer(absl::string_view name) const {
  auto it = producers_.find(name);
  return it == producers_.end() ? nullptr : it->second;
}

int GroupView::InputPosition(absl::string_view name) const {
  auto it = input_positions_.find(name);
  return it == input_positions_.end() ? -1 : it->second;
}

const forge::v1::TensorSpec& GroupView::InputSpec(int position) const {
  return task_->inputs(position);
}

const forge::v1::TensorSpec& GroupView::OutputSpec(int position) const {
  return task_->outputs(position);
}

std::vector<int64_t> GroupView::Shape(absl::string_view name) const {
  const forge::v1::Value* value = FindValue(name);
  if (value == nullptr) return {};
  return {value->tensor().shape().begin(), value->tensor().shape().end()};
}

DType GroupView::DType(absl::string_view name) const {
  const forge::v1::Value* value = FindValue(name);
  return value == nullptr ? forge::v1::DTYPE_UNSPECIFIED : value->tensor().dtype();
}

const Argument* FindArgument(const Node& node, absl::string_view name) {
  for (const Argument& argument : node.arguments()) {
    if (argument.name() == name) return &argument;
  }
  return nullptr;
}

bool IsPointwiseOp(const Node& node) { return PointwiseOps().contains(OpName(node)); }
bool IsViewOp(const Node& node) { return ViewOps().contains(OpName(node)); }

std::string DescribeNode(const Node& node) {
  return absl::StrCat(node.op(), node.overload().empty() ? "" : ".", node.overload(), " (node ",
                      node.name(), ")");
}

Index RowMajorCoordinates(const std::string& linear, const std::vector<int64_t>& shape) {
  const std::vector<int64_t> strides = ContiguousStrides(shape);
  Index coordinates(shape.size(), "0");
  bool outermost = true;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::string component =
        strides[d] == 1 ? linear : absl::StrCat("(", linear, " / ", strides[d], ")");
    if (!outermost) component = absl::StrCat("(", component, " % ", shape[d], ")");
    coordinates[d] = component;
    outermost = false;
  }
  return coordinates;
}

std::string ElementOffset(const Index& index, const forge::v1::TensorSpec& spec,
                          ElementEmitter& emitter) {
  std::vector<std::string> terms;
  for (int d = 0; d < spec.shape_size(); ++d) {
    if (spec.shape(d) == 1 || spec.strides(d) == 0 || index[d] == "0") continue;
    const std::string component = emitter.BindIndex(index[d]);
    terms.push_back(spec.strides(d) == 1 ? component
                                         : absl::StrCat(component, " * ", spec.strides(d)));
  }
  return terms.empty() ? "0" : absl::StrJoin(terms, " + ");
}

// ---- ElementEmitter ----

ElementEmitter::ElementEmitter(const GroupView& view, std::string index_type, std::string prefix,
                               Resolver resolver)
    : view_(view),
      index_type_(std::move(index_type)),
      prefix_(std::move(prefix)),
      resolver_(std::move(resolver)) {}

std::string ElementEmitter::NewVariable() { return absl::StrCat(prefix_, next_variable_++); }

std::string ElementEmitter::BindIndex(const std::string& component) {
  if (IsIdentifierOrLiteral(component)) return component;
  auto it = indices_.find(component);
  if (it != indices_.end()) return it->second;
  std::string variable = NewVariable();
  AddStatement(absl::StrCat("const ", index_type_, " ", variable, " = ", component, ";"));
  indices_[component] = variable;
  return variable;
}

Index ElementEmitter::Broadcast(const Index& index, const std::vector<int64_t>& from_shape) {
  Index result(from_shape.size());
  const size_t skipped = index.size() - from_shape.size();
  for (size_t d = 0; d < from_shape.size(); ++d) {
    result[d] = from_shape[d] == 1 ? "0" : index[skipped + d];
  }
  return result;
}

absl::StatusOr<Term> ElementEmitter::Emit(absl::string_view value, const Index& index) {
  const std::string key = absl::StrCat(value, "@", Join(index));
  if (auto it = computed_.find(key); it != computed_.end()) return it->second;
  absl::StatusOr<std::optional<Term>> provided = resolver_(value, index, *this);
  if (!provided.ok()) return provided.status();
  Term term;
  if (provided->has_value()) {
    term = **provided;
  } else {
    const Node* producer = view_.Producer(value);
    if (producer == nullptr) {
      return absl::InternalError(absl::StrCat("value '", value, "' of task ",
                                              view_.task().digest(),
                                              " has no producer and was not provided"));
    }
    absl::StatusOr<Term> emitted;
    if (IsViewOp(*producer) || OpName(*producer) == "clone" || OpName(*producer) == "alias" ||
        OpName(*producer) == "detach" || OpName(*producer) == "lift_fresh_copy") {
      emitted = EmitView(*producer, index);
    } else if (IsPointwiseOp(*producer)) {
      emitted = EmitPointwise(*producer, value, index);
    } else {
      return absl::UnimplementedError(absl::StrCat(DescribeNode(*producer),
                                                   " is not an elementwise op the generator fuses"));
    }
    if (!emitted.ok()) return emitted.status();
    term = *std::move(emitted);
  }
  computed_[key] = term;
  return term;
}

absl::StatusOr<Term> ElementEmitter::EmitView(const Node& node, const Index& index) {
  const Argument* self = FindArgument(node, "self");
  if (self == nullptr || self->value_case() != Argument::kTensor) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeNode(node), " has no tensor 'self'"));
  }
  const std::string& source = self->tensor();
  const std::vector<int64_t> from = view_.Shape(source);
  const std::vector<int64_t> to = view_.Shape(node.outputs(0));
  const int64_t rank = static_cast<int64_t>(from.size());
  const absl::string_view op = OpName(node);
  auto int_argument = [&](absl::string_view name, int64_t fallback) {
    const Argument* argument = FindArgument(node, name);
    return argument != nullptr && argument->value_case() == Argument::kIntValue
               ? argument->int_value()
               : fallback;
  };
  Index mapped(from.size(), "0");
  if (op == "clone" || op == "alias" || op == "detach" || op == "lift_fresh_copy") {
    mapped = index;
  } else if (op == "permute" || op == "permute_copy") {
    const Argument* dims = FindArgument(node, "dims");
    if (dims == nullptr || dims->ints().values_size() != rank) {
      return absl::InvalidArgumentError(absl::StrCat(DescribeNode(node), ": bad dims"));
    }
    for (int64_t i = 0; i < rank; ++i) {
      mapped[NormalizeDim(dims->ints().values(i), rank)] = index[i];
    }
  } else if (op == "transpose" || op == "transpose_copy" || op == "t" || op == "t_copy") {
    mapped = index;
    if (rank == 2 || op == "transpose" || op == "transpose_copy") {
      const int64_t dim0 = NormalizeDim(int_argument("dim0", 0), rank);
      const int64_t dim1 = NormalizeDim(int_argument("dim1", 1), rank);
      std::swap(mapped[dim0], mapped[dim1]);
    }
  } else if (op == "expand" || op == "expand_copy") {
    mapped = Broadcast(index, from);
  } else if (op == "slice" || op == "slice_copy") {
    const int64_t dim = NormalizeDim(int_argument("dim", 0), rank);
    int64_t start = int_argument("start", 0);
    if (start < 0) start += from[dim];
    start = std::clamp<int64_t>(start, 0, from[dim]);
    const int64_t step = int_argument("step", 1);
    mapped = index;
    mapped[dim] = BindIndex(absl::StrCat("(", start, " + ", index[dim], " * ", step, ")"));
    if (start == 0 && step == 1) mapped[dim] = index[dim];
  } else if (op == "select" || op == "select_copy") {
    const int64_t dim = NormalizeDim(int_argument("dim", 0), rank);
    int64_t position = int_argument("index", 0);
    if (position < 0) position += from[dim];
    for (int64_t d = 0, i = 0; d < rank; ++d) {
      mapped[d] = d == dim ? absl::StrCat(position) : index[i++];
    }
  } else {
    // A reshape: dims larger than 1 pair up unchanged (squeeze, unsqueeze, size-1 reshapes), or
    // the element's row-major position is recomputed in the source's shape.
    std::vector<int> from_dims, to_dims;
    for (int d = 0; d < rank; ++d) {
      if (from[d] != 1) from_dims.push_back(d);
    }
    for (int d = 0; d < static_cast<int>(to.size()); ++d) {
      if (to[d] != 1) to_dims.push_back(d);
    }
    bool paired = from_dims.size() == to_dims.size();
    for (size_t i = 0; paired && i < from_dims.size(); ++i) {
      paired = from[from_dims[i]] == to[to_dims[i]];
    }
    if (paired) {
      for (size_t i = 0; i < from_dims.size(); ++i) mapped[from_dims[i]] = index[to_dims[i]];
    } else {
      const std::vector<int64_t> to_strides = ContiguousStrides(to);
      std::vector<std::string> terms;
      for (int d : to_dims) terms.push_back(absl::StrCat(index[d], " * ", to_strides[d]));
      const std::string linear =
          BindIndex(terms.empty() ? "0" : absl::StrCat("(", absl::StrJoin(terms, " + "), ")"));
      const std::vector<int64_t> from_strides = ContiguousStrides(from);
      for (size_t i = 0; i < from_dims.size(); ++i) {
        const int d = from_dims[i];
        std::string component = absl::StrCat("(", linear, " / ", from_strides[d], ")");
        if (i > 0) component = absl::StrCat("(", component, " % ", from[d], ")");
        if (from_strides[d] == 1) {
          component = i > 0 ? absl::StrCat("(", linear, " % ", from[d], ")") : linear;
        }
        mapped[d] = BindIndex(component);
      }
    }
  }
  return Emit(source, mapped);
}

absl::StatusOr<Term> ElementEmitter::EmitPointwise(const Node& node, absl::string_view value,
                                                   const Index& index) {
  const absl::string_view op = OpName(node);
  const DType out_dtype = view_.DType(value);
  absl::StatusOr<std::string> out_type_or = RegisterType(out_dtype);
  if (!out_type_or.ok()) {
    return absl::UnimplementedError(
        absl::StrCat(DescribeNode(node), ": ", out_type_or.status().message()));
  }
  const std::string out_type = *out_type_or;
  const bool out_double = out_type == "double";
  const bool out_floating = IsFloatingDType(out_dtype);

  // The node's argument `name` as an operand, or nullopt when it is None or left at its default.
  auto operand = [&](absl::string_view name) -> absl::StatusOr<std::optional<Operand>> {
    const Argument* argument = FindArgument(node, name);
    if (argument == nullptr) return std::optional<Operand>();
    std::string tensor_name;
    switch (argument->value_case()) {
      case Argument::kTensor: tensor_name = argument->tensor(); break;
      case Argument::kOptionalTensor:
        if (!argument->optional_tensor().has_value_name()) return std::optional<Operand>();
        tensor_name = argument->optional_tensor().value_name();
        break;
      case Argument::kFloatValue:
        return Operand{FormatDouble(argument->float_value()), forge::v1::DTYPE_FLOAT64, true,
                       argument->float_value()};
      case Argument::kIntValue:
        return Operand{absl::StrCat("(", argument->int_value(), "LL)"), forge::v1::DTYPE_INT64,
                       true, static_cast<double>(argument->int_value())};
      case Argument::kBoolValue:
        return Operand{argument->bool_value() ? "true" : "false", forge::v1::DTYPE_BOOL, true,
                       argument->bool_value() ? 1.0 : 0.0};
      case Argument::kNone: return std::optional<Operand>();
      default:
        return absl::UnimplementedError(absl::StrCat(DescribeNode(node), ": argument '", name,
                                                     "' has a form the generator does not read"));
    }
    absl::StatusOr<Term> term = Emit(tensor_name, Broadcast(index, view_.Shape(tensor_name)));
    if (!term.ok()) return term.status();
    return Operand{term->expr, term->dtype, false, 0};
  };
  auto required = [&](absl::string_view name) -> absl::StatusOr<Operand> {
    absl::StatusOr<std::optional<Operand>> found = operand(name);
    if (!found.ok()) return found.status();
    if (!found->has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(DescribeNode(node), ": argument '", name, "' is missing"));
    }
    return **found;
  };
  // `x` converted to C++ type `type`.
  auto as = [](const Operand& x, absl::string_view type) -> std::string {
    if (type == "bool") return x.dtype == forge::v1::DTYPE_BOOL ? x.expr : absl::StrCat("((", x.expr, ") != 0)");
    return absl::StrCat("((", type, ")", x.expr, ")");
  };
  auto in = [&](const Operand& x) { return as(x, out_type); };
  // Name of the float or double variant of a libm function.
  auto fn = [&](absl::string_view name) {
    return out_double ? std::string(name) : absl::StrCat(name, "f");
  };
  // The compute type of comparisons: the promoted type of the operands (ATen's result_type).
  auto comparison_type = [&](const std::vector<Operand>& operands) -> std::string {
    bool any_float_tensor = false, any_double_tensor = false, any_float_literal = false;
    for (const Operand& x : operands) {
      if (!x.literal && IsFloatingDType(x.dtype)) {
        any_float_tensor = true;
        any_double_tensor |= x.dtype == forge::v1::DTYPE_FLOAT64;
      }
      any_float_literal |= x.literal && x.dtype == forge::v1::DTYPE_FLOAT64;
    }
    if (any_double_tensor) return "double";
    if (any_float_tensor || any_float_literal) return "float";
    return "long long";
  };
  auto unary_operand = [&]() { return required("self"); };

  std::string expr;
  auto unary_fn = [&](absl::string_view libm) -> absl::Status {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    expr = absl::StrCat(fn(libm), "(", in(*x), ")");
    return absl::OkStatus();
  };
  static const std::set<std::string, std::less<>> kLibmUnary = {
      "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos",  "cosh",  "erf",  "erfc",
      "exp",  "exp2",  "expm1", "log",  "log10", "log1p", "log2", "rsqrt", "sin",  "sinh",
      "sqrt", "tan",   "tanh"};
  static const std::set<std::string, std::less<>> kComparisons = {"eq", "ne", "lt", "le", "gt", "ge"};

  absl::Status status;
  if (kLibmUnary.contains(op)) {
    status = unary_fn(op);
  } else if (op == "floor" || op == "ceil" || op == "trunc" || op == "round") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    expr = out_floating ? absl::StrCat(fn(op == "round" ? "rint" : op), "(", in(*x), ")") : in(*x);
  } else if (op == "abs") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    expr = out_floating ? absl::StrCat(fn("fabs"), "(", in(*x), ")")
                        : absl::StrCat("(", in(*x), " < 0 ? -", in(*x), " : ", in(*x), ")");
  } else if (op == "neg") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    expr = absl::StrCat("(-", in(*x), ")");
  } else if (op == "reciprocal") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    expr = absl::StrCat("(((", out_type, ")1) / ", in(*x), ")");
  } else if (op == "square") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    expr = absl::StrCat("(", in(*x), " * ", in(*x), ")");
  } else if (op == "sign") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    expr = absl::StrCat("((", out_type, ")((", in(*x), " > 0) - (", in(*x), " < 0)))");
  } else if (op == "sigmoid") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    expr = absl::StrCat("(((", out_type, ")1) / (((", out_type, ")1) + ", fn("exp"), "(-", in(*x),
                        ")))");
  } else if (op == "silu") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    expr = absl::StrCat("(", in(*x), " / (((", out_type, ")1) + ", fn("exp"), "(-", in(*x), ")))");
  } else if (op == "mish") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    expr = absl::StrCat("(", in(*x), " * ", fn("tanh"), "(", fn("log1p"), "(", fn("exp"), "(",
                        in(*x), "))))");
  } else if (op == "relu") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    expr = absl::StrCat("forge_max<", out_type, ">(", in(*x), ", (", out_type, ")0)");
  } else if (op == "gelu") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    const Argument* approximate = FindArgument(node, "approximate");
    const std::string mode = approximate == nullptr ? "none" : approximate->string_value();
    const std::string v = in(*x);
    const std::string c = absl::StrCat("(", out_type, ")");
    if (mode == "tanh") {
      expr = absl::StrCat("(", c, "0.5 * ", v, " * (", c, "1 + ", fn("tanh"), "(", c,
                          "0.79788456080286535588 * (", v, " + ", c, "0.044715 * ", v, " * ", v,
                          " * ", v, "))))");
    } else if (mode == "none") {
      // A float16 or bfloat16 GELU is computed in float and rounded to its type (as ATen does):
      // the polynomial need only be accurate well below that rounding.
      const bool sixteen_bit =
          out_dtype == forge::v1::DTYPE_FLOAT16 || out_dtype == forge::v1::DTYPE_BFLOAT16;
      expr = absl::StrCat(sixteen_bit ? "forge_gelu_erf_16bit(" : "forge_gelu_erf(", v, ")");
    } else {
      return absl::UnimplementedError(
          absl::StrCat(DescribeNode(node), ": approximate='", mode, "' is not 'none' or 'tanh'"));
    }
  } else if (op == "leaky_relu") {
    absl::StatusOr<Operand> x = unary_operand();
    absl::StatusOr<std::optional<Operand>> slope = operand("negative_slope");
    if (!x.ok()) return x.status();
    if (!slope.ok()) return slope.status();
    const std::string s = slope->has_value() ? in(**slope) : absl::StrCat("((", out_type, ")0.01)");
    expr = absl::StrCat("(", in(*x), " > 0 ? ", in(*x), " : ", in(*x), " * ", s, ")");
  } else if (op == "elu") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    std::string parameters[3];
    const char* names[3] = {"alpha", "scale", "input_scale"};
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<std::optional<Operand>> p = operand(names[i]);
      if (!p.ok()) return p.status();
      parameters[i] = p->has_value() ? in(**p) : absl::StrCat("((", out_type, ")1)");
    }
    const std::string v = in(*x);
    expr = absl::StrCat("(", v, " > 0 ? ", v, " * ", parameters[1], " : (", fn("expm1"), "(", v,
                        " * ", parameters[2], ") * ", parameters[0], " * ", parameters[1], "))");
  } else if (op == "softplus") {
    absl::StatusOr<Operand> x = unary_operand();
    absl::StatusOr<std::optional<Operand>> beta = operand("beta");
    absl::StatusOr<std::optional<Operand>> threshold = operand("threshold");
    if (!x.ok()) return x.status();
    if (!beta.ok()) return beta.status();
    if (!threshold.ok()) return threshold.status();
    const std::string b = beta->has_value() ? in(**beta) : absl::StrCat("((", out_type, ")1)");
    const std::string t =
        threshold->has_value() ? in(**threshold) : absl::StrCat("((", out_type, ")20)");
    const std::string v = in(*x);
    expr = absl::StrCat("(", v, " * ", b, " > ", t, " ? ", v, " : ", fn("log1p"), "(", fn("exp"),
                        "(", v, " * ", b, ")) / ", b, ")");
  } else if (op == "hardswish" || op == "hardsigmoid") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    const std::string v = in(*x);
    const std::string gate = absl::StrCat("(forge_min<", out_type, ">(forge_max<", out_type, ">(", v,
                                          " + (", out_type, ")3, (", out_type, ")0), (", out_type,
                                          ")6) / (", out_type, ")6)");
    expr = op == "hardswish" ? absl::StrCat("(", v, " * ", gate, ")") : gate;
  } else if (op == "hardtanh" || op == "relu6" || op == "clamp" || op == "clamp_min" ||
             op == "clamp_max") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    std::optional<Operand> low, high;
    if (op == "hardtanh" || op == "relu6") {
      const bool relu6 = op == "relu6";
      absl::StatusOr<std::optional<Operand>> l = operand("min_val");
      absl::StatusOr<std::optional<Operand>> h = operand("max_val");
      if (!l.ok()) return l.status();
      if (!h.ok()) return h.status();
      low = l->has_value() ? **l : Operand{relu6 ? "(0.0)" : "(-1.0)", forge::v1::DTYPE_FLOAT64, true, relu6 ? 0.0 : -1.0};
      high = h->has_value() ? **h : Operand{relu6 ? "(6.0)" : "(1.0)", forge::v1::DTYPE_FLOAT64, true, relu6 ? 6.0 : 1.0};
    } else {
      // clamp_min reads only "min" and clamp_max only "max"; clamp reads either or both.
      if (op != "clamp_max") {
        absl::StatusOr<std::optional<Operand>> l = operand("min");
        if (!l.ok()) return l.status();
        low = *l;
      }
      if (op != "clamp_min") {
        absl::StatusOr<std::optional<Operand>> h = operand("max");
        if (!h.ok()) return h.status();
        high = *h;
      }
    }
    expr = in(*x);
    if (low.has_value()) expr = absl::StrCat("forge_max<", out_type, ">(", expr, ", ", in(*low), ")");
    if (high.has_value()) {
      expr = absl::StrCat("forge_min<", out_type, ">(", expr, ", ", in(*high), ")");
    }
  } else if (op == "add" || op == "sub" || op == "rsub") {
    absl::StatusOr<Operand> a = required("self");
    absl::StatusOr<Operand> b = required("other");
    absl::StatusOr<std::optional<Operand>> alpha = operand("alpha");
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    if (!alpha.ok()) return alpha.status();
    const std::string scaled_self = in(op == "rsub" ? *b : *a);
    std::string scaled_other = in(op == "rsub" ? *a : *b);
    if (alpha->has_value()) scaled_other = absl::StrCat("(", in(**alpha), " * ", scaled_other, ")");
    if (out_dtype == forge::v1::DTYPE_BOOL) {
      expr = absl::StrCat("(", scaled_self, " || ", scaled_other, ")");
    } else {
      expr = absl::StrCat("(", scaled_self, op == "add" ? " + " : " - ", scaled_other, ")");
    }
  } else if (op == "mul") {
    absl::StatusOr<Operand> a = required("self");
    absl::StatusOr<Operand> b = required("other");
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    expr = out_dtype == forge::v1::DTYPE_BOOL ? absl::StrCat("(", in(*a), " && ", in(*b), ")")
                                              : absl::StrCat("(", in(*a), " * ", in(*b), ")");
  } else if (op == "div" || op == "floor_divide") {
    absl::StatusOr<Operand> a = required("self");
    absl::StatusOr<Operand> b = required("other");
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    const Argument* mode_argument = FindArgument(node, "rounding_mode");
    std::string mode = op == "floor_divide" ? "floor" : "";
    if (mode_argument != nullptr && mode_argument->value_case() == Argument::kStringValue) {
      mode = mode_argument->string_value();
    }
    if (mode.empty()) {
      expr = absl::StrCat("(", in(*a), " / ", in(*b), ")");
    } else if (mode == "trunc") {
      expr = out_floating ? absl::StrCat(fn("trunc"), "(", in(*a), " / ", in(*b), ")")
                          : absl::StrCat("(", in(*a), " / ", in(*b), ")");
    } else if (mode == "floor") {
      expr = absl::StrCat("forge_floor_divide(", in(*a), ", ", in(*b), ")");
    } else {
      return absl::UnimplementedError(
          absl::StrCat(DescribeNode(node), ": rounding_mode='", mode, "' is not known"));
    }
  } else if (op == "remainder" || op == "fmod") {
    absl::StatusOr<Operand> a = required("self");
    absl::StatusOr<Operand> b = required("other");
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    if (op == "remainder") {
      expr = absl::StrCat("forge_remainder(", in(*a), ", ", in(*b), ")");
    } else {
      expr = out_floating ? absl::StrCat(fn("fmod"), "(", in(*a), ", ", in(*b), ")")
                          : absl::StrCat("(", in(*a), " % ", in(*b), ")");
    }
  } else if (op == "atan2") {
    absl::StatusOr<Operand> a = required("self");
    absl::StatusOr<Operand> b = required("other");
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    expr = absl::StrCat(fn("atan2"), "(", in(*a), ", ", in(*b), ")");
  } else if (op == "maximum" || op == "minimum") {
    absl::StatusOr<Operand> a = required("self");
    absl::StatusOr<Operand> b = required("other");
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    expr = absl::StrCat(op == "maximum" ? "forge_max<" : "forge_min<", out_type, ">(", in(*a),
                        ", ", in(*b), ")");
  } else if (op == "pow") {
    absl::StatusOr<Operand> base = required("self");
    absl::StatusOr<Operand> exponent = required("exponent");
    if (!base.ok()) return base.status();
    if (!exponent.ok()) return exponent.status();
    const std::string b = in(*base);
    if (exponent->literal && exponent->literal_value == 2) {
      expr = absl::StrCat("(", b, " * ", b, ")");
    } else if (exponent->literal && exponent->literal_value == 1) {
      expr = b;
    } else if (exponent->literal && exponent->literal_value == 0.5 && out_floating) {
      expr = absl::StrCat(fn("sqrt"), "(", b, ")");
    } else if (out_floating) {
      expr = absl::StrCat(fn("pow"), "(", b, ", ", in(*exponent), ")");
    } else {
      expr = absl::StrCat("forge_ipow<", out_type, ">(", b, ", ", in(*exponent), ")");
    }
  } else if (kComparisons.contains(op)) {
    absl::StatusOr<Operand> a = required("self");
    absl::StatusOr<Operand> b = required("other");
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    static const std::map<std::string, std::string, std::less<>> kSymbols = {
        {"eq", "=="}, {"ne", "!="}, {"lt", "<"}, {"le", "<="}, {"gt", ">"}, {"ge", ">="}};
    const std::string type = comparison_type({*a, *b});
    expr = absl::StrCat("(", as(*a, type), " ", kSymbols.find(op)->second, " ", as(*b, type), ")");
  } else if (op == "isnan") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    expr = absl::StrCat("(", x->expr, " != ", x->expr, ")");
  } else if (op == "logical_not") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    expr = as(Operand{absl::StrCat("(!", as(*x, "bool"), ")"), forge::v1::DTYPE_BOOL}, out_type);
  } else if (op == "logical_and" || op == "logical_or" || op == "logical_xor") {
    absl::StatusOr<Operand> a = required("self");
    absl::StatusOr<Operand> b = required("other");
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    const char* symbol = op == "logical_and" ? " && " : op == "logical_or" ? " || " : " != ";
    expr = as(Operand{absl::StrCat("(", as(*a, "bool"), symbol, as(*b, "bool"), ")"),
                      forge::v1::DTYPE_BOOL},
              out_type);
  } else if (op == "where") {
    absl::StatusOr<Operand> condition = required("condition");
    absl::StatusOr<Operand> a = required("self");
    absl::StatusOr<Operand> b = required("other");
    if (!condition.ok()) return condition.status();
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    expr = absl::StrCat("(", as(*condition, "bool"), " ? ", in(*a), " : ", in(*b), ")");
  } else if (op == "masked_fill") {
    absl::StatusOr<Operand> x = required("self");
    absl::StatusOr<Operand> mask = required("mask");
    absl::StatusOr<Operand> fill = required("value");
    if (!x.ok()) return x.status();
    if (!mask.ok()) return mask.status();
    if (!fill.ok()) return fill.status();
    expr = absl::StrCat("(", as(*mask, "bool"), " ? ", in(*fill), " : ", in(*x), ")");
  } else if (op == "addcmul" || op == "addcdiv") {
    absl::StatusOr<Operand> x = required("self");
    absl::StatusOr<Operand> t1 = required("tensor1");
    absl::StatusOr<Operand> t2 = required("tensor2");
    absl::StatusOr<std::optional<Operand>> scale = operand("value");
    if (!x.ok()) return x.status();
    if (!t1.ok()) return t1.status();
    if (!t2.ok()) return t2.status();
    if (!scale.ok()) return scale.status();
    const std::string s = scale->has_value() ? in(**scale) : absl::StrCat("((", out_type, ")1)");
    expr = absl::StrCat("(", in(*x), " + ", s, " * (", in(*t1), op == "addcmul" ? " * " : " / ",
                        in(*t2), "))");
  } else if (op == "_to_copy") {
    absl::StatusOr<Operand> x = unary_operand();
    if (!x.ok()) return x.status();
    const bool from_double = x->dtype == forge::v1::DTYPE_FLOAT64;
    // Rounds to the narrow type and keeps the rounded value in float. double -> bfloat16 goes
    // through float (double rounding; off by one bf16 ulp in rare ties).
    if (out_dtype == forge::v1::DTYPE_FLOAT16) {
      expr = from_double
                 ? absl::StrCat("forge_half_to_float(forge_double_to_half(", x->expr, "))")
                 : absl::StrCat("forge_half_to_float(forge_float_to_half((float)", x->expr, "))");
    } else if (out_dtype == forge::v1::DTYPE_BFLOAT16) {
      expr = absl::StrCat("forge_bfloat16_to_float(forge_float_to_bfloat16((float)", x->expr,
                          "))");
    } else {
      expr = in(*x);
    }
  } else {
    return absl::UnimplementedError(
        absl::StrCat(DescribeNode(node), " is not an elementwise op the generator knows"));
  }
  if (!status.ok()) return status;
  const std::string variable = NewVariable();
  AddStatement(absl::StrCat("const ", out_type, " ", variable, " = ", expr, ";"));
  return Term{variable, out_dtype};
}

}  // namespace forge::codegen
