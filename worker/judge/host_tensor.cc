#include "worker/judge/host_tensor.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace forge::judge {
namespace {

using forge::v1::DType;

// A binary floating-point format narrower than float32.
struct SmallFloat {
  int exponent_bits;
  int mantissa_bits;
  bool has_infinity;  // float8_e4m3fn has none: its all-ones pattern is NaN and overflow is NaN
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  int max_exponent() const {
    return (1 << exponent_bits) - (has_infinity ? 2 : 1) - bias();
  }
  double max_finite() const {
    // Without infinities the top exponent keeps every mantissa but all-ones (NaN).
    double top_mantissa = has_infinity ? 2.0 - std::ldexp(1.0, -mantissa_bits)
                                       : 2.0 - std::ldexp(2.0, -mantissa_bits);
    return std::ldexp(top_mantissa, max_exponent());
  }
};

constexpr SmallFloat kHalf{5, 10, true};
constexpr SmallFloat kBfloat16{8, 7, true};
constexpr SmallFloat kFloat8E4M3{4, 3, false};
constexpr SmallFloat kFloat8E5M2{5, 2, true};

// Round to nearest, ties to even (the default floating-point environment's nearbyint).
double Round(const SmallFloat& format, double value) {
  if (std::isnan(value) || value == 0 || std::isinf(value)) {
    if (std::isinf(value) && !format.has_infinity) return std::numeric_limits<double>::quiet_NaN();
    return value;
  }
  int exponent = 0;
  std::frexp(value, &exponent);  // value = m * 2^exponent, 0.5 <= |m| < 1
  int unbiased = std::max(exponent - 1, 1 - format.bias());
  double quantum = std::ldexp(1.0, unbiased - format.mantissa_bits);
  double rounded = std::nearbyint(value / quantum) * quantum;
  if (std::fabs(rounded) > format.max_finite()) {
    return format.has_infinity ? std::copysign(std::numeric_limits<double>::infinity(), value)
                               : std::numeric_limits<double>::quiet_NaN();
  }
  return rounded;
}

// Encode's common case: a value that is a normal number of a format with infinities, rounded
// from the double's own bits (nearest, ties to even: what Round gives). nullopt otherwise.
std::optional<uint32_t> EncodeNormal(const SmallFloat& format, double value) {
  if (!format.has_infinity) return std::nullopt;
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  const int biased = static_cast<int>((bits >> 52) & 0x7FF);
  int exponent = biased - 1023;
  if (biased == 0 || biased == 0x7FF || exponent < 1 - format.bias() ||
      exponent > format.max_exponent()) {
    return std::nullopt;
  }
  const int dropped = 52 - format.mantissa_bits;
  const uint64_t significand = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  uint64_t kept = significand >> dropped;
  const uint64_t rest = significand & ((uint64_t{1} << dropped) - 1);
  const uint64_t half = uint64_t{1} << (dropped - 1);
  if (rest > half || (rest == half && (kept & 1) != 0)) ++kept;
  if ((kept >> (format.mantissa_bits + 1)) != 0) {  // rounded up to the next power of two
    kept >>= 1;
    ++exponent;
  }
  if (exponent > format.max_exponent()) return std::nullopt;  // overflow
  const uint32_t sign = (bits >> 63) != 0 ? 1u << (format.exponent_bits + format.mantissa_bits) : 0;
  return sign | (static_cast<uint32_t>(exponent + format.bias()) << format.mantissa_bits) |
         static_cast<uint32_t>(kept & ((uint64_t{1} << format.mantissa_bits) - 1));
}

uint32_t Encode(const SmallFloat& format, double value) {
  if (std::optional<uint32_t> normal = EncodeNormal(format, value)) return *normal;
  const uint32_t exponent_all_ones = (1u << format.exponent_bits) - 1;
  const uint32_t sign = std::signbit(value) ? 1u << (format.exponent_bits + format.mantissa_bits) : 0;
  double rounded = Round(format, value);
  if (std::isnan(rounded)) {
    // A quiet NaN: all-ones exponent and the top mantissa bit (all ones without infinities).
    uint32_t mantissa = format.has_infinity ? 1u << (format.mantissa_bits - 1)
                                            : (1u << format.mantissa_bits) - 1;
    return (exponent_all_ones << format.mantissa_bits) | mantissa;
  }
  if (std::isinf(rounded)) return sign | (exponent_all_ones << format.mantissa_bits);
  double magnitude = std::fabs(rounded);
  if (magnitude == 0) return sign;
  int exponent = 0;
  std::frexp(magnitude, &exponent);
  int unbiased = exponent - 1;
  if (unbiased < 1 - format.bias()) {  // subnormal
    auto mantissa = static_cast<uint32_t>(
        std::ldexp(magnitude, format.bias() - 1 + format.mantissa_bits));
    return sign | mantissa;
  }
  auto mantissa = static_cast<uint32_t>(
      std::ldexp(std::ldexp(magnitude, -unbiased) - 1.0, format.mantissa_bits));
  return sign | (static_cast<uint32_t>(unbiased + format.bias()) << format.mantissa_bits) | mantissa;
}

double Decode(const SmallFloat& format, uint32_t bits) {
  const uint32_t exponent_all_ones = (1u << format.exponent_bits) - 1;
  const uint32_t mantissa_mask = (1u << format.mantissa_bits) - 1;
  bool negative = (bits >> (format.exponent_bits + format.mantissa_bits)) & 1u;
  uint32_t exponent = (bits >> format.mantissa_bits) & exponent_all_ones;
  uint32_t mantissa = bits & mantissa_mask;
  double magnitude;
  if (exponent == exponent_all_ones && format.has_infinity) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == exponent_all_ones && mantissa == mantissa_mask) {
    magnitude = std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - format.bias() - format.mantissa_bits);
  } else {
    magnitude = std::ldexp(1.0 + std::ldexp(static_cast<double>(mantissa), -format.mantissa_bits),
                           static_cast<int>(exponent) - format.bias());
  }
  return negative ? -magnitude : magnitude;
}

