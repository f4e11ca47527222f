#include "worker/judge/compare.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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

TEST(ChoosePoisonTest, EveryLaunchGetsAnotherPoisonNaNsAndFiniteGarbageAlternating) {
  for (DType dtype : {forge::v1::DTYPE_FLOAT32, forge::v1::DTYPE_FLOAT64, forge::v1::DTYPE_FLOAT16,
                      forge::v1::DTYPE_BFLOAT16, forge::v1::DTYPE_FLOAT8_E4M3FN,
                      forge::v1::DTYPE_FLOAT8_E5M2}) {
    const int element_bytes = *ElementBytes(dtype);
    std::set<uint64_t> patterns;
    for (int64_t launch = 0; launch < 16; ++launch) {
      const Poison poison = ChoosePoison(dtype, 7, launch);
      const uint64_t bits = PoisonElementBits(poison, element_bytes);
      patterns.insert(bits);
      std::byte element[8];
      std::memcpy(element, &bits, sizeof(bits));
      const double value = DecodeElement(dtype, element);
      if (launch % 2 == 0) {
        EXPECT_TRUE(std::isnan(value)) << forge::v1::DType_Name(dtype) << " launch " << launch;
      } else {
        EXPECT_TRUE(std::isfinite(value)) << forge::v1::DType_Name(dtype) << " launch " << launch;
        EXPECT_GE(std::fabs(value), dtype == forge::v1::DTYPE_FLOAT16 ? 8192 : 256)
            << forge::v1::DType_Name(dtype);
      }
      EXPECT_EQ(PoisonElementBits(ChoosePoison(dtype, 7, launch), element_bytes), bits);
    }
    // float8 has few NaN and large encodings; the wider dtypes hardly ever repeat a pattern.
    EXPECT_GE(patterns.size(), element_bytes == 1 ? 4u : 12u)
        << forge::v1::DType_Name(dtype);
  }
  // Integers keep the one poison: every pattern is a valid integer.
  EXPECT_EQ(ChoosePoison(forge::v1::DTYPE_INT32, 7, 3).word, PoisonFor(forge::v1::DTYPE_INT32).word);
}

TEST(CompareOutputTest, UnwrittenElementsAreFoundUnderTheLaunchsPoison) {
  const std::vector<double> reference = Reference();
  for (int64_t launch : {0, 1}) {
    const Poison poison = ChoosePoison(forge::v1::DTYPE_FLOAT32, 3, launch);
    HostTensor candidate = Candidate(forge::v1::DTYPE_FLOAT32, reference);
    std::memcpy(candidate.storage.data() + 4 * sizeof(float), &poison.word, sizeof(float));
    const OutputComparison result =
        CompareOutput(candidate, reference, DefaultTolerances(forge::v1::DTYPE_FLOAT32), {},
                      ThreadPool::Default(), poison);
    EXPECT_FALSE(result.passed);
    EXPECT_EQ(result.unwritten, 1) << result.failure;
    EXPECT_EQ(result.failed_index, 4);
    EXPECT_TRUE(absl::StrContains(result.failure, launch == 0 ? "poison, NaN 0x" : "poison, finite"))
        << result.failure;
  }
  // The quiet NaN of another launch is no poison of this one: a kernel that wrote it is wrong.
  std::vector<bool> mask(reference.size(), true);
  mask[2] = false;
  const OutputComparison stale = CompareOutput(
      Candidate(forge::v1::DTYPE_FLOAT32, reference, mask), reference,
      DefaultTolerances(forge::v1::DTYPE_FLOAT32), {}, ThreadPool::Default(),
      ChoosePoison(forge::v1::DTYPE_FLOAT32, 3, 1));
  EXPECT_FALSE(stale.passed);
  EXPECT_EQ(stale.unwritten, 0);
  EXPECT_EQ(stale.mismatches, 1);
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

TEST(OverflowThresholdTest, IsWhereRoundingToTheDTypeGivesInfinity) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {forge::v1::DTYPE_FLOAT16, forge::v1::DTYPE_BFLOAT16, forge::v1::DTYPE_FLOAT32,
                      forge::v1::DTYPE_FLOAT8_E5M2}) {
    const double threshold = OverflowThreshold(dtype);
    EXPECT_EQ(RoundToDType(dtype, threshold), inf) << forge::v1::DType_Name(dtype);
    EXPECT_EQ(RoundToDType(dtype, -threshold), -inf) << forge::v1::DType_Name(dtype);
    const double below = std::nextafter(threshold, 0.0);
    EXPECT_TRUE(std::isfinite(RoundToDType(dtype, below))) << forge::v1::DType_Name(dtype);
  }
  EXPECT_EQ(OverflowThreshold(forge::v1::DTYPE_FLOAT16), 65520);
  for (DType dtype : {forge::v1::DTYPE_FLOAT64, forge::v1::DTYPE_FLOAT8_E4M3FN,
                      forge::v1::DTYPE_INT32, forge::v1::DTYPE_BOOL}) {
    EXPECT_EQ(OverflowThreshold(dtype), inf) << forge::v1::DType_Name(dtype);
  }
}

