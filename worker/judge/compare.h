// The judge's comparison core, pure CPU: a candidate's output (as the kernel stored it) against the
// float64 reference, with per-dtype tolerances, a relative-norm bound, detection of elements the
// kernel never wrote (still holding the NaN poison), and the checks that keep a constant output
// from passing a task whose reference is nearly constant. Every pass over the elements runs in
// chunks on a ThreadPool (thread_pool.h): counts, maxima and first indices come out exactly as one
// loop over the elements gives them, and sums (norms, means) add the chunks' sums in chunk order,
// the same for any number of threads. Up to ThreadPool::kChunkElements elements that is the plain
// loop's sum; beyond, a relative-norm error or a mean can differ from it in the last bits (the
// summation order), so only a figure within an ulp or so of its bound could come out otherwise.
#ifndef FORGE_WORKER_JUDGE_COMPARE_H_
#define FORGE_WORKER_JUDGE_COMPARE_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "forge/v1/graph.pb.h"
#include "worker/judge/compare_chunk.h"
#include "worker/judge/host_tensor.h"
#include "worker/judge/thread_pool.h"

namespace forge::judge {

// An element passes when |candidate - reference| <= atol + rtol * |reference|; an output passes
// when, in addition, ||candidate - reference||_2 / ||reference||_2 <= rel_norm.
struct Tolerances {
  double atol = 0;
  double rtol = 0;
  double rel_norm = 0;
};

// float64: 1e-7; float32: 1e-4 (no TF32 shortcut passes unless it meets it); float16 and
// bfloat16: 1e-2; float8: 1e-1 (about one ulp of e4m3). Integers and bool compare exactly.
// The relative-norm bound equals rtol: a correct kernel sits orders of magnitude below it, and
// outputs whose values all hide under atol (a zero output where the reference is ~1e-9) fail it.
Tolerances DefaultTolerances(forge::v1::DType dtype);

// The tolerances output values are compared with: `tolerances` with atol multiplied by the
// reference's root mean square when that exceeds 1. A sum of many terms (a matrix product, a
// convolution, a cumulative sum) rounds with an error proportional to the size of its terms, not
// of its result: where the terms cancel, the result is near 0 and an atol in absolute units fails
// even cuBLAS's float32 product (K = 8192 on normal(0, 1) inputs: errors to 1.6e-4, against a
// result RMS of 91). Scaled, atol is a fraction of the output's typical magnitude, as the
// relative-norm bound is; TF32 still fails float32's (its rounding is ~3e-4 of that magnitude).
Tolerances ScaledToReference(const Tolerances& tolerances, double reference_rms);

// The magnitude from which a float64 value rounds to infinity when stored as `dtype` (round to
// nearest, ties to even, as RoundToDType): the largest finite value plus half its ulp — float16
// 65520, float8_e5m2 61440, bfloat16 2^128 - 2^119, float32 2^128 - 2^103. Infinity for float64
// (the reference's own type), integers, bool and float8_e4m3fn (which has no infinity: what
// overflows it is NaN, and its references are compared as they are). The comparison takes a
// reference at or beyond it as the infinity the dtype stores (TallyElement): a float16 output
// whose float64 reference is 1e228 must be +inf.
double OverflowThreshold(forge::v1::DType dtype);

// sqrt(mean(v^2)) over the finite elements of `values` of magnitude below `limit`; 0 when there
// are none. With `limit` = OverflowThreshold(the output's dtype), a reference value that the
// dtype stores as infinity (1e228 for float16) does not scale every other element's atol.
double RootMeanSquare(absl::Span<const double> values, ThreadPool& pool = ThreadPool::Default(),
                      double limit = std::numeric_limits<double>::infinity());

// How the judge fills an output before each launch: a word of `word_bytes` bytes repeated. For
// floating types the pattern is a quiet NaN of the dtype (0x7FC00000 for float32, 0x7E00 for
// float16, 0x7FC0 for bfloat16, 0x7FF8 repeated for float64, 0x7F for float8); integers and bool,
// which have no NaN, get the byte 0xA5 (a bool that is neither 0 nor 1).
struct Poison {
  int word_bytes;
  uint32_t word;
};
Poison PoisonFor(forge::v1::DType dtype);
// The poison of an element of `dtype` that is `element_bytes` (at most 8) wide: its words laid side
// by side, read as a little-endian integer.
uint64_t PoisonElementBits(forge::v1::DType dtype, int element_bytes);
// True when the element at `element` holds exactly the poison's bytes.
bool IsPoison(forge::v1::DType dtype, const std::byte* element);

// The poison of launch `launch` of a judge seeded with `seed`: a different pattern every launch, so
// that a kernel cannot recognize it (test its output for the poison and compute differently) or
// rely on what an earlier launch left behind. Even launches get a NaN with a random payload and
// sign (any NaN encoding of the dtype, quiet or signaling; float8 e4m3 has only 0x7F and 0xFF),
// odd ones large finite garbage of random sign (float32 and bfloat16 above 1e33, float16 above
// 8192, float64 above 1e295, float8 near its largest value); integers and bool keep PoisonFor's
// 0xA5 (every pattern is a valid integer). The same arguments give the same poison. float64
// elements take a 4-byte word twice (a NaN or a finite value however the words are read).
Poison ChoosePoison(forge::v1::DType dtype, uint64_t seed, int64_t launch);
// The element of `element_bytes` (at most 8) bytes that `poison` fills: its words side by side,
// read as a little-endian integer.
uint64_t PoisonElementBits(const Poison& poison, int element_bytes);
// "NaN 0x7f812345", "finite 0x7e9a3bc1 (1.03e+38)": the poison's element, for failure messages.
std::string DescribePoison(forge::v1::DType dtype, const Poison& poison);

struct OutputComparison {
  bool passed = true;
  int64_t element_count = 0;
  int64_t unwritten = 0;   // elements still holding the poison where the reference is finite
  int64_t mismatches = 0;  // written elements outside the tolerance
  int64_t nan_reference = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;   // over elements with a non-zero reference
  double rel_norm_error = 0;  // 0 when the reference's norm is 0 (then not checked)
  // Logical (row-major) index of the element the failure message names.
  std::optional<int64_t> failed_index;
  // Why it failed, one line: "element 1003 [1, 0] never written (still holds the poison, NaN
  // 0x7fc00000); 1002000 of 1003000 elements unwritten". Empty when passed.
  std::string failure;
};

// Compares every logical element of `candidate` with `reference` (row-major float64, one value per
// element). A NaN reference element accepts only a NaN; an infinite one only the same infinity,
// and so does a finite one the output's dtype cannot hold (OverflowThreshold: it stores it as
// that infinity).
// Unwritten elements are reported before mismatches, mismatches before the norm bound.
//
// `native_reference`, when not empty, is the same ops run by ATen in the task's own dtypes (what
// eager computes, rounding every bf16/fp16/fp8 intermediate). Where the two terms of a result
// nearly cancel, eager itself misses the float64 value by far more than the dtype's tolerance; a
// candidate as accurate as eager must pass. So the element bound becomes
// atol + rtol * |reference| + 2 * |native - reference| and the norm bound
// max(rel_norm, 2 * RelativeNormError(native, reference)). A non-finite native element widens
// nothing. The widening applies only where eager is accurate enough to judge by
// (EagerAccurateEnough): where eager loses the result (bfloat16 `(x + 65536) - 65536` is 0, an
// error of |x|), twice its error would admit any alpha * x with alpha in (-1, 3), zeros included;
// there the output is compared with float64 alone.
//
// `poison` is what the output was filled with before the launch (ChoosePoison); unset: PoisonFor.
OutputComparison CompareOutput(const HostTensor& candidate, absl::Span<const double> reference,
                               const Tolerances& tolerances,
                               absl::Span<const double> native_reference = {},
                               ThreadPool& pool = ThreadPool::Default(),
                               std::optional<Poison> poison = std::nullopt);
// The same for an output stored elsewhere (a staging buffer): `storage` holds the bytes of
// StorageElementCount(spec) elements.
OutputComparison CompareOutput(const forge::v1::TensorSpec& spec,
                               absl::Span<const std::byte> storage,
                               absl::Span<const double> reference, const Tolerances& tolerances,
                               absl::Span<const double> native_reference = {},
                               ThreadPool& pool = ThreadPool::Default(),
                               std::optional<Poison> poison = std::nullopt);

// The largest relative-norm error (RelativeNormError(native, reference)) at which eager still
// widens the tolerance. The widened norm bound is then at most 2 * 0.1 = 0.2: an output of zeros
// (relative error 1), a flipped sign (2) or one scaled by alpha with |1 - alpha| > 0.2 fails.
inline constexpr double kMaxTrustedEagerError = 0.1;
// Whether eager's output, `eager_rel_norm_error` from float64, is accurate enough for its error to
// widen the tolerance: at most kMaxTrustedEagerError (and not NaN).
bool EagerAccurateEnough(double eager_rel_norm_error);

// The relative-norm bound of an output whose tolerance is widened by eager's own error:
// max(tolerances.rel_norm, 2 * RelativeNormError(native, reference)) where EagerAccurateEnough,
// else tolerances.rel_norm.
double WidenedRelNormBound(const Tolerances& tolerances, double eager_rel_norm_error);

// CompareOutput's figures from the chunk tallies (compare_chunk.h; ThreadPool::kChunkElements
// elements each, in order) of an output compared elsewhere, e.g. on the device: the counts, the
// maxima, the relative-norm error and whether it passed the element rule and `rel_norm_bound`.
// When it did not pass, `failure` and `failed_index` stay empty: CompareOutput on the host names
// the failure.
OutputComparison SummarizeTallies(absl::Span<const ChunkTally> tallies, int64_t element_count,
                                  double rel_norm_bound);

// Whether storage offset i is logical element i for every element of `spec`: no strides (or not
// one per dimension: EffectiveStrides), or the row-major ones wherever a dimension has more than
// one element.
bool IsRowMajor(const forge::v1::TensorSpec& spec);

// DecodeElement of every bit pattern of a 1- or 2-byte dtype, indexed by the element's bits (2^8
// or 2^16 values): the comparison's decoding of those dtypes, host and device alike. Empty for
// wider dtypes.
absl::Span<const double> DecodeTableOf(forge::v1::DType dtype);

// The first logical element (row-major) whose stored bytes differ between `before` and `after`,
// two storages of `spec` (each StorageElementCount(spec) elements); nullopt when none does. Bytes
// a strided spec skips are not compared.
std::optional<int64_t> FirstChangedElement(const forge::v1::TensorSpec& spec,
                                           absl::Span<const std::byte> before,
                                           absl::Span<const std::byte> after,
                                           ThreadPool& pool = ThreadPool::Default());

// Every logical element of the storage of `spec` as a double, in row-major order (what
// HostTensor::ToDoubles gives for a HostTensor with this storage).
std::vector<double> DecodeElements(const forge::v1::TensorSpec& spec,
                                   absl::Span<const std::byte> storage,
                                   ThreadPool& pool = ThreadPool::Default());

// The mean of `values` (0 when empty), summed as ChunkedSum does.
double Mean(absl::Span<const double> values, ThreadPool& pool = ThreadPool::Default());

// ||values - reference||_2 / ||reference||_2 over elements finite in both; 0 when that norm of the
// reference is 0.
double RelativeNormError(absl::Span<const double> values, absl::Span<const double> reference,
                         ThreadPool& pool = ThreadPool::Default());

// How far eager's native-precision outputs stray from the float64 reference, accumulated over
// draws: the size of the widening CompareOutput applies, for the judge's evidence.
struct EagerError {
  double max_abs = 0;   // max |native - reference| over finite elements
  double rel_norm = 0;  // max RelativeNormError(native, reference)