template <typename T>
T Load(const std::byte* data) {
  T value;
  std::memcpy(&value, data, sizeof(T));
  return value;
}

template <typename T>
void Store(T value, std::byte* data) {
  std::memcpy(data, &value, sizeof(T));
}

template <typename Int>
Int SaturatingCast(double value) {
  if (std::isnan(value)) return 0;
  double truncated = std::trunc(value);
  if (truncated <= static_cast<double>(std::numeric_limits<Int>::min())) {
    return std::numeric_limits<Int>::min();
  }
  if (truncated >= static_cast<double>(std::numeric_limits<Int>::max())) {
    return std::numeric_limits<Int>::max();
  }
  return static_cast<Int>(truncated);
}

}  // namespace

absl::StatusOr<int> ElementBytes(DType dtype) {
  const int bytes = DTypeBytes(dtype);
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("no element size for dtype ", forge::v1::DType_Name(dtype)));
  }
  return bytes;
}

int64_t ElementCount(const forge::v1::TensorSpec& spec) {
  int64_t count = 1;
  for (int64_t size : spec.shape()) count *= size;
  return count;
}

std::vector<int64_t> EffectiveStrides(const forge::v1::TensorSpec& spec) {
  if (spec.strides_size() == spec.shape_size()) {
    return {spec.strides().begin(), spec.strides().end()};
  }
  std::vector<int64_t> strides(spec.shape_size());
  int64_t stride = 1;
  for (int i = spec.shape_size() - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= spec.shape(i);
  }
  return strides;
}

int64_t StorageElementCount(const forge::v1::TensorSpec& spec) {
  if (ElementCount(spec) == 0) return 0;
  std::vector<int64_t> strides = EffectiveStrides(spec);
  int64_t last = 0;
  for (int i = 0; i < spec.shape_size(); ++i) last += (spec.shape(i) - 1) * strides[i];
  return last + 1;
}

int64_t StorageOffsetOf(const forge::v1::TensorSpec& spec, int64_t index) {
  if (spec.strides_size() != spec.shape_size()) return index;  // row-major
  int64_t offset = 0;
  for (int i = spec.shape_size() - 1; i >= 0; --i) {
    offset += (index % spec.shape(i)) * spec.strides(i);
    index /= spec.shape(i);
  }
  return offset;
}

std::vector<int64_t> Unravel(absl::Span<const int64_t> shape, int64_t index) {
  std::vector<int64_t> position(shape.size());
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    position[i] = shape[i] == 0 ? 0 : index % shape[i];
    if (shape[i] != 0) index /= shape[i];
  }
  return position;
}

std::string FormatIndex(absl::Span<const int64_t> index) {
  return absl::StrCat("[", absl::StrJoin(index, ", "), "]");
}

std::string DescribeSpec(const forge::v1::TensorSpec& spec) {
  return absl::StrCat(DTypeName(spec.dtype()), "[", absl::StrJoin(spec.shape(), ", "), "]");
}

