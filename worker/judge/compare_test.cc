#include "worker/judge/compare.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace forge::judge {
namespace {

using forge::v1::DType;

constexpr int64_t kRows = 6;
constexpr int64_t kColumns = 7;

forge::v1::TensorSpec Spec(DType dtype, std::vector<int64_t> shape) {
  forge::v1::TensorSpec spec;
  spec.set_dtype(dtype);
  for (int64_t size : shape) spec.add_shape(size);
  return spec;
}

std::vector<double> Reference() {
  std::vector<double> values(kRows * kColumns);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.7 * i) * 3 + 0.1;
  return values;
}

// `values` stored in `dtype`, or the dtype's NaN poison where `written` is false.
HostTensor Candidate(DType dtype, const std::vector<double>& values,
                     const std::vector<bool>& written = {}) {
  HostTensor tensor = *HostTensor::Allocate(Spec(dtype, {kRows, kColumns}));
  const int element_bytes = *ElementBytes(dtype);
  const Poison poison = PoisonFor(dtype);
  for (size_t i = 0; i < values.size(); ++i) {
    if (written.empty() || written[i]) {
      tensor.Set(i, values[i]);
    } else {
      for (int offset = 0; offset < element_bytes; offset += poison.word_bytes) {
        std::memcpy(tensor.storage.data() + i * element_bytes + offset, &poison.word,
                    poison.word_bytes);
      }
    }
  }
  return tensor;
}

TEST(CompareOutputTest, ExactMatchPasses) {
  std::vector<double> reference = Reference();
  OutputComparison result = CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, reference), reference,
                                          DefaultTolerances(forge::v1::DTYPE_FLOAT32));
  EXPECT_TRUE(result.passed) << result.failure;
  EXPECT_EQ(result.element_count, kRows * kColumns);
  EXPECT_LT(result.max_abs_error, 1e-6);  // float32 rounding only
  EXPECT_LT(result.rel_norm_error, 1e-7);
  EXPECT_TRUE(result.failure.empty());
}

TEST(CompareOutputTest, OneRowOnlyIsUnwritten) {
  std::vector<double> reference = Reference();
  std::vector<bool> written(reference.size(), false);
  for (int64_t column = 0; column < kColumns; ++column) written[column] = true;
  OutputComparison result = CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, reference, written),
                                          reference, DefaultTolerances(forge::v1::DTYPE_FLOAT32));
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.unwritten, (kRows - 1) * kColumns);
  EXPECT_EQ(result.failed_index, kColumns);
  EXPECT_TRUE(absl::StrContains(result.failure, "element 7 [1, 0] never written")) << result.failure;
  EXPECT_TRUE(absl::StrContains(result.failure, "35 of 42 elements unwritten")) << result.failure;
}

TEST(CompareOutputTest, UnwrittenTailIsFoundForEveryFloatType) {
  for (DType dtype : {forge::v1::DTYPE_FLOAT64, forge::v1::DTYPE_FLOAT32,
                      forge::v1::DTYPE_FLOAT16, forge::v1::DTYPE_BFLOAT16,
                      forge::v1::DTYPE_FLOAT8_E4M3FN}) {
    std::vector<double> reference = Reference();
    std::vector<bool> written(reference.size(), true);
    written.back() = false;  // off by one in the last block
    OutputComparison result =
        CompareOutput(Candidate(dtype, reference, written), reference, DefaultTolerances(dtype));
    EXPECT_FALSE(result.passed) << forge::v1::DType_Name(dtype);
    EXPECT_EQ(result.unwritten, 1) << forge::v1::DType_Name(dtype);
    EXPECT_TRUE(absl::StrContains(result.failure, "element 41 [5, 6] never written"))
        << result.failure;
  }
}