  void Add(absl::Span<const double> native_reference, absl::Span<const double> reference,
           ThreadPool& pool = ThreadPool::Default());
  // Accumulates the error another EagerError found (another draw's, as Add gave it).
  void Merge(const EagerError& other);
  // "tolerance widened by eager's own error (ATen in the task's dtypes vs float64): max 0.0147,
  // relative norm 0.0113"; empty when eager matched float64 exactly (nothing was widened). Where
  // eager is not EagerAccurateEnough on some draw, the note says that eager's error widened
  // nothing there.
  std::string Note() const;
};

// True when a constant could stand in for `values` within the tolerances: every element lies within
// atol + rtol * |v| of the mean. Such an output is flagged and its variation checked separately.
bool IsNearConstant(absl::Span<const double> values, const Tolerances& tolerances,
                    ThreadPool& pool = ThreadPool::Default());
// True when `a` and `b` agree element-wise within the tolerances (a reference that did not change
// between two input draws).
bool AgreeWithin(absl::Span<const double> a, absl::Span<const double> b,
                 const Tolerances& tolerances, ThreadPool& pool = ThreadPool::Default());

struct VariationComparison {
  // False when the reference's variation vanishes once rounded to the output dtype (keeps less
  // than a thousandth of its norm): a constant candidate is then as good as any, and nothing is
  // checked.
  bool representable = false;
  bool passed = true;
  // ||candidate variation - reference variation|| / ||reference variation||.
  double relative_error = 0;
};

// Whether the candidate reproduces the reference's variation. `candidate_variation` and
// `reference_variation` are matching deviations: each output minus its mean (variation within an
// output), or one draw's output minus another's (variation across draws). `rounded_variation` is
// the reference variation computed from reference values rounded to the output dtype. Passes when
// the error is at most half the reference variation plus twice the rounding noise; a constant
// candidate (zero variation) has error 1 and fails wherever the variation is representable.
VariationComparison CompareVariation(absl::Span<const double> candidate_variation,
                                     absl::Span<const double> reference_variation,
                                     absl::Span<const double> rounded_variation,
                                     ThreadPool& pool = ThreadPool::Default());

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_COMPARE_H_
