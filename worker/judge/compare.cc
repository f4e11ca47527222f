#include "worker/judge/compare.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace forge::judge {
namespace {

using forge::v1::DType;

double Norm(absl::Span<const double> values) {
  double sum = 0;
  for (double value : values) sum += value * value;
  return std::sqrt(sum);
}

double Mean(absl::Span<const double> values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double value : values) sum += value;
  return sum / static_cast<double>(values.size());
}

double Bound(double reference, const Tolerances& tolerances) {
  return tolerances.atol + tolerances.rtol * std::fabs(reference);
}

bool WithinTolerance(double candidate, double reference, const Tolerances& tolerances) {
  return std::fabs(candidate - reference) <= Bound(reference, tolerances);
}

// Twice eager's own error at one element, the allowance a candidate gets on top of the tolerance.
double EagerAllowance(absl::Span<const double> native_reference, int64_t index, double reference) {
  if (native_reference.empty() || !std::isfinite(native_reference[index])) return 0;
  return 2 * std::fabs(native_reference[index] - reference);
}

}  // namespace

Tolerances DefaultTolerances(DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT64:
      return {1e-7, 1e-7, 1e-7};
    case forge::v1::DTYPE_FLOAT32:
      return {1e-4, 1e-4, 1e-4};
    case forge::v1::DTYPE_FLOAT16:
    case forge::v1::DTYPE_BFLOAT16:
      return {1e-2, 1e-2, 1e-2};
    case forge::v1::DTYPE_FLOAT8_E4M3FN:
    case forge::v1::DTYPE_FLOAT8_E5M2:
      return {1e-1, 1e-1, 1e-1};
    default:
      return {0, 0, 0};
  }
}

Poison PoisonFor(DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT64:
      return {2, 0x7FF8};  // 0x7FF87FF87FF87FF8: a quiet NaN
    case forge::v1::DTYPE_FLOAT32:
      return {4, 0x7FC00000};
    case forge::v1::DTYPE_FLOAT16:
      return {2, 0x7E00};
    case forge::v1::DTYPE_BFLOAT16:
      return {2, 0x7FC0};
    case forge::v1::DTYPE_FLOAT8_E4M3FN:
    case forge::v1::DTYPE_FLOAT8_E5M2:
      return {1, 0x7F};
    default:
      return {1, 0xA5};
  }
}

bool IsPoison(DType dtype, const std::byte* element) {
  absl::StatusOr<int> element_bytes = ElementBytes(dtype);
  if (!element_bytes.ok()) return false;
  Poison poison = PoisonFor(dtype);
  for (int offset = 0; offset < *element_bytes; offset += poison.word_bytes) {
    uint32_t word = 0;
    // Little-endian: the word's low bytes come first, as cuMemsetD16/D32 store them.
    std::memcpy(&word, element + offset, poison.word_bytes);
    if (word != poison.word) return false;
  }
  return true;
}

double RelativeNormError(absl::Span<const double> values, absl::Span<const double> reference) {
  double error_squared = 0;
  double reference_squared = 0;
  for (size_t i = 0; i < values.size() && i < reference.size(); ++i) {
    if (!std::isfinite(values[i]) || !std::isfinite(reference[i])) continue;
    error_squared += (values[i] - reference[i]) * (values[i] - reference[i]);
    reference_squared += reference[i] * reference[i];
  }
  return reference_squared > 0 ? std::sqrt(error_squared / reference_squared) : 0;
}

void EagerError::Add(absl::Span<const double> native_reference,
                     absl::Span<const double> reference) {
  for (size_t i = 0; i < native_reference.size() && i < reference.size(); ++i) {
    if (std::isfinite(native_reference[i]) && std::isfinite(reference[i])) {
      max_abs = std::max(max_abs, std::fabs(native_reference[i] - reference[i]));
    }
  }
  rel_norm = std::max(rel_norm, RelativeNormError(native_reference, reference));
}

std::string EagerError::Note() const {
  if (max_abs == 0) return "";
  return absl::StrFormat(
      "tolerance widened by eager's own error (ATen in the task's dtypes vs float64): max %.3g, "
      "relative norm %.3g",
      max_abs, rel_norm);
}

