#include "worker/judge/compare.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/judge/compare_chunk.h"

namespace forge::judge {
namespace {

using forge::v1::DType;

constexpr int64_t kNoIndex = std::numeric_limits<int64_t>::max();
static_assert(kNoIndex == kNoElement);

double Bound(double reference, const Tolerances& tolerances) {
  return tolerances.atol + tolerances.rtol * std::fabs(reference);
}

bool WithinTolerance(double candidate, double reference, const Tolerances& tolerances) {
  return std::fabs(candidate - reference) <= Bound(reference, tolerances);
}

// Two sums over [0, count) in one pass, chunked as ChunkedSum: add_terms(i, first, second) adds
// element i's terms to the running sums.
template <typename AddTerms>
std::pair<double, double> ChunkedSums(ThreadPool& pool, int64_t count, const AddTerms& add_terms) {
  std::vector<std::pair<double, double>> sums(ThreadPool::ChunkCount(count));
  pool.ForEachChunk(count, [&](int64_t chunk, int64_t begin, int64_t end) {
    double first = 0;
    double second = 0;
    for (int64_t i = begin; i < end; ++i) add_terms(i, first, second);
    sums[chunk] = {first, second};
  });
  std::pair<double, double> total{0, 0};
  for (const auto& [first, second] : sums) {
    total.first += first;
    total.second += second;
  }
  return total;
}

double Norm(absl::Span<const double> values, ThreadPool& pool) {
  return std::sqrt(ChunkedSum(pool, static_cast<int64_t>(values.size()),
                              [&](int64_t i) { return values[i] * values[i]; }));
}

// Whether matches(i) holds for some i in [0, count); chunks stop early once one has been found.
template <typename Predicate>
bool AnyElement(ThreadPool& pool, int64_t count, const Predicate& matches) {
  std::atomic<bool> found{false};
  pool.ForEachChunk(count, [&](int64_t, int64_t begin, int64_t end) {
    if (found.load(std::memory_order_relaxed)) return;
    for (int64_t i = begin; i < end; ++i) {
      if (matches(i)) {
        found.store(true, std::memory_order_relaxed);
        return;
      }
    }
  });
  return found.load();
}

// Lowers `smallest` to `value` unless it is already lower.
void StoreMin(std::atomic<int64_t>& smallest, int64_t value) {
  int64_t current = smallest.load(std::memory_order_relaxed);
  while (value < current &&
         !smallest.compare_exchange_weak(current, value, std::memory_order_relaxed)) {
  }
}

// ---- Reading stored elements without a dispatch per element ----
//
// A codec reads an element's bits (an unsigned integer as wide as the element) and turns them into
// the double DecodeElement gives: float32 and float64 directly, 1- and 2-byte dtypes through a
// table that DecodeElement filled for every bit pattern, the rest through DecodeElement itself.

template <typename Bits>
Bits LoadBits(const std::byte* element) {
  Bits bits;
  std::memcpy(&bits, element, sizeof(Bits));
  return bits;
}

struct Float32Codec {
  using Bits = uint32_t;
  double operator()(Bits bits) const {
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  }
};

struct Float64Codec {
  using Bits = uint64_t;
  double operator()(Bits bits) const {
    double value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  }
};

template <typename TableBits>
struct TableCodec {
  using Bits = TableBits;
  const double* table;
  double operator()(Bits bits) const { return table[bits]; }
};

template <typename WideBits>
struct DecodeElementCodec {
  using Bits = WideBits;
  DType dtype;
  double operator()(Bits bits) const {
    std::byte element[sizeof(Bits)];
    std::memcpy(element, &bits, sizeof(Bits));
    return DecodeElement(dtype, element);
  }
};

// DecodeElement of every bit pattern of a 1- or 2-byte dtype; built once per dtype.
template <DType kDType, typename Bits>
const double* DecodeTable() {
  static const std::vector<double>* const table = [] {
    auto* values = new std::vector<double>(size_t{1} << (8 * sizeof(Bits)));
    for (size_t bits = 0; bits < values->size(); ++bits) {
      const Bits stored = static_cast<Bits>(bits);
      std::byte element[sizeof(Bits)];
      std::memcpy(element, &stored, sizeof(Bits));
      (*values)[bits] = DecodeElement(kDType, element);
    }
    return values;
  }();
  return table->data();
}

// Calls visit(codec) with the codec of `dtype`, which must have an element size.
template <typename Visit>
auto WithCodec(DType dtype, const Visit& visit) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT32: return visit(Float32Codec{});
    case forge::v1::DTYPE_FLOAT64: return visit(Float64Codec{});
    case forge::v1::DTYPE_FLOAT16:
      return visit(TableCodec<uint16_t>{DecodeTable<forge::v1::DTYPE_FLOAT16, uint16_t>()});
    case forge::v1::DTYPE_BFLOAT16:
      return visit(TableCodec<uint16_t>{DecodeTable<forge::v1::DTYPE_BFLOAT16, uint16_t>()});
    case forge::v1::DTYPE_INT16:
      return visit(TableCodec<uint16_t>{DecodeTable<forge::v1::DTYPE_INT16, uint16_t>()});
    case forge::v1::DTYPE_FLOAT8_E4M3FN:
      return visit(TableCodec<uint8_t>{DecodeTable<forge::v1::DTYPE_FLOAT8_E4M3FN, uint8_t>()});
    case forge::v1::DTYPE_FLOAT8_E5M2:
      return visit(TableCodec<uint8_t>{DecodeTable<forge::v1::DTYPE_FLOAT8_E5M2, uint8_t>()});
    case forge::v1::DTYPE_INT8:
      return visit(TableCodec<uint8_t>{DecodeTable<forge::v1::DTYPE_INT8, uint8_t>()});
    case forge::v1::DTYPE_UINT8:
      return visit(TableCodec<uint8_t>{DecodeTable<forge::v1::DTYPE_UINT8, uint8_t>()});
    case forge::v1::DTYPE_BOOL:
      return visit(TableCodec<uint8_t>{DecodeTable<forge::v1::DTYPE_BOOL, uint8_t>()});
    case forge::v1::DTYPE_INT32: return visit(DecodeElementCodec<uint32_t>{dtype});
    default: return visit(DecodeElementCodec<uint64_t>{dtype});  // int64, complex64
  }
}