TEST(CompareOutputTest, AReferenceBeyondTheDTypesRangeIsItsInfinity) {
  // exp(logcumsumexp(x)) in float16 under large logits: the float64 reference is 1e228, which
  // float16 stores as inf; the kernel's inf is right.
  const double inf = std::numeric_limits<double>::infinity();
  const DType half = forge::v1::DTYPE_FLOAT16;
  std::vector<double> reference = Reference();
  reference[3] = 1e228;
  reference[4] = -70000;  // just past float16's -65504: -inf
  std::vector<double> values = Reference();
  values[3] = inf;
  values[4] = -inf;
  OutputComparison right =
      CompareOutput(Candidate(half, values), reference, DefaultTolerances(half));
  EXPECT_TRUE(right.passed) << right.failure;
  EXPECT_LT(right.rel_norm_error, 1e-3);  // the infinities are left out of the norms

  // NaN where the (rounded) reference is infinite still fails (a NaN payload other than the
  // poison's), and so does the other infinity or the largest finite value.
  HostTensor nan = Candidate(half, values);
  const uint16_t nan_bits = 0x7E01;
  std::memcpy(nan.storage.data() + 3 * sizeof(nan_bits), &nan_bits, sizeof(nan_bits));
  OutputComparison nan_result = CompareOutput(nan, reference, DefaultTolerances(half));
  EXPECT_FALSE(nan_result.passed);
  EXPECT_EQ(nan_result.failed_index, 3);
  for (double wrong : {-inf, 65504.0}) {
    std::vector<double> bad = values;
    bad[3] = wrong;
    OutputComparison result =
        CompareOutput(Candidate(half, bad), reference, DefaultTolerances(half));
    EXPECT_FALSE(result.passed) << wrong;
    EXPECT_EQ(result.failed_index, 3) << wrong;
    EXPECT_TRUE(absl::StrContains(result.failure, "beyond the range of the output"))
        << result.failure;
  }
  // inf where the rounded reference is finite (65500 is a float16 value) still fails.
  std::vector<double> finite_reference = Reference();
  finite_reference[2] = 65500;
  std::vector<double> overflowed = Reference();
  overflowed[2] = inf;
  OutputComparison result =
      CompareOutput(Candidate(half, overflowed), finite_reference, DefaultTolerances(half));
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.failed_index, 2);
  // The same reference in a float32 output is finite there: inf fails.
  EXPECT_FALSE(CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, values), reference,
                             DefaultTolerances(forge::v1::DTYPE_FLOAT32))
                   .passed);
}