double DecodeElement(DType dtype, const std::byte* data) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT64: return Load<double>(data);
    case forge::v1::DTYPE_FLOAT32: return Load<float>(data);
    case forge::v1::DTYPE_FLOAT16: return Decode(kHalf, Load<uint16_t>(data));
    case forge::v1::DTYPE_BFLOAT16: return Decode(kBfloat16, Load<uint16_t>(data));
    case forge::v1::DTYPE_FLOAT8_E4M3FN: return Decode(kFloat8E4M3, Load<uint8_t>(data));
    case forge::v1::DTYPE_FLOAT8_E5M2: return Decode(kFloat8E5M2, Load<uint8_t>(data));
    case forge::v1::DTYPE_INT8: return Load<int8_t>(data);
    case forge::v1::DTYPE_INT16: return Load<int16_t>(data);
    case forge::v1::DTYPE_INT32: return Load<int32_t>(data);
    case forge::v1::DTYPE_INT64: return static_cast<double>(Load<int64_t>(data));
    case forge::v1::DTYPE_UINT8: return Load<uint8_t>(data);
    case forge::v1::DTYPE_BOOL: return Load<uint8_t>(data) != 0 ? 1.0 : 0.0;
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

void EncodeElement(DType dtype, double value, std::byte* data) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT64: Store<double>(value, data); return;
    case forge::v1::DTYPE_FLOAT32: Store<float>(static_cast<float>(value), data); return;
    case forge::v1::DTYPE_FLOAT16: Store<uint16_t>(Encode(kHalf, value), data); return;
    case forge::v1::DTYPE_BFLOAT16: Store<uint16_t>(Encode(kBfloat16, value), data); return;
    case forge::v1::DTYPE_FLOAT8_E4M3FN: Store<uint8_t>(Encode(kFloat8E4M3, value), data); return;
    case forge::v1::DTYPE_FLOAT8_E5M2: Store<uint8_t>(Encode(kFloat8E5M2, value), data); return;
    case forge::v1::DTYPE_INT8: Store(SaturatingCast<int8_t>(value), data); return;
    case forge::v1::DTYPE_INT16: Store(SaturatingCast<int16_t>(value), data); return;
    case forge::v1::DTYPE_INT32: Store(SaturatingCast<int32_t>(value), data); return;
    case forge::v1::DTYPE_INT64: Store(SaturatingCast<int64_t>(value), data); return;
    case forge::v1::DTYPE_UINT8: Store(SaturatingCast<uint8_t>(value), data); return;
    case forge::v1::DTYPE_BOOL: Store<uint8_t>(value != 0 ? 1 : 0, data); return;
    default: return;
  }
}

double RoundToDType(DType dtype, double value) {
  std::byte buffer[8] = {};
  EncodeElement(dtype, value, buffer);
  return DecodeElement(dtype, buffer);
}

uint16_t FloatToHalfBits(float value) { return static_cast<uint16_t>(Encode(kHalf, value)); }
float HalfBitsToFloat(uint16_t bits) { return static_cast<float>(Decode(kHalf, bits)); }
uint16_t FloatToBfloat16Bits(float value) {
  return static_cast<uint16_t>(Encode(kBfloat16, value));
}
float Bfloat16BitsToFloat(uint16_t bits) { return static_cast<float>(Decode(kBfloat16, bits)); }

absl::StatusOr<size_t> StorageBytes(const forge::v1::TensorSpec& spec) {
  absl::StatusOr<int> element_bytes = ElementBytes(spec.dtype());
  if (!element_bytes.ok()) return element_bytes.status();
  for (int64_t size : spec.shape()) {
    if (size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("negative size in tensor shape ", DescribeSpec(spec)));
    }
  }
  return static_cast<size_t>(StorageElementCount(spec)) * *element_bytes;
}

int64_t TaskStorageBytes(const forge::v1::KernelTask& task) {
  int64_t bytes = 0;
  for (const auto* specs : {&task.inputs(), &task.outputs()}) {
    for (const forge::v1::TensorSpec& spec : *specs) {
      bytes += static_cast<int64_t>(StorageBytes(spec).value_or(0));
    }
  }
  return bytes;
}

absl::StatusOr<HostTensor> HostTensor::Allocate(const forge::v1::TensorSpec& spec) {
  absl::StatusOr<size_t> bytes = StorageBytes(spec);
  if (!bytes.ok()) return bytes.status();
  HostTensor tensor;
  tensor.spec = spec;
  tensor.storage.resize(*bytes);
  return tensor;
}

double HostTensor::Get(int64_t index) const {
  int element_bytes = *ElementBytes(spec.dtype());
  return DecodeElement(spec.dtype(), storage.data() + StorageOffsetOf(spec, index) * element_bytes);
}

void HostTensor::Set(int64_t index, double value) {
  int element_bytes = *ElementBytes(spec.dtype());
  EncodeElement(spec.dtype(), value, storage.data() + StorageOffsetOf(spec, index) * element_bytes);
}

std::vector<double> HostTensor::ToDoubles() const {
  std::vector<double> values(element_count());
  for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i) values[i] = Get(i);
  return values;
}

}  // namespace forge::judge