// Calls visit(offset_of) with a function from logical index to storage offset (in elements).
template <typename Visit>
auto WithOffsets(const forge::v1::TensorSpec& spec, const Visit& visit) {
  if (IsRowMajor(spec)) return visit([](int64_t index) { return index; });
  return visit([&spec](int64_t index) { return StorageOffsetOf(spec, index); });
}

// CompareOutput's look at elements [begin, end).
template <typename Codec, typename OffsetOf>
ChunkTally CompareChunk(const Codec& decode, const OffsetOf& offset_of, typename Codec::Bits poison,
                        const std::byte* storage, absl::Span<const double> reference,
                        const Tolerances& tolerances, absl::Span<const double> native_reference,
                        double overflow, int64_t begin, int64_t end) {
  using Bits = typename Codec::Bits;
  const bool has_native = !native_reference.empty();
  ChunkTally tally;
  for (int64_t i = begin; i < end; ++i) {
    const Bits bits = LoadBits<Bits>(storage + offset_of(i) * sizeof(Bits));
    TallyElement(i, decode(bits), bits == poison, reference[i], has_native,
                 has_native ? native_reference[i] : 0, tolerances.atol, tolerances.rtol, overflow,
                 tally);
  }
  return tally;
}

// The tallies of consecutive chunks as one: counts added, first indices and maxima kept, sums
// added in chunk order.
ChunkTally AddTallies(absl::Span<const ChunkTally> tallies) {
  ChunkTally total;
  for (const ChunkTally& tally : tallies) {
    total.unwritten += tally.unwritten;
    total.mismatches += tally.mismatches;
    total.nan_reference += tally.nan_reference;
    total.first_unwritten = std::min(total.first_unwritten, tally.first_unwritten);
    total.first_mismatch = std::min(total.first_mismatch, tally.first_mismatch);
    total.max_abs_error = std::max(total.max_abs_error, tally.max_abs_error);
    total.max_rel_error = std::max(total.max_rel_error, tally.max_rel_error);
    total.error_norm_squared += tally.error_norm_squared;
    total.reference_norm_squared += tally.reference_norm_squared;
  }
  return total;
}