TEST(RootMeanSquareTest, LeavesOutWhatTheDTypeCannotHold) {
  // Otherwise a float16 reference of 1e228 would scale every element's atol to ~1e226.
  const double limit = OverflowThreshold(forge::v1::DTYPE_FLOAT16);
  EXPECT_DOUBLE_EQ(RootMeanSquare({3.0, -4.0, 1e228}, ThreadPool::Default(), limit),
                   std::sqrt(12.5));
  EXPECT_DOUBLE_EQ(RootMeanSquare({3.0, -4.0, -65520.0}, ThreadPool::Default(), limit),
                   std::sqrt(12.5));
  EXPECT_GT(RootMeanSquare({3.0, -4.0, 65519.0}, ThreadPool::Default(), limit), 30000);
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

// A bfloat16 sum whose terms nearly cancel at every other element (linear -> add residual): there
// eager rounds the product to bfloat16 before adding and misses the float64 value by ~0.0147, more
// than bfloat16's tolerance; the other elements (1 + i/64, exact in bfloat16) eager gets right, so
// that eager's relative-norm error (~0.011) leaves it accurate enough to judge by.
struct Cancellation {
  std::vector<double> reference;  // float64
  std::vector<double> native;     // eager's, in bfloat16
};
Cancellation CancellingSum() {
  Cancellation sums;
  for (int64_t i = 0; i < kRows * kColumns; ++i) {
    if (i % 2 == 1) {
      sums.reference.push_back(1 + i / 64.0);
      sums.native.push_back(1 + i / 64.0);
      continue;
    }
    const double exact = 0.0164 + 0.001 * i;
    const double eager_error = (i % 4 == 0 ? 1 : -1) * 0.0147;
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
  for (size_t i = 0; i < worse.size(); i += 2) {  // the cancelling elements
    const double eager_error = sums.native[i] - sums.reference[i];
    const double base = tolerances.atol + tolerances.rtol * std::fabs(sums.reference[i]);
    worse[i] += 3 * eager_error + std::copysign(base, eager_error);
  }
  OutputComparison result = CompareOutput(Candidate(forge::v1::DTYPE_BFLOAT16, worse),
                                          sums.reference, tolerances, sums.native);
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.mismatches, kRows * kColumns / 2);  // the cancelling elements
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
  // Where eager's relative norm error is larger (still accurate enough), the same candidate passes.
  for (double& value : native) value *= 1.06;
  ASSERT_TRUE(EagerAccurateEnough(RelativeNormError(native, reference)));
  OutputComparison widened = CompareOutput(Candidate(forge::v1::DTYPE_FLOAT32, candidate),
                                           reference, tolerances, native);
  EXPECT_TRUE(widened.passed) << widened.failure;
}

// bfloat16 `(x + 65536) - 65536`: eager rounds x + 65536 back to 65536 and returns 0, an error of
// |x|. Twice that error would admit alpha * x for any alpha in (-1, 3), zeros included; eager is
// not accurate enough to judge by, so the output is held to float64 alone.
struct LostByEager {
  std::vector<double> reference;  // x, in float64
  std::vector<double> native;     // 0 everywhere
};
LostByEager LostSum() {
  LostByEager sums;
  sums.reference = Reference();
  sums.native.assign(sums.reference.size(), 0.0);
  return sums;
}

std::vector<double> Scaled(std::vector<double> values, double alpha) {
  for (double& value : values) value *= alpha;
  return values;
}

TEST(CompareOutputTest, EagerThatLosesTheResultWidensNothing) {
  const LostByEager sums = LostSum();
  const Tolerances tolerances = DefaultTolerances(forge::v1::DTYPE_BFLOAT16);
  EXPECT_FALSE(EagerAccurateEnough(RelativeNormError(sums.native, sums.reference)));
  EXPECT_EQ(WidenedRelNormBound(tolerances, RelativeNormError(sums.native, sums.reference)),
            tolerances.rel_norm);
  // The zero output (eager's own), scaled outputs within the old (-1, 3) and a flipped sign fail.
  for (double alpha : {0.0, -0.5, 0.5, 0.8, 1.2, 2.5, -1.0}) {
    const OutputComparison result =
        CompareOutput(Candidate(forge::v1::DTYPE_BFLOAT16, Scaled(sums.reference, alpha)),
                      sums.reference, tolerances, sums.native);
    EXPECT_FALSE(result.passed) << "alpha " << alpha;
    EXPECT_FALSE(absl::StrContains(result.failure, "eager")) << result.failure;
  }
  // The float64 value rounded to bfloat16 still passes.
  std::vector<double> rounded = sums.reference;
  for (double& value : rounded) value = RoundToDType(forge::v1::DTYPE_BFLOAT16, value);
  const OutputComparison correct = CompareOutput(Candidate(forge::v1::DTYPE_BFLOAT16, rounded),
                                                 sums.reference, tolerances, sums.native);
  EXPECT_TRUE(correct.passed) << correct.failure;
  EagerError error;
  error.Add(sums.native, sums.reference);
  EXPECT_TRUE(absl::StrContains(error.Note(), "too far from float64 to judge by")) << error.Note();
}

TEST(CompareOutputTest, WidenedToleranceStillRejectsZeroScaledAndFlippedOutputs) {
  // Where eager is accurate enough to widen by, a zero, a scaled or a sign-flipped output is far
  // beyond the widened norm bound (at most 2 * kMaxTrustedEagerError).
  const Cancellation sums = CancellingSum();
  const Tolerances tolerances = DefaultTolerances(forge::v1::DTYPE_BFLOAT16);
  ASSERT_TRUE(EagerAccurateEnough(RelativeNormError(sums.native, sums.reference)));
  for (double alpha : {0.0, -1.0, 0.5, 0.7, 1.3, 2.0}) {
    EXPECT_FALSE(CompareOutput(Candidate(forge::v1::DTYPE_BFLOAT16, Scaled(sums.reference, alpha)),
                               sums.reference, tolerances, sums.native)
                     .passed)
        << "alpha " << alpha;
  }
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

TEST(ScaledToReferenceTest, ScalesAtolOnlyAboveUnitRootMeanSquare) {
  const Tolerances base = DefaultTolerances(forge::v1::DTYPE_FLOAT32);
  EXPECT_DOUBLE_EQ(ScaledToReference(base, 0.25).atol, base.atol);
  EXPECT_DOUBLE_EQ(ScaledToReference(base, 64).atol, 64 * base.atol);
  EXPECT_DOUBLE_EQ(ScaledToReference(base, 64).rtol, base.rtol);
  EXPECT_DOUBLE_EQ(ScaledToReference(base, 64).rel_norm, base.rel_norm);
}

TEST(RootMeanSquareTest, SkipsNonFiniteElements) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_DOUBLE_EQ(RootMeanSquare({3.0, -4.0, nan, inf}), std::sqrt(12.5));
  EXPECT_EQ(RootMeanSquare({nan}), 0);
  EXPECT_EQ(RootMeanSquare({}), 0);
}

// A float32 matrix product with long rows, as the ATen baseline computes it (float32 sums), against
// the float64 one: where the terms cancel the result is near 0 and its rounding error, set by the
// size of the terms, passes only atol scaled to the output. Inputs rounded to TF32 still fail.
TEST(ScaledToReferenceTest, Float32ProductPassesAndTf32Fails) {
  constexpr int64_t kSide = 48;
  constexpr int64_t kInner = 8192;
  std::mt19937_64 random(7);
  std::normal_distribution<double> normal(0, 1);
  std::vector<float> a(kSide * kInner);
  std::vector<float> b(kSide * kInner);  // transposed: row j is column j
  for (float& value : a) value = static_cast<float>(normal(random));
  for (float& value : b) value = static_cast<float>(normal(random));
  auto tf32 = [](float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    bits = (bits + 0x1000u) & ~0x1FFFu;  // 10 explicit mantissa bits, rounded to nearest
    std::memcpy(&value, &bits, sizeof bits);
    return value;
  };
  std::vector<double> reference;
  std::vector<double> float32;
  std::vector<double> with_tf32;
  for (int64_t i = 0; i < kSide; ++i) {
    for (int64_t j = 0; j < kSide; ++j) {
      double exact = 0;
      float sum = 0;
      float sum_tf32 = 0;
      for (int64_t k = 0; k < kInner; ++k) {
        const float x = a[i * kInner + k];
        const float y = b[j * kInner + k];
        exact += static_cast<double>(x) * y;
        sum = std::fma(x, y, sum);
        sum_tf32 = std::fma(tf32(x), tf32(y), sum_tf32);
      }
      reference.push_back(exact);
      float32.push_back(sum);
      with_tf32.push_back(sum_tf32);
    }
  }
  auto compare = [&](const std::vector<double>& values, const Tolerances& tolerances) {
    HostTensor tensor = *HostTensor::Allocate(Spec(forge::v1::DTYPE_FLOAT32, {kSide, kSide}));
    for (size_t i = 0; i < values.size(); ++i) tensor.Set(i, values[i]);
    return CompareOutput(tensor, reference, tolerances);
  };
  const Tolerances base = DefaultTolerances(forge::v1::DTYPE_FLOAT32);
  const Tolerances scaled = ScaledToReference(base, RootMeanSquare(reference));
  EXPECT_GT(RootMeanSquare(reference), 60);
  EXPECT_FALSE(compare(float32, base).passed);  // the near-zero elements
  OutputComparison product = compare(float32, scaled);
  EXPECT_TRUE(product.passed) << product.failure;
  OutputComparison tf32_product = compare(with_tf32, scaled);
  EXPECT_FALSE(tf32_product.passed);
  EXPECT_GT(tf32_product.mismatches, kSide * kSide / 4);
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

// ---- The chunked, parallel passes against a plain loop over the elements ----

constexpr int64_t kChunk = ThreadPool::kChunkElements;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// CompareOutput's figures as one loop over the elements computes them, in the order the judge
// defines: the oracle the chunked passes must reproduce (the norm up to summation order).
struct PlainComparison {
  int64_t unwritten = 0;
  int64_t mismatches = 0;
  int64_t nan_reference = 0;
  std::optional<int64_t> first_unwritten;
  std::optional<int64_t> first_mismatch;
  double max_abs_error = 0;
  double max_rel_error = 0;
  double rel_norm_error = 0;
};

PlainComparison CompareElementByElement(const HostTensor& candidate,
                                        const std::vector<double>& reference,
                                        const Tolerances& tolerances,
                                        const std::vector<double>& native = {}) {
  PlainComparison plain;
  double error_squared = 0;
  double reference_squared = 0;
  const int element_bytes = *ElementBytes(candidate.spec.dtype());
  for (int64_t i = 0; i < candidate.element_count(); ++i) {
    const std::byte* element =
        candidate.storage.data() + StorageOffsetOf(candidate.spec, i) * element_bytes;
    const double got = candidate.Get(i);
    const double want = reference[i];
    auto mismatch = [&] {
      ++plain.mismatches;
      if (!plain.first_mismatch) plain.first_mismatch = i;
    };
    if (std::isnan(want)) {
      ++plain.nan_reference;
      if (!std::isnan(got)) mismatch();
    } else if (IsPoison(candidate.spec.dtype(), element)) {
      ++plain.unwritten;
      if (!plain.first_unwritten) plain.first_unwritten = i;
    } else if (std::isinf(want) || std::isinf(got) || std::isnan(got)) {
      if (got != want) {
        mismatch();
        plain.max_abs_error = kInf;
      }
    } else {
      const double difference = std::fabs(got - want);
      plain.max_abs_error = std::max(plain.max_abs_error, difference);
      if (want != 0)
        plain.max_rel_error = std::max(plain.max_rel_error, difference / std::fabs(want));
      error_squared += difference * difference;
      reference_squared += want * want;
      const double allowance =
          native.empty() || !std::isfinite(native[i]) ? 0 : 2 * std::fabs(native[i] - want);
      if (difference > tolerances.atol + tolerances.rtol * std::fabs(want) + allowance) mismatch();
    }
  }
  if (reference_squared > 0) plain.rel_norm_error = std::sqrt(error_squared / reference_squared);
  return plain;
}

// Every figure equal; the norm bit for bit when the output fits in one chunk (then the chunked
// sum is the plain one), else to within summation order.
void ExpectMatchesPlain(const OutputComparison& result, const PlainComparison& plain,
                        int64_t count) {
  EXPECT_EQ(result.element_count, count);
  EXPECT_EQ(result.unwritten, plain.unwritten);
  EXPECT_EQ(result.mismatches, plain.mismatches);
  EXPECT_EQ(result.nan_reference, plain.nan_reference);
  EXPECT_EQ(result.max_abs_error, plain.max_abs_error);
  EXPECT_EQ(result.max_rel_error, plain.max_rel_error);
  if (count <= kChunk) {
    EXPECT_EQ(result.rel_norm_error, plain.rel_norm_error);
  } else {
    EXPECT_NEAR(result.rel_norm_error, plain.rel_norm_error, 1e-12 * plain.rel_norm_error);
  }
  const std::optional<int64_t> failed =
      plain.first_unwritten ? plain.first_unwritten : plain.first_mismatch;
  if (failed) {
    EXPECT_FALSE(result.passed);
    EXPECT_EQ(result.failed_index, failed);
  }
}

// Identical results, down to the failure message: what the judge reports cannot depend on how
// many threads compared.
void ExpectIdentical(const OutputComparison& a, const OutputComparison& b) {
  EXPECT_EQ(a.passed, b.passed);
  EXPECT_EQ(a.unwritten, b.unwritten);
  EXPECT_EQ(a.mismatches, b.mismatches);
  EXPECT_EQ(a.nan_reference, b.nan_reference);
  EXPECT_EQ(a.max_abs_error, b.max_abs_error);
  EXPECT_EQ(a.max_rel_error, b.max_rel_error);
  EXPECT_EQ(a.rel_norm_error, b.rel_norm_error);
  EXPECT_EQ(a.failed_index, b.failed_index);
  EXPECT_EQ(a.failure, b.failure);
}

// A random output of `count` elements in `dtype` that passes: the reference rounded to the dtype.
struct RandomOutput {
  HostTensor candidate;
  std::vector<double> reference;
};
RandomOutput MakeRandomOutput(DType dtype, std::vector<int64_t> shape, uint64_t seed,
                              std::vector<int64_t> strides = {}) {
  forge::v1::TensorSpec spec = Spec(dtype, shape);
  for (int64_t stride : strides) spec.add_strides(stride);
  RandomOutput output{*HostTensor::Allocate(spec), {}};
  std::mt19937_64 generator(seed);
  std::normal_distribution<double> normal(0.0, 2.0);
  output.reference.resize(output.candidate.element_count());
  for (size_t i = 0; i < output.reference.size(); ++i) {
    output.reference[i] = normal(generator);
    output.candidate.Set(static_cast<int64_t>(i), output.reference[i]);
  }
  return output;
}

void Poison(HostTensor& tensor, int64_t index) {
  const int element_bytes = *ElementBytes(tensor.spec.dtype());
  const forge::judge::Poison poison = PoisonFor(tensor.spec.dtype());
  std::byte* element = tensor.storage.data() + StorageOffsetOf(tensor.spec, index) * element_bytes;
  for (int offset = 0; offset < element_bytes; offset += poison.word_bytes) {
    std::memcpy(element + offset, &poison.word, poison.word_bytes);
  }
}

class ParallelCompareTest : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() {
    serial_ = new ThreadPool(1);
    for (int threads : {2, 3, 8}) pools_.push_back(std::make_unique<ThreadPool>(threads));
  }
  static void TearDownTestSuite() {
    pools_.clear();
    delete serial_;
  }

  // Compares on one thread and on each pool: identical results, which match the plain loop.
  static void ExpectSameOnEveryPool(const HostTensor& candidate,
                                    const std::vector<double>& reference,
                                    const Tolerances& tolerances,
                                    const std::vector<double>& native = {}) {
    const OutputComparison serial =
        CompareOutput(candidate, reference, tolerances, native, *serial_);
    ExpectMatchesPlain(serial, CompareElementByElement(candidate, reference, tolerances, native),
                       candidate.element_count());
    for (const auto& pool : pools_) {
      SCOPED_TRACE(absl::StrCat(pool->threads(), " threads"));
      ExpectIdentical(serial, CompareOutput(candidate, reference, tolerances, native, *pool));
    }
  }

  static inline ThreadPool* serial_ = nullptr;
  static inline std::vector<std::unique_ptr<ThreadPool>> pools_;
};

// Outputs of less than one chunk, exactly one, one more, and several with a ragged last chunk.
INSTANTIATE_TEST_SUITE_P(Sizes, ParallelCompareTest,
                         ::testing::Values(1000, kChunk, kChunk + 1, 5 * kChunk + 123));

TEST_P(ParallelCompareTest, RandomOutputsOfEveryFloatType) {
  for (DType dtype : {forge::v1::DTYPE_FLOAT64, forge::v1::DTYPE_FLOAT32, forge::v1::DTYPE_FLOAT16,
                      forge::v1::DTYPE_BFLOAT16, forge::v1::DTYPE_FLOAT8_E4M3FN}) {
    SCOPED_TRACE(forge::v1::DType_Name(dtype));
    RandomOutput output = MakeRandomOutput(dtype, {GetParam()}, 7);
    ExpectSameOnEveryPool(output.candidate, output.reference, DefaultTolerances(dtype));
    // Off by a little everywhere: every element mismatches under a tight tolerance.
    ExpectSameOnEveryPool(output.candidate, output.reference, {1e-12, 1e-12, 1e-12});
  }
}

TEST_P(ParallelCompareTest, FailuresAtChunkBoundariesAreFoundFirst) {
  const int64_t count = GetParam();
  const Tolerances tolerances = DefaultTolerances(forge::v1::DTYPE_FLOAT32);
  // Where a failure sits: the first and last element, either side of each chunk boundary.
  std::vector<int64_t> places = {0, count - 1};
  for (int64_t boundary = kChunk; boundary < count; boundary += kChunk) {
    places.insert(places.end(), {boundary - 1, boundary});
  }
  for (int64_t place : places) {
    SCOPED_TRACE(absl::StrCat("failure at ", place));
    RandomOutput output = MakeRandomOutput(forge::v1::DTYPE_FLOAT32, {count}, 11);
    // One wrong element.
    HostTensor wrong = output.candidate;
    wrong.Set(place, output.reference[place] + 0.5);
    ExpectSameOnEveryPool(wrong, output.reference, tolerances);
    // One unwritten element, with a mismatch before it: unwritten is reported first.
    HostTensor unwritten = output.candidate;
    Poison(unwritten, place);
    if (place > 0) unwritten.Set(0, output.reference[0] + 1);
    ExpectSameOnEveryPool(unwritten, output.reference, tolerances);
    EXPECT_EQ(CompareOutput(unwritten, output.reference, tolerances).failed_index, place);
    // A second failure later does not move the first.
    HostTensor two = wrong;
    if (place + 1 < count) two.Set(count - 1, output.reference[count - 1] - 3);
    ExpectSameOnEveryPool(two, output.reference, tolerances);
  }
}

TEST_P(ParallelCompareTest, NansInfinitiesAndEagersWidening) {
  const int64_t count = GetParam();
  RandomOutput output = MakeRandomOutput(forge::v1::DTYPE_BFLOAT16, {count}, 13);
  std::vector<double>& reference = output.reference;
  HostTensor& candidate = output.candidate;
  std::mt19937_64 generator(17);
  std::uniform_int_distribution<int64_t> anywhere(0, count - 1);
  for (int k = 0; k < 20; ++k) {
    const int64_t i = anywhere(generator);
    switch (k % 5) {
      case 0:  // a NaN reference the candidate matches
        reference[i] = kNan;
        candidate.Set(i, kNan);
        break;
      case 1:  // a NaN reference the candidate misses
        reference[i] = kNan;
        break;
      case 2:  // an infinity matched
        reference[i] = -kInf;
        candidate.Set(i, -kInf);
        break;
      case 3:  // an overflow where the reference is finite
        candidate.Set(i, kInf);
        break;
      default:  // a computed NaN (not the poison's pattern)
        candidate.Set(i, -kNan);
        break;
    }
  }
  const Tolerances tolerances = DefaultTolerances(forge::v1::DTYPE_BFLOAT16);
  ExpectSameOnEveryPool(candidate, reference, tolerances);
  std::vector<double> native(reference.size());
  std::uniform_real_distribution<double> eager_error(-0.05, 0.05);
  for (size_t i = 0; i < native.size(); ++i) native[i] = reference[i] + eager_error(generator);
  native[count / 2] = kInf;  // a non-finite native element widens nothing
  ExpectSameOnEveryPool(candidate, reference, tolerances, native);
}

TEST_P(ParallelCompareTest, StridedOutputsCompareInLogicalOrder) {
  const int64_t rows = GetParam() / 100 + 1;
  // Column-major storage of a [rows, 100] output.
  RandomOutput output = MakeRandomOutput(forge::v1::DTYPE_FLOAT32, {rows, 100}, 19, {1, rows});
  const Tolerances tolerances = DefaultTolerances(forge::v1::DTYPE_FLOAT32);
  ExpectSameOnEveryPool(output.candidate, output.reference, tolerances);
  HostTensor wrong = output.candidate;
  wrong.Set(rows * 100 - 2, 1e6);
  Poison(wrong, rows * 100 - 1);
  ExpectSameOnEveryPool(wrong, output.reference, tolerances);
  EXPECT_EQ(CompareOutput(wrong, output.reference, tolerances).failed_index, rows * 100 - 1);
}

TEST_P(ParallelCompareTest, FirstChangedElementIsTheSmallestOnEveryPool) {
  const int64_t count = GetParam();
  for (bool column_major : {false, true}) {
    const int64_t rows = column_major ? count / 10 : count;
    const std::vector<int64_t> shape = column_major ? std::vector<int64_t>{rows, 10}
                                                    : std::vector<int64_t>{count};
    const std::vector<int64_t> strides =
        column_major ? std::vector<int64_t>{1, rows} : std::vector<int64_t>{};
    const HostTensor before =
        MakeRandomOutput(forge::v1::DTYPE_FLOAT16, shape, 23, strides).candidate;
    const int64_t elements = before.element_count();
    EXPECT_EQ(FirstChangedElement(before.spec, before.storage, before.storage, *serial_),
              std::nullopt);
    for (int64_t place : {int64_t{0}, kChunk - 1, kChunk, elements - 1}) {
      if (place >= elements) continue;
      HostTensor after = before;
      after.Set(place, 12345.0);
      after.Set(elements - 1, -12345.0);  // a later change, in the last chunk
      EXPECT_EQ(FirstChangedElement(before.spec, before.storage, after.storage, *serial_), place);
      for (const auto& pool : pools_) {
        EXPECT_EQ(FirstChangedElement(before.spec, before.storage, after.storage, *pool), place)
            << pool->threads() << " threads, column-major " << column_major;
      }
    }
  }
}

TEST_P(ParallelCompareTest, ReductionsAreTheSameOnEveryPool) {
  const int64_t count = GetParam();
  const RandomOutput output = MakeRandomOutput(forge::v1::DTYPE_FLOAT32, {count}, 29);
  const std::vector<double> values = output.candidate.ToDoubles();
  std::vector<double> nearly(values.size());
  for (size_t i = 0; i < nearly.size(); ++i) nearly[i] = 1000 + 1e-3 * values[i];
  const Tolerances tolerances = DefaultTolerances(forge::v1::DTYPE_FLOAT32);

  EagerError serial_error;
  serial_error.Add(values, output.reference, *serial_);
  const double serial_norm = RelativeNormError(values, output.reference, *serial_);
  const VariationComparison serial_variation =
      CompareVariation(values, output.reference, nearly, *serial_);
  EXPECT_EQ(DecodeElements(output.candidate.spec, output.candidate.storage, *serial_), values);
  EXPECT_TRUE(IsNearConstant(nearly, tolerances, *serial_));
  for (const auto& pool : pools_) {
    SCOPED_TRACE(absl::StrCat(pool->threads(), " threads"));
    EXPECT_EQ(RelativeNormError(values, output.reference, *pool), serial_norm);
    EXPECT_EQ(Mean(values, *pool), Mean(values, *serial_));
    EagerError error;
    error.Add(values, output.reference, *pool);
    EXPECT_EQ(error.max_abs, serial_error.max_abs);
    EXPECT_EQ(error.rel_norm, serial_error.rel_norm);
    const VariationComparison variation =
        CompareVariation(values, output.reference, nearly, *pool);
    EXPECT_EQ(variation.relative_error, serial_variation.relative_error);
    EXPECT_EQ(variation.passed, serial_variation.passed);
    EXPECT_EQ(DecodeElements(output.candidate.spec, output.candidate.storage, *pool), values);
    EXPECT_FALSE(IsNearConstant(values, tolerances, *pool));
    EXPECT_TRUE(IsNearConstant(nearly, tolerances, *pool));
    // One element far from the mean, in the last chunk, is enough.
    std::vector<double> one_off = nearly;
    one_off.back() = 2000;
    EXPECT_FALSE(IsNearConstant(one_off, tolerances, *pool));
    EXPECT_TRUE(AgreeWithin(nearly, nearly, tolerances, *pool));
    EXPECT_FALSE(AgreeWithin(nearly, one_off, tolerances, *pool));
  }
  // The max eager error is exact; the norm matches the plain loop to within summation order.
  double max_abs = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(values[i] - output.reference[i]));
  }
  EXPECT_EQ(serial_error.max_abs, max_abs);
}

TEST(CompareOutputTest, StorageOfTheWrongSizeFails) {
  const HostTensor candidate = Candidate(forge::v1::DTYPE_FLOAT32, Reference());
  const absl::Span<const std::byte> short_storage(candidate.storage.data(),
                                                  candidate.storage.size() - 4);
  OutputComparison result = CompareOutput(candidate.spec, short_storage, Reference(),
                                          DefaultTolerances(forge::v1::DTYPE_FLOAT32));
  EXPECT_FALSE(result.passed);
  EXPECT_TRUE(absl::StrContains(result.failure, "is stored in 164 bytes, not 168"))
      << result.failure;
}

}  // namespace
}  // namespace forge::judge