TEST(CompareOutputTest, ComputedNanIsAMismatchNotUnwritten) {
  std::vector<double> reference = Reference();
  std::vector<double> values = reference;
  values[3] = -std::numeric_limits<double>::quiet_NaN();  // not the poison's bit pattern
  OutputComparison result = CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, values), reference,
                                          DefaultTolerances(forge::v1::DTYPE_FLOAT32));
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.unwritten, 0);
  EXPECT_EQ(result.mismatches, 1);
  EXPECT_TRUE(absl::StrContains(result.failure, "element 3 [0, 3]: candidate -nan")) << result.failure;
}

TEST(CompareOutputTest, InfinitiesMustMatch) {
  std::vector<double> reference = Reference();
  reference[5] = std::numeric_limits<double>::infinity();
  std::vector<double> values = reference;
  EXPECT_TRUE(CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, values), reference,
                            DefaultTolerances(forge::v1::DTYPE_FLOAT32))
                  .passed);
  values[5] = -std::numeric_limits<double>::infinity();
  OutputComparison wrong_sign = CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, values),
                                              reference, DefaultTolerances(forge::v1::DTYPE_FLOAT32));
  EXPECT_FALSE(wrong_sign.passed);
  EXPECT_EQ(wrong_sign.failed_index, 5);
  values = Reference();
  values[2] = std::numeric_limits<double>::infinity();  // an overflow where the reference is finite
  EXPECT_FALSE(CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, values), Reference(),
                             DefaultTolerances(forge::v1::DTYPE_FLOAT32))
                   .passed);
}

TEST(CompareOutputTest, NanReferenceAcceptsOnlyNan) {
  std::vector<double> reference = Reference();
  reference[0] = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> values = reference;
  OutputComparison result = CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, values), reference,
                                          DefaultTolerances(forge::v1::DTYPE_FLOAT32));
  EXPECT_TRUE(result.passed) << result.failure;
  EXPECT_EQ(result.nan_reference, 1);
  values[0] = 1.0;
  EXPECT_FALSE(CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, values), reference,
                             DefaultTolerances(forge::v1::DTYPE_FLOAT32))
                   .passed);
}

TEST(CompareOutputTest, ZerosDoNotPassForATinyReference) {
  std::vector<double> reference = Reference();
  for (double& value : reference) value *= 1e-9;  // every element under atol
  std::vector<double> zeros(reference.size(), 0.0);
  OutputComparison result = CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, zeros), reference,
                                          DefaultTolerances(forge::v1::DTYPE_FLOAT32));
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.mismatches, 0);
  EXPECT_DOUBLE_EQ(result.rel_norm_error, 1.0);
  EXPECT_TRUE(absl::StrContains(result.failure, "relative-norm error")) << result.failure;
  // The same tiny values computed correctly pass.
  EXPECT_TRUE(CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, reference), reference,
                            DefaultTolerances(forge::v1::DTYPE_FLOAT32))
                  .passed);
}

TEST(CompareOutputTest, LowPrecisionRoundingIsWithinTolerance) {
  std::vector<double> reference = Reference();
  for (DType dtype : {forge::v1::DTYPE_BFLOAT16, forge::v1::DTYPE_FLOAT16}) {
    OutputComparison result =
        CompareOutput(Candidate(dtype, reference), reference, DefaultTolerances(dtype));
    EXPECT_TRUE(result.passed) << forge::v1::DType_Name(dtype) << ": " << result.failure;
    EXPECT_GT(result.max_abs_error, 0);
  }
  // bfloat16 rounding is far outside float32's tolerance.
  std::vector<double> rounded = reference;
  for (double& value : rounded) value = RoundToDType(forge::v1::DTYPE_BFLOAT16, value);
  OutputComparison strict = CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, rounded), reference,
                                          DefaultTolerances(forge::v1::DTYPE_FLOAT32));
  EXPECT_FALSE(strict.passed);
}

