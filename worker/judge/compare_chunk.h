// The judge's rule for one output element, and the tally of a chunk of elements. Compiled twice:
// by the host compiler into compare.cc, and as source text by NVRTC into the device comparison
// kernels (device_compare.cc), so that a chunk tallied on the GPU equals the host's tally bit for
// bit (same operations in the same order; the device module is built without FMA contraction).
// Plain C++ that NVRTC accepts without headers: no standard library, `long long` for indices.
#ifndef FORGE_WORKER_JUDGE_COMPARE_CHUNK_H_
#define FORGE_WORKER_JUDGE_COMPARE_CHUNK_H_

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define FORGE_HOST_DEVICE __host__ __device__
#else
#define FORGE_HOST_DEVICE
#include <math.h>
#endif

namespace forge::judge {

constexpr long long kNoElement = 0x7FFFFFFFFFFFFFFFll;

// What the comparison finds in one chunk of an output's elements.
struct ChunkTally {
  long long unwritten = 0;      // elements still holding the poison where the reference is finite
  long long mismatches = 0;     // written elements outside the tolerance
  long long nan_reference = 0;  // elements whose reference is NaN
  long long first_unwritten = kNoElement;
  long long first_mismatch = kNoElement;
  double max_abs_error = 0;
  double max_rel_error = 0;
  double error_norm_squared = 0;
  double reference_norm_squared = 0;
};

FORGE_HOST_DEVICE inline bool IsNanValue(double x) { return x != x; }
// inf - inf is NaN; a finite x gives 0.
FORGE_HOST_DEVICE inline bool IsInfValue(double x) { return !IsNanValue(x) && x - x != 0; }
FORGE_HOST_DEVICE inline double LargerOf(double a, double b) { return a < b ? b : a; }
FORGE_HOST_DEVICE inline long long SmallerIndex(long long a, long long b) { return b < a ? b : a; }

// Adds element `index` to `tally`: the candidate's value `got` (`poisoned` when its bits are the
// poison's), the float64 reference `want` and, when the task's tolerance is widened by eager's
// error, eager's value `native` (`has_native`). The reference is taken as the output dtype stores
// it where it leaves the dtype's range: a finite `want` of magnitude `overflow` or more
// (OverflowThreshold: what rounds to infinity, nearest-even) is that dtype's infinity of its
// sign. A NaN reference accepts only a NaN; an infinite one (or one rounded to infinity) only the
// same infinity; a finite one |got - want| <= atol + rtol * |want| + twice eager's own error
// there, so an infinite or NaN `got` fails wherever the rounded reference is finite.
FORGE_HOST_DEVICE inline void TallyElement(long long index, double got, bool poisoned, double want,
                                           bool has_native, double native, double atol, double rtol,
                                           double overflow, ChunkTally& tally) {
  if (IsNanValue(want)) {
    ++tally.nan_reference;
    if (!IsNanValue(got)) {
      ++tally.mismatches;
      tally.first_mismatch = SmallerIndex(tally.first_mismatch, index);
    }
    return;
  }
  if (poisoned) {
    ++tally.unwritten;
    tally.first_unwritten = SmallerIndex(tally.first_unwritten, index);
    return;
  }
  if (!IsInfValue(want) && fabs(want) >= overflow) want = want > 0 ? 1.0 / 0.0 : -1.0 / 0.0;
  if (IsInfValue(want) || IsInfValue(got) || IsNanValue(got)) {
    if (got != want) {
      ++tally.mismatches;
      tally.first_mismatch = SmallerIndex(tally.first_mismatch, index);
      tally.max_abs_error = 1.0 / 0.0;
    }
    return;
  }
  const double difference = fabs(got - want);
  tally.max_abs_error = LargerOf(tally.max_abs_error, difference);
  if (want != 0) tally.max_rel_error = LargerOf(tally.max_rel_error, difference / fabs(want));
  tally.error_norm_squared += difference * difference;
  tally.reference_norm_squared += want * want;
  const double bound = atol + rtol * fabs(want);
  const double allowance =
      has_native && !IsNanValue(native) && !IsInfValue(native) ? 2 * fabs(native - want) : 0;
  if (difference > bound + allowance) {
    ++tally.mismatches;
    tally.first_mismatch = SmallerIndex(tally.first_mismatch, index);
  }
}

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_COMPARE_CHUNK_H_