// SummarizeTallies of the tallies that add up to `total`.
OutputComparison SummarizeTotal(const ChunkTally& total, int64_t element_count,
                                double rel_norm_bound) {
  OutputComparison result;
  result.element_count = element_count;
  result.unwritten = total.unwritten;
  result.mismatches = total.mismatches;
  result.nan_reference = total.nan_reference;
  result.max_abs_error = total.max_abs_error;
  result.max_rel_error = total.max_rel_error;
  if (total.reference_norm_squared > 0) {
    result.rel_norm_error = std::sqrt(total.error_norm_squared / total.reference_norm_squared);
  }
  result.passed = total.first_unwritten == kNoIndex && total.first_mismatch == kNoIndex &&
                  !(result.rel_norm_error > rel_norm_bound);
  return result;
}

}  // namespace

bool IsRowMajor(const forge::v1::TensorSpec& spec) {
  if (spec.strides_size() != spec.shape_size()) return true;
  int64_t stride = 1;
  for (int i = spec.shape_size() - 1; i >= 0; --i) {
    if (spec.shape(i) > 1 && spec.strides(i) != stride) return false;
    stride *= spec.shape(i);
  }
  return true;
}

absl::Span<const double> DecodeTableOf(DType dtype) {
  auto table = [](const double* values, size_t size) { return absl::Span<const double>(values, size); };
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT16:
      return table(DecodeTable<forge::v1::DTYPE_FLOAT16, uint16_t>(), 1 << 16);
    case forge::v1::DTYPE_BFLOAT16:
      return table(DecodeTable<forge::v1::DTYPE_BFLOAT16, uint16_t>(), 1 << 16);
    case forge::v1::DTYPE_INT16:
      return table(DecodeTable<forge::v1::DTYPE_INT16, uint16_t>(), 1 << 16);
    case forge::v1::DTYPE_FLOAT8_E4M3FN:
      return table(DecodeTable<forge::v1::DTYPE_FLOAT8_E4M3FN, uint8_t>(), 1 << 8);
    case forge::v1::DTYPE_FLOAT8_E5M2:
      return table(DecodeTable<forge::v1::DTYPE_FLOAT8_E5M2, uint8_t>(), 1 << 8);
    case forge::v1::DTYPE_INT8:
      return table(DecodeTable<forge::v1::DTYPE_INT8, uint8_t>(), 1 << 8);
    case forge::v1::DTYPE_UINT8:
      return table(DecodeTable<forge::v1::DTYPE_UINT8, uint8_t>(), 1 << 8);
    case forge::v1::DTYPE_BOOL:
      return table(DecodeTable<forge::v1::DTYPE_BOOL, uint8_t>(), 1 << 8);
    default:
      return {};
  }
}

bool EagerAccurateEnough(double eager_rel_norm_error) {
  return eager_rel_norm_error <= kMaxTrustedEagerError;
}

double WidenedRelNormBound(const Tolerances& tolerances, double eager_rel_norm_error) {
  if (!EagerAccurateEnough(eager_rel_norm_error)) return tolerances.rel_norm;
  return std::max(tolerances.rel_norm, 2 * eager_rel_norm_error);
}

OutputComparison SummarizeTallies(absl::Span<const ChunkTally> tallies, int64_t element_count,
                                  double rel_norm_bound) {
  return SummarizeTotal(AddTallies(tallies), element_count, rel_norm_bound);
}

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

Tolerances ScaledToReference(const Tolerances& tolerances, double reference_rms) {
  Tolerances scaled = tolerances;
  scaled.atol *= std::max(1.0, reference_rms);
  return scaled;
}

double OverflowThreshold(DType dtype) {
  // (largest finite, ulp of the largest finite) of the dtypes with infinities.
  auto threshold = [](double largest, double ulp) { return largest + ulp / 2; };
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT32:
      return threshold(std::numeric_limits<float>::max(), std::ldexp(1.0, 104));
    case forge::v1::DTYPE_BFLOAT16:
      return threshold(std::ldexp(255.0, 120), std::ldexp(1.0, 120));
    case forge::v1::DTYPE_FLOAT16:
      return threshold(65504.0, 32.0);
    case forge::v1::DTYPE_FLOAT8_E5M2:
      return threshold(57344.0, 8192.0);
    default:
      return std::numeric_limits<double>::infinity();
  }
}