// A bfloat16 sum whose terms nearly cancel (linear -> add residual): eager rounds the product to
// bfloat16 before adding and misses the float64 value by ~0.0147, more than bfloat16's tolerance.
struct Cancellation {
  std::vector<double> reference;  // float64
  std::vector<double> native;     // eager's, in bfloat16
};
Cancellation CancellingSum() {
  Cancellation sums;
  for (int64_t i = 0; i < kRows * kColumns; ++i) {
    const double exact = 0.0164 + 0.001 * i;
    const double eager_error = (i % 2 == 0 ? 1 : -1) * 0.0147;
    sums.reference.push_back(exact);
    sums.native.push_back(RoundToDType(forge::v1::DTYPE_BFLOAT16, exact + eager_error));
  }
  return sums;
}

TEST(CompareOutputTest, EagersOwnErrorWidensTheTolerance) {
  const Cancellation sums = CancellingSum();
  const Tolerances tolerances = DefaultTolerances(forge::v1::DTYPE_BFLOAT16);
  const HostTensor eager = Candidate(forge::v1::DTYPE_BFLOAT16, sums.native);
  // Against float64 alone, eager's own result fails.
  EXPECT_FALSE(CompareOutput(eager, sums.reference, tolerances).passed);
  OutputComparison widened = CompareOutput(eager, sums.reference, tolerances, sums.native);
  EXPECT_TRUE(widened.passed) << widened.failure;
  EXPECT_GT(widened.max_abs_error, tolerances.atol + tolerances.rtol * 0.06);
  // So does a candidate whose error is up to twice eager's.
  std::vector<double> twice = sums.native;
  for (size_t i = 0; i < twice.size(); ++i) twice[i] += 0.9 * (sums.native[i] - sums.reference[i]);
  OutputComparison within =
      CompareOutput(Candidate(forge::v1::DTYPE_BFLOAT16, twice), sums.reference, tolerances,
                    sums.native);
  EXPECT_TRUE(within.passed) << within.failure;
}

TEST(CompareOutputTest, ErrorBeyondTwiceEagersStillFails) {
  const Cancellation sums = CancellingSum();
  const Tolerances tolerances = DefaultTolerances(forge::v1::DTYPE_BFLOAT16);
  // native + 3 * (native - float64) + the base tolerance: 4x eager's error plus the tolerance,
  // against an allowance of 2x plus the tolerance.
  std::vector<double> worse = sums.native;
  for (size_t i = 0; i < worse.size(); ++i) {
    const double eager_error = sums.native[i] - sums.reference[i];
    const double base = tolerances.atol + tolerances.rtol * std::fabs(sums.reference[i]);
    worse[i] += 3 * eager_error + std::copysign(base, eager_error);
  }
  OutputComparison result = CompareOutput(Candidate(forge::v1::DTYPE_BFLOAT16, worse),
                                          sums.reference, tolerances, sums.native);
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.mismatches, kRows * kColumns);
  EXPECT_EQ(result.failed_index, 0);
  EXPECT_TRUE(absl::StrContains(result.failure, "2 * eager's error")) << result.failure;
}

TEST(CompareOutputTest, WidenedNormBoundIsTwiceEagersRelativeNormError) {
  // Every element within its widened bound, yet the norm beyond both bounds: each element errs by
  // the whole allowance where eager's error is tiny relative to the values.
  std::vector<double> reference = Reference();
  std::vector<double> native = reference;
  native[0] += 0.1;  // eager errs at one element only
  const Tolerances tolerances{0.05, 0.05, 0.01};
  std::vector<double> candidate = reference;
  for (size_t i = 0; i < candidate.size(); ++i) {
    candidate[i] += 0.9 * (tolerances.atol + tolerances.rtol * std::fabs(reference[i]));
  }
  const double eager_norm = RelativeNormError(native, reference);
  ASSERT_LT(2 * eager_norm, 0.04);
  OutputComparison result = CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, candidate),
                                          reference, tolerances, native);
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.mismatches, 0);
  EXPECT_GT(result.rel_norm_error, 2 * eager_norm);
  EXPECT_TRUE(absl::StrContains(result.failure, "relative-norm error")) << result.failure;
  // Where eager's relative norm error is larger, the same candidate passes.
  for (double& value : native) value *= 1.1;
  OutputComparison widened = CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, candidate),
                                           reference, tolerances, native);
  EXPECT_TRUE(widened.passed) << widened.failure;
}