OutputComparison CompareOutput(const HostTensor& candidate, absl::Span<const double> reference,
                               const Tolerances& tolerances,
                               absl::Span<const double> native_reference) {
  OutputComparison result;
  const DType dtype = candidate.spec.dtype();
  const int element_bytes = *ElementBytes(dtype);
  const auto& shape = candidate.spec.shape();
  const int64_t count = candidate.element_count();
  result.element_count = count;
  if (static_cast<int64_t>(reference.size()) != count) {
    result.passed = false;
    result.failure = absl::StrCat("reference has ", reference.size(), " elements, the output ",
                                  DescribeSpec(candidate.spec), " has ", count);
    return result;
  }
  if (!native_reference.empty() && native_reference.size() != reference.size()) {
    result.passed = false;
    result.failure = absl::StrCat("native reference has ", native_reference.size(),
                                  " elements, the float64 reference ", reference.size());
    return result;
  }
  const double rel_norm_bound =
      native_reference.empty()
          ? tolerances.rel_norm
          : std::max(tolerances.rel_norm, 2 * RelativeNormError(native_reference, reference));

  std::optional<int64_t> first_unwritten;
  std::optional<int64_t> first_mismatch;
  double error_norm_squared = 0;
  double reference_norm_squared = 0;
  for (int64_t i = 0; i < count; ++i) {
    const std::byte* element =
        candidate.storage.data() + StorageOffsetOf(candidate.spec, i) * element_bytes;
    const double want = reference[i];
    const double got = DecodeElement(dtype, element);
    if (std::isnan(want)) {
      ++result.nan_reference;
      if (!std::isnan(got)) {
        ++result.mismatches;
        if (!first_mismatch) first_mismatch = i;
      }
      continue;
    }
    if (IsPoison(dtype, element)) {
      ++result.unwritten;
      if (!first_unwritten) first_unwritten = i;
      continue;
    }
    if (std::isinf(want) || std::isinf(got) || std::isnan(got)) {
      if (got != want) {
        ++result.mismatches;
        if (!first_mismatch) first_mismatch = i;
        result.max_abs_error = std::numeric_limits<double>::infinity();
      }
      continue;
    }
    const double difference = std::fabs(got - want);
    result.max_abs_error = std::max(result.max_abs_error, difference);
    if (want != 0) result.max_rel_error = std::max(result.max_rel_error, difference / std::fabs(want));
    error_norm_squared += difference * difference;
    reference_norm_squared += want * want;
    if (difference > Bound(want, tolerances) + EagerAllowance(native_reference, i, want)) {
      ++result.mismatches;
      if (!first_mismatch) first_mismatch = i;
    }
  }
  if (reference_norm_squared > 0) {
    result.rel_norm_error = std::sqrt(error_norm_squared / reference_norm_squared);
  }

  auto where = [&](int64_t index) {
    return absl::StrCat("element ", index, " ", FormatIndex(Unravel(shape, index)));
  };
  if (first_unwritten) {
    result.passed = false;
    result.failed_index = *first_unwritten;
    result.failure = absl::StrCat(where(*first_unwritten),
                                  " never written (still holds the NaN poison); ", result.unwritten,
                                  " of ", count, " elements unwritten");
  } else if (first_mismatch) {
    const int64_t i = *first_mismatch;
    const double got = candidate.Get(i);
    const double want = reference[i];
    const std::string widening =
        native_reference.empty()
            ? ""
            : absl::StrFormat(" + 2 * eager's error %.3g (native %.9g)",
                              std::fabs(native_reference[i] - want), native_reference[i]);
    result.passed = false;
    result.failed_index = i;
    result.failure = absl::StrFormat(
        "%s: candidate %.9g, reference %.9g, |difference| %.3g exceeds atol %g + rtol %g * "
        "|reference|%s; %d of %d elements outside the tolerance",
        where(i), got, want, std::fabs(got - want), tolerances.atol, tolerances.rtol, widening,
        result.mismatches, count);
  } else if (result.rel_norm_error > rel_norm_bound) {
    result.passed = false;
    result.failure = absl::StrFormat(
        "relative-norm error ||candidate - reference|| / ||reference|| = %.3g exceeds %g, though "
        "every element is within atol %g + rtol %g * |reference|",
        result.rel_norm_error, rel_norm_bound, tolerances.atol, tolerances.rtol);
  }
  return result;
}

bool IsNearConstant(absl::Span<const double> values, const Tolerances& tolerances) {
  const double mean = Mean(values);
  for (double value : values) {
    if (std::isfinite(value) && !WithinTolerance(mean, value, tolerances)) return false;
  }
  return true;
}

bool AgreeWithin(absl::Span<const double> a, absl::Span<const double> b,
                 const Tolerances& tolerances) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isfinite(a[i]) && std::isfinite(b[i]) && !WithinTolerance(a[i], b[i], tolerances)) {
      return false;
    }
  }
  return true;
}

VariationComparison CompareVariation(absl::Span<const double> candidate_variation,
                                     absl::Span<const double> reference_variation,
                                     absl::Span<const double> rounded_variation) {
  VariationComparison result;
  const double reference_norm = Norm(reference_variation);
  // Rounding leaves floating-point residue of the mean behind, never exactly zero: a variation that
  // loses three orders of magnitude to rounding is gone.
  result.representable = reference_norm > 0 && Norm(rounded_variation) > 1e-3 * reference_norm;
  if (candidate_variation.size() != reference_variation.size() ||
      rounded_variation.size() != reference_variation.size()) {
    result.passed = false;  // the outputs do not even line up
    return result;
  }
  if (!result.representable) return result;
  double error_squared = 0;
  double rounding_squared = 0;
  for (size_t i = 0; i < reference_variation.size(); ++i) {
    const double error = candidate_variation[i] - reference_variation[i];
    const double rounding = rounded_variation[i] - reference_variation[i];
    error_squared += error * error;
    rounding_squared += rounding * rounding;
  }
  const double error = std::sqrt(error_squared);
  result.relative_error = error / reference_norm;
  result.passed = std::isfinite(error) && error <= 0.5 * reference_norm + 2 * std::sqrt(rounding_squared);
  return result;
}

}  // namespace forge::judge