double RootMeanSquare(absl::Span<const double> values, ThreadPool& pool, double limit) {
  const auto [squares, finite] = ChunkedSums(
      pool, static_cast<int64_t>(values.size()), [&](int64_t i, double& square_sum, double& count) {
        if (!std::isfinite(values[i]) || !(std::fabs(values[i]) < limit)) return;
        square_sum += values[i] * values[i];
        count += 1;
      });
  return finite > 0 ? std::sqrt(squares / finite) : 0;
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

uint64_t PoisonElementBits(DType dtype, int element_bytes) {
  return PoisonElementBits(PoisonFor(dtype), element_bytes);
}

uint64_t PoisonElementBits(const Poison& poison, int element_bytes) {
  std::byte element[sizeof(uint64_t)] = {};
  for (int offset = 0; offset < element_bytes; offset += poison.word_bytes) {
    std::memcpy(element + offset, &poison.word, poison.word_bytes);
  }
  uint64_t bits = 0;
  std::memcpy(&bits, element, element_bytes);
  return bits;
}

Poison ChoosePoison(DType dtype, uint64_t seed, int64_t launch) {
  // splitmix64 of the seed and the launch: nearby launches give unrelated patterns.
  uint64_t state = seed ^ (static_cast<uint64_t>(launch) * 0x9E3779B97F4A7C15ull);
  auto next = [&state] {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  const bool nan = launch % 2 == 0;
  // A NaN: every exponent bit set, a non-zero random payload below it. Garbage: an exponent drawn
  // from the top ones below all-ones (`lowest_exponent` up), a random mantissa. Both with a random
  // sign; `bits` wide, `mantissa_bits` of mantissa.
  auto pattern = [&](int bits, int mantissa_bits, uint32_t lowest_exponent) {
    const uint32_t sign = static_cast<uint32_t>(next() & 1) << (bits - 1);
    const uint32_t all_ones = (uint32_t{1} << (bits - 1 - mantissa_bits)) - 1;
    const uint32_t mantissa_mask = (uint32_t{1} << mantissa_bits) - 1;
    if (nan) {
      const uint32_t payload = static_cast<uint32_t>(next() % mantissa_mask) + 1;
      return sign | (all_ones << mantissa_bits) | payload;
    }
    const uint32_t exponent =
        lowest_exponent + static_cast<uint32_t>(next() % (all_ones - lowest_exponent));
    return sign | (exponent << mantissa_bits) | (static_cast<uint32_t>(next()) & mantissa_mask);
  };
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT32:
      return {4, pattern(32, 23, 0xF0)};
    case forge::v1::DTYPE_FLOAT64:
      // The high word decides: its 20 mantissa bits and the low word (the same word, non-zero)
      // form the payload of a NaN, or the mantissa of a finite value.
      return {4, pattern(32, 20, 0x7E0)};
    case forge::v1::DTYPE_FLOAT16:
      return {2, pattern(16, 10, 0x1C)};
    case forge::v1::DTYPE_BFLOAT16:
      return {2, pattern(16, 7, 0xF0)};
    case forge::v1::DTYPE_FLOAT8_E4M3FN: {
      // NaN is S.1111.111 alone; garbage 256 to 448 (exponent 15, mantissa not all ones).
      const uint32_t sign = static_cast<uint32_t>(next() & 1) << 7;
      return {1, sign | (nan ? 0x7Fu : 0x78u | static_cast<uint32_t>(next() % 7))};
    }
    case forge::v1::DTYPE_FLOAT8_E5M2:
      return {1, pattern(8, 2, 0x1D)};
    default:
      return PoisonFor(dtype);
  }
}

std::string DescribePoison(DType dtype, const Poison& poison) {
  absl::StatusOr<int> element_bytes = ElementBytes(dtype);
  if (!element_bytes.ok()) return "";
  const uint64_t bits = PoisonElementBits(poison, *element_bytes);
  std::byte element[sizeof(uint64_t)];
  std::memcpy(element, &bits, sizeof(bits));
  const double value = DecodeElement(dtype, element);
  if (std::isnan(value)) return absl::StrFormat("NaN 0x%0*x", 2 * *element_bytes, bits);
  return absl::StrFormat("finite 0x%0*x (%.3g)", 2 * *element_bytes, bits, value);
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

double RelativeNormError(absl::Span<const double> values, absl::Span<const double> reference,
                         ThreadPool& pool) {
  const auto [error_squared, reference_squared] = ChunkedSums(
      pool, static_cast<int64_t>(std::min(values.size(), reference.size())),
      [&](int64_t i, double& error_sum, double& reference_sum) {
        if (!std::isfinite(values[i]) || !std::isfinite(reference[i])) return;
        error_sum += (values[i] - reference[i]) * (values[i] - reference[i]);
        reference_sum += reference[i] * reference[i];
      });
  return reference_squared > 0 ? std::sqrt(error_squared / reference_squared) : 0;
}

void EagerError::Add(absl::Span<const double> native_reference, absl::Span<const double> reference,
                     ThreadPool& pool) {
  const int64_t count = static_cast<int64_t>(std::min(native_reference.size(), reference.size()));
  std::vector<double> chunk_max(ThreadPool::ChunkCount(count), 0.0);
  pool.ForEachChunk(count, [&](int64_t chunk, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (std::isfinite(native_reference[i]) && std::isfinite(reference[i])) {
        chunk_max[chunk] =
            std::max(chunk_max[chunk], std::fabs(native_reference[i] - reference[i]));
      }
    }
  });
  for (double chunk_abs : chunk_max) max_abs = std::max(max_abs, chunk_abs);
  rel_norm = std::max(rel_norm, RelativeNormError(native_reference, reference, pool));
}

void EagerError::Merge(const EagerError& other) {
  max_abs = std::max(max_abs, other.max_abs);
  rel_norm = std::max(rel_norm, other.rel_norm);
}

std::string EagerError::Note() const {
  if (max_abs == 0) return "";
  if (!EagerAccurateEnough(rel_norm)) {
    return absl::StrFormat(
        "eager's own error (ATen in the task's dtypes vs float64: max %.3g, relative norm %.3g) "
        "exceeds %g on some draw: there eager is too far from float64 to judge by and the "
        "tolerance was not widened",
        max_abs, rel_norm, kMaxTrustedEagerError);
  }
  return absl::StrFormat(
      "tolerance widened by eager's own error (ATen in the task's dtypes vs float64): max %.3g, "
      "relative norm %.3g",
      max_abs, rel_norm);
}

OutputComparison CompareOutput(const HostTensor& candidate, absl::Span<const double> reference,
                               const Tolerances& tolerances,
                               absl::Span<const double> native_reference, ThreadPool& pool,
                               std::optional<Poison> poison) {
  return CompareOutput(candidate.spec, candidate.storage, reference, tolerances, native_reference,
                       pool, poison);
}

OutputComparison CompareOutput(const forge::v1::TensorSpec& spec,
                               absl::Span<const std::byte> storage,
                               absl::Span<const double> reference, const Tolerances& tolerances,
                               absl::Span<const double> native_reference, ThreadPool& pool,
                               std::optional<Poison> poison) {
  OutputComparison result;
  const Poison filled = poison.value_or(PoisonFor(spec.dtype()));
  const DType dtype = spec.dtype();
  const int64_t count = ElementCount(spec);
  result.element_count = count;
  const absl::StatusOr<int> element_bytes = ElementBytes(dtype);
  if (!element_bytes.ok()) {
    result.passed = false;
    result.failure = std::string(element_bytes.status().message());
    return result;
  }
  if (static_cast<int64_t>(storage.size()) != StorageElementCount(spec) * *element_bytes) {
    result.passed = false;
    result.failure = absl::StrCat("the output ", DescribeSpec(spec), " is stored in ",
                                  storage.size(), " bytes, not ",
                                  StorageElementCount(spec) * *element_bytes);
    return result;
  }
  if (static_cast<int64_t>(reference.size()) != count) {
    result.passed = false;
    result.failure = absl::StrCat("reference has ", reference.size(), " elements, the output ",
                                  DescribeSpec(spec), " has ", count);
    return result;
  }
  if (!native_reference.empty() && native_reference.size() != reference.size()) {
    result.passed = false;
    result.failure = absl::StrCat("native reference has ", native_reference.size(),
                                  " elements, the float64 reference ", reference.size());
    return result;
  }
  double rel_norm_bound = tolerances.rel_norm;
  if (!native_reference.empty()) {
    const double eager_error = RelativeNormError(native_reference, reference, pool);
    rel_norm_bound = WidenedRelNormBound(tolerances, eager_error);
    // Where eager lost the result, its values widen no element's bound either.
    if (!EagerAccurateEnough(eager_error)) native_reference = {};
  }

  const double overflow = OverflowThreshold(dtype);
  std::vector<ChunkTally> tallies(ThreadPool::ChunkCount(count));
  WithCodec(dtype, [&](const auto& decode) {
    using Bits = typename std::decay_t<decltype(decode)>::Bits;
    const Bits poison_bits = static_cast<Bits>(PoisonElementBits(filled, sizeof(Bits)));
    WithOffsets(spec, [&](const auto& offset_of) {
      pool.ForEachChunk(count, [&](int64_t chunk, int64_t begin, int64_t end) {
        tallies[chunk] = CompareChunk(decode, offset_of, poison_bits, storage.data(), reference,
                                      tolerances, native_reference, overflow, begin, end);
      });
    });
  });
  const ChunkTally total = AddTallies(tallies);
  result = SummarizeTotal(total, count, rel_norm_bound);
  if (result.passed) return result;
  const int64_t first_unwritten = total.first_unwritten;
  const int64_t first_mismatch = total.first_mismatch;

  auto where = [&](int64_t index) {
    return absl::StrCat("element ", index, " ", FormatIndex(Unravel(spec.shape(), index)));
  };
  if (first_unwritten != kNoIndex) {
    result.failed_index = first_unwritten;
    result.failure = absl::StrCat(where(first_unwritten),
                                  " never written (still holds the poison, ",
                                  DescribePoison(dtype, filled), "); ", result.unwritten,
                                  " of ", count, " elements unwritten");
  } else if (first_mismatch != kNoIndex) {
    const int64_t i = first_mismatch;
    const double got =
        DecodeElement(dtype, storage.data() + StorageOffsetOf(spec, i) * *element_bytes);
    const double want = reference[i];
    const std::string widening =
        native_reference.empty()
            ? ""
            : absl::StrFormat(" + 2 * eager's error %.3g (native %.9g)",
                              std::fabs(native_reference[i] - want), native_reference[i]);
    result.failed_index = i;
    if (std::isfinite(want) && std::fabs(want) >= overflow) {
      result.failure = absl::StrFormat(
          "%s: candidate %.9g, reference %.9g, beyond the range of the output %s: stored as "
          "%s; %d of %d elements outside the tolerance",
          where(i), got, want, DescribeSpec(spec), want > 0 ? "inf" : "-inf", result.mismatches,
          count);
      return result;
    }
    result.failure = absl::StrFormat(
        "%s: candidate %.9g, reference %.9g, |difference| %.3g exceeds atol %g + rtol %g * "
        "|reference|%s; %d of %d elements outside the tolerance",
        where(i), got, want, std::fabs(got - want), tolerances.atol, tolerances.rtol, widening,
        result.mismatches, count);
  } else {
    result.failure = absl::StrFormat(
        "relative-norm error ||candidate - reference|| / ||reference|| = %.3g exceeds %g, though "
        "every element is within atol %g + rtol %g * |reference|",
        result.rel_norm_error, rel_norm_bound, tolerances.atol, tolerances.rtol);
  }
  return result;
}

std::optional<int64_t> FirstChangedElement(const forge::v1::TensorSpec& spec,
                                           absl::Span<const std::byte> before,
                                           absl::Span<const std::byte> after, ThreadPool& pool) {
  const int64_t element_bytes = *ElementBytes(spec.dtype());
  const bool row_major = IsRowMajor(spec);
  const int64_t count = ElementCount(spec);
  std::vector<int64_t> first_in_chunk(ThreadPool::ChunkCount(count), kNoIndex);
  // The earliest chunk known to hold a change: later chunks need not be looked at.
  std::atomic<int64_t> first_changed_chunk{kNoIndex};
  pool.ForEachChunk(count, [&](int64_t chunk, int64_t begin, int64_t end) {
    if (chunk > first_changed_chunk.load(std::memory_order_relaxed)) return;
    // A row-major chunk is one span of bytes, which memcmp clears at once in the usual case.
    if (row_major && std::memcmp(before.data() + begin * element_bytes,
                                 after.data() + begin * element_bytes,
                                 (end - begin) * element_bytes) == 0) {
      return;
    }
    for (int64_t i = begin; i < end; ++i) {
      const int64_t offset = (row_major ? i : StorageOffsetOf(spec, i)) * element_bytes;
      if (std::memcmp(before.data() + offset, after.data() + offset, element_bytes) != 0) {
        first_in_chunk[chunk] = i;
        StoreMin(first_changed_chunk, chunk);
        return;
      }
    }
  });
  for (int64_t first : first_in_chunk) {
    if (first != kNoIndex) return first;
  }
  return std::nullopt;
}

std::vector<double> DecodeElements(const forge::v1::TensorSpec& spec,
                                   absl::Span<const std::byte> storage, ThreadPool& pool) {
  std::vector<double> values(ElementCount(spec));
  WithCodec(spec.dtype(), [&](const auto& decode) {
    using Bits = typename std::decay_t<decltype(decode)>::Bits;
    WithOffsets(spec, [&](const auto& offset_of) {
      pool.ForEachChunk(static_cast<int64_t>(values.size()),
                        [&](int64_t, int64_t begin, int64_t end) {
                          for (int64_t i = begin; i < end; ++i) {
                            values[i] = decode(LoadBits<Bits>(storage.data() +
                                                              offset_of(i) * sizeof(Bits)));
                          }
                        });
    });
  });
  return values;
}

double Mean(absl::Span<const double> values, ThreadPool& pool) {
  if (values.empty()) return 0;
  return ChunkedSum(pool, static_cast<int64_t>(values.size()),
                    [&](int64_t i) { return values[i]; }) /
         static_cast<double>(values.size());
}

bool IsNearConstant(absl::Span<const double> values, const Tolerances& tolerances,
                    ThreadPool& pool) {
  const double mean = Mean(values, pool);
  return !AnyElement(pool, static_cast<int64_t>(values.size()), [&](int64_t i) {
    return std::isfinite(values[i]) && !WithinTolerance(mean, values[i], tolerances);
  });
}

bool AgreeWithin(absl::Span<const double> a, absl::Span<const double> b,
                 const Tolerances& tolerances, ThreadPool& pool) {
  if (a.size() != b.size()) return false;
  return !AnyElement(pool, static_cast<int64_t>(a.size()), [&](int64_t i) {
    return std::isfinite(a[i]) && std::isfinite(b[i]) && !WithinTolerance(a[i], b[i], tolerances);
  });
}

VariationComparison CompareVariation(absl::Span<const double> candidate_variation,
                                     absl::Span<const double> reference_variation,
                                     absl::Span<const double> rounded_variation,
                                     ThreadPool& pool) {
  VariationComparison result;
  const double reference_norm = Norm(reference_variation, pool);
  // Rounding leaves floating-point residue of the mean behind, never exactly zero: a variation that
  // loses three orders of magnitude to rounding is gone.
  result.representable =
      reference_norm > 0 && Norm(rounded_variation, pool) > 1e-3 * reference_norm;
  if (candidate_variation.size() != reference_variation.size() ||
      rounded_variation.size() != reference_variation.size()) {
    result.passed = false;  // the outputs do not even line up
    return result;
  }
  if (!result.representable) return result;
  const auto [error_squared, rounding_squared] = ChunkedSums(
      pool, static_cast<int64_t>(reference_variation.size()),
      [&](int64_t i, double& error_sum, double& rounding_sum) {
        const double error = candidate_variation[i] - reference_variation[i];
        const double rounding = rounded_variation[i] - reference_variation[i];
        error_sum += error * error;
        rounding_sum += rounding * rounding;
      });
  const double error = std::sqrt(error_squared);
  result.relative_error = error / reference_norm;
  result.passed =
      std::isfinite(error) && error <= 0.5 * reference_norm + 2 * std::sqrt(rounding_squared);
  return result;
}

}  // namespace forge::judge