TEST(EagerErrorTest, NoteNamesTheWidening) {
  const Cancellation sums = CancellingSum();
  EagerError error;
  EXPECT_EQ(error.Note(), "");
  error.Add(sums.reference, sums.reference);
  EXPECT_EQ(error.Note(), "");  // eager matched float64: nothing widened
  error.Add(sums.native, sums.reference);
  EXPECT_NEAR(error.max_abs, 0.0147, 1e-3);
  EXPECT_NEAR(error.rel_norm, RelativeNormError(sums.native, sums.reference), 1e-12);
  EXPECT_TRUE(absl::StrContains(error.Note(), "tolerance widened by eager's own error"))
      << error.Note();
  EXPECT_TRUE(absl::StrContains(error.Note(), "max 0.01")) << error.Note();
}

TEST(CompareOutputTest, ReportsTheFirstMismatchAndCountsAll) {
  std::vector<double> reference = Reference();
  std::vector<double> values = reference;
  values[9] += 0.01;
  values[20] -= 0.5;
  OutputComparison result = CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, values), reference,
                                          DefaultTolerances(forge::v1::DTYPE_FLOAT32));
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.mismatches, 2);
  EXPECT_EQ(result.failed_index, 9);
  EXPECT_NEAR(result.max_abs_error, 0.5, 1e-6);
  EXPECT_TRUE(absl::StrContains(result.failure, "element 9 [1, 2]")) << result.failure;
  EXPECT_TRUE(absl::StrContains(result.failure, "2 of 42 elements")) << result.failure;
}

TEST(CompareOutputTest, IntegersCompareExactlyAndPoisonShows) {
  std::vector<double> reference(kRows * kColumns);
  for (size_t i = 0; i < reference.size(); ++i) reference[i] = static_cast<double>(i % 5);
  EXPECT_TRUE(CompareOutput(Candidate(forge::v1::DTYPE_INT64, reference), reference,
                            DefaultTolerances(forge::v1::DTYPE_INT64))
                  .passed);
  std::vector<double> off = reference;
  off[4] += 1;
  EXPECT_FALSE(CompareOutput(Candidate(forge::v1::DTYPE_INT64, off), reference,
                             DefaultTolerances(forge::v1::DTYPE_INT64))
                   .passed);
  std::vector<bool> written(reference.size(), true);
  written[11] = false;
  OutputComparison unwritten = CompareOutput(Candidate(forge::v1::DTYPE_INT32, reference, written),
                                             reference, DefaultTolerances(forge::v1::DTYPE_INT32));
  EXPECT_EQ(unwritten.unwritten, 1);
  EXPECT_EQ(unwritten.failed_index, 11);
}

TEST(CompareOutputTest, SizeMismatchFails) {
  std::vector<double> reference = Reference();
  reference.pop_back();
  OutputComparison result = CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, Reference()),
                                          reference, DefaultTolerances(forge::v1::DTYPE_FLOAT32));
  EXPECT_FALSE(result.passed);
  EXPECT_TRUE(absl::StrContains(result.failure, "reference has 41 elements")) << result.failure;
}

TEST(PoisonTest, PatternsAreNanOfTheirType) {
  for (DType dtype : {forge::v1::DTYPE_FLOAT64, forge::v1::DTYPE_FLOAT32,
                      forge::v1::DTYPE_FLOAT16, forge::v1::DTYPE_BFLOAT16,
                      forge::v1::DTYPE_FLOAT8_E4M3FN, forge::v1::DTYPE_FLOAT8_E5M2}) {
    HostTensor poisoned = Candidate(dtype, Reference(), std::vector<bool>(kRows * kColumns, false));
    EXPECT_TRUE(std::isnan(poisoned.Get(0))) << forge::v1::DType_Name(dtype);
    EXPECT_TRUE(IsPoison(dtype, poisoned.storage.data())) << forge::v1::DType_Name(dtype);
  }
  EXPECT_EQ(PoisonFor(forge::v1::DTYPE_FLOAT32).word, 0x7FC00000u);
  EXPECT_EQ(PoisonFor(forge::v1::DTYPE_FLOAT16).word, 0x7E00u);
}

TEST(NearConstantTest, FlagsOnlyWhatAConstantCouldMatch) {
  std::vector<double> varying = Reference();
  EXPECT_FALSE(IsNearConstant(varying, DefaultTolerances(forge::v1::DTYPE_FLOAT32)));
  std::vector<double> nearly(varying.size());
  for (size_t i = 0; i < nearly.size(); ++i) nearly[i] = 1000 + 0.01 * varying[i];
  EXPECT_TRUE(IsNearConstant(nearly, DefaultTolerances(forge::v1::DTYPE_FLOAT32)));
  EXPECT_TRUE(AgreeWithin(nearly, std::vector<double>(nearly.size(), 1000.0),
                          DefaultTolerances(forge::v1::DTYPE_FLOAT32)));
  EXPECT_FALSE(AgreeWithin(varying, nearly, DefaultTolerances(forge::v1::DTYPE_FLOAT32)));
}

std::vector<double> Centered(std::vector<double> values) {
  double mean = 0;
  for (double value : values) mean += value / values.size();
  for (double& value : values) value -= mean;
  return values;
}

TEST(CompareVariationTest, AConstantCandidateFailsANearConstantReference) {
  std::vector<double> reference(42);
  for (size_t i = 0; i < reference.size(); ++i) reference[i] = 1000 + 0.01 * std::sin(1.3 * i);
  std::vector<double> rounded = reference;
  for (double& value : rounded) value = RoundToDType(forge::v1::DTYPE_FLOAT32, value);
  // The correct float32 output passes the element-wise checks and the variation check.
  HostTensor correct = Candidate(forge::v1::DTYPE_FLOAT32, reference);
  EXPECT_TRUE(CompareOutput(correct, reference, DefaultTolerances(forge::v1::DTYPE_FLOAT32)).passed);
  VariationComparison good =
      CompareVariation(Centered(correct.ToDoubles()), Centered(reference), Centered(rounded));
  EXPECT_TRUE(good.representable);
  EXPECT_TRUE(good.passed) << good.relative_error;
  EXPECT_LT(good.relative_error, 0.05);
  // A constant passes the element-wise checks but not the variation check.
  HostTensor constant = Candidate(forge::v1::DTYPE_FLOAT32, std::vector<double>(42, 1000.0));
  EXPECT_TRUE(CompareOutput(constant, reference, DefaultTolerances(forge::v1::DTYPE_FLOAT32)).passed);
  VariationComparison bad =
      CompareVariation(Centered(constant.ToDoubles()), Centered(reference), Centered(rounded));
  EXPECT_FALSE(bad.passed);
  EXPECT_NEAR(bad.relative_error, 1.0, 1e-3);
}

TEST(CompareVariationTest, VariationBelowTheOutputPrecisionIsNotRequired) {
  std::vector<double> reference(42);
  for (size_t i = 0; i < reference.size(); ++i) reference[i] = 1000 + 0.01 * std::sin(1.3 * i);
  std::vector<double> rounded = reference;
  for (double& value : rounded) value = RoundToDType(forge::v1::DTYPE_BFLOAT16, value);
  VariationComparison result = CompareVariation(std::vector<double>(42, 0.0), Centered(reference),
                                                Centered(rounded));
  EXPECT_FALSE(result.representable);  // bfloat16 holds 1000 in steps of 4
  EXPECT_TRUE(result.passed);
  EXPECT_FALSE(CompareVariation({1, 2}, {1, 2, 3}, {1, 2, 3}).passed);
}

}  // namespace
}  // namespace forge::judge
