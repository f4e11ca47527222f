// One element of a judge's draw, as a function of (rule, element index) alone: the bits input
// element `index` holds in its dtype. Compiled twice, like compare_chunk.h: by the host compiler
// into inputs.cc (DrawInput, DrawAdversarialInput) and as source text by NVRTC into the kernel that
// draws inputs on the GPU (device_inputs.cc, draw_kernel.cuh), so that a draw made on the device
// is the host's bit for bit: integer hashing, +, -, *, /, sqrt (correctly rounded on both) and
// nothing else, no FMA contraction on either side (the host file is built with
// -ffp-contract=off, the device module with --fmad=false), and a logarithm written out below
// instead of each side's libm.
//
// Every element has its own random stream (splitmix64 seeded by the rule's seed and the index),
// so the values never depend on how the elements are split among threads or blocks, and an
// element can be recomputed anywhere (the cancellation draw's odd elements recompute their even
// neighbour). Normals come from Marsaglia's polar method. Plain C++ that NVRTC accepts without
// headers: no standard library, `long long` for indices.
// FORGE_EMBED_BEGIN
#ifndef FORGE_WORKER_JUDGE_DRAW_ELEMENT_H_
#define FORGE_WORKER_JUDGE_DRAW_ELEMENT_H_

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define FORGE_DRAW_HOST_DEVICE __host__ __device__
#else
#define FORGE_DRAW_HOST_DEVICE
#include <math.h>
#include <string.h>
#endif

namespace forge::judge {

// The element types a draw encodes into (the judge's dtypes, without complex64).
enum DrawDType : int {
  kDrawFloat64 = 0,
  kDrawFloat32 = 1,
  kDrawFloat16 = 2,
  kDrawBfloat16 = 3,
  kDrawFloat8E4M3 = 4,
  kDrawFloat8E5M2 = 5,
  kDrawInt8 = 6,
  kDrawInt16 = 7,
  kDrawInt32 = 8,
  kDrawInt64 = 9,
  kDrawUint8 = 10,
  kDrawBool = 11,
};

// How an element's value is drawn (inputs.h says which draw uses which).
enum DrawDistribution : int {
  kDrawNormal = 0,        // mean + scale * normal(0, 1)
  kDrawUniform = 1,       // uniform(-scale, scale)
  kDrawIntegers = 2,      // uniform in [low, high)
  kDrawCancellation = 3,  // x[2k] = 8u, x[2k + 1] = -x[2k] (as stored) + v
  kDrawKinks = 4,         // k or k + normal(0, 0.01), k from {0, 1, -1, 3, -3, 6}
  kDrawZerosAndSubnormals = 5,  // +0, -0, a subnormal, normal(0, 1): a quarter each
  kDrawIntegerEdges = 6,        // low, high - 1 (three quarters), else uniform in [low, high)
};

struct DrawRule {
  int dtype = kDrawFloat32;               // DrawDType
  int distribution = kDrawNormal;         // DrawDistribution
  double mean = 0;
  double scale = 1;
  int positive = 0;   // |x| + 0.1 scale: the operand of sqrt, log, a running variance
  int nonzero = 0;    // redrawn until non-zero once encoded (the standard floating draws)
  long long low = 0;  // kDrawIntegers, kDrawIntegerEdges
  long long high = 16;
  unsigned long long seed = 0;
};

// Where a tensor's logical elements lie in its storage: row-major, or by strides (up to
// kMaxDrawRank dimensions). Passed by value to the device kernel, as the host lays it out.
constexpr int kMaxDrawRank = 8;
struct DrawLayout {
  long long count = 0;  // logical elements
  int element_bytes = 4;
  int row_major = 1;
  int rank = 0;
  long long shape[kMaxDrawRank] = {};
  long long strides[kMaxDrawRank] = {};
};

// The storage offset (in elements) of logical element `index`.
FORGE_DRAW_HOST_DEVICE inline long long DrawOffset(const DrawLayout& layout, long long index) {
  if (layout.row_major) return index;
  long long offset = 0;
  for (int d = layout.rank - 1; d >= 0; --d) {
    offset += (index % layout.shape[d]) * layout.strides[d];
    index /= layout.shape[d];
  }
  return offset;
}

FORGE_DRAW_HOST_DEVICE inline unsigned long long DrawMix(unsigned long long x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

FORGE_DRAW_HOST_DEVICE inline unsigned long long DoubleBits(double x) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  return static_cast<unsigned long long>(__double_as_longlong(x));
#else
  unsigned long long bits;
  memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

FORGE_DRAW_HOST_DEVICE inline double BitsDouble(unsigned long long bits) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double x;
  memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

// An element's own random stream.
struct DrawStream {
  unsigned long long state;
  FORGE_DRAW_HOST_DEVICE unsigned long long Next() {
    state += 0x9E3779B97F4A7C15ull;
    return DrawMix(state);
  }
  // Uniform in [0, 1), 53 bits.
  FORGE_DRAW_HOST_DEVICE double Uniform() {
    return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0);
  }
};

FORGE_DRAW_HOST_DEVICE inline DrawStream StreamOf(unsigned long long seed, long long index) {
  return DrawStream{DrawMix(seed ^ DrawMix(static_cast<unsigned long long>(index) + 0x632BE59BD9B4E019ull))};
}

// ln(x) for a positive normal x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s) with
// s = (m - 1) / (m + 1), |s| <= 0.172, as its series to s^21 (relative error below 1e-16).
FORGE_DRAW_HOST_DEVICE inline double DrawLog(double x) {
  const unsigned long long bits = DoubleBits(x);
  int exponent = static_cast<int>((bits >> 52) & 0x7FF) - 1023;
  double m = BitsDouble((bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);  // [1, 2)
  if (m > 1.4142135623730951) {
    m = m * 0.5;
    exponent += 1;
  }
  const double s = (m - 1) / (m + 1);
  const double z = s * s;
  double series = 1.0 / 21;
  series = series * z + 1.0 / 19;
  series = series * z + 1.0 / 17;
  series = series * z + 1.0 / 15;
  series = series * z + 1.0 / 13;
  series = series * z + 1.0 / 11;
  series = series * z + 1.0 / 9;
  series = series * z + 1.0 / 7;
  series = series * z + 1.0 / 5;
  series = series * z + 1.0 / 3;
  series = series * z + 1.0;
  return static_cast<double>(exponent) * 0.6931471805599453 + 2 * s * series;
}

// normal(0, 1) by Marsaglia's polar method.
FORGE_DRAW_HOST_DEVICE inline double DrawNormal(DrawStream& stream) {
  for (;;) {
    const double u = 2 * stream.Uniform() - 1;
    const double v = 2 * stream.Uniform() - 1;
    const double s = u * u + v * v;
    if (s < 1 && s > 0) return u * sqrt(-2 * DrawLog(s) / s);
  }
}

struct DrawFormat {
  int exponent_bits;
  int mantissa_bits;
  int has_infinity;
};

FORGE_DRAW_HOST_DEVICE inline DrawFormat FormatOf(int dtype) {
  switch (dtype) {
    case kDrawFloat16: return DrawFormat{5, 10, 1};
    case kDrawBfloat16: return DrawFormat{8, 7, 1};
    case kDrawFloat8E4M3: return DrawFormat{4, 3, 0};
    default: return DrawFormat{5, 2, 1};  // kDrawFloat8E5M2
  }
}

// A double rounded to a binary format narrower than float32, nearest with ties to even, as
// EncodeElement does: subnormals kept, overflow to infinity (NaN without infinities), NaN quiet.
FORGE_DRAW_HOST_DEVICE inline unsigned long long EncodeSmallFloat(DrawFormat format,
                                                                  double value) {
  const unsigned long long bits = DoubleBits(value);
  const unsigned long long sign =
      (bits >> 63) != 0 ? 1ull << (format.exponent_bits + format.mantissa_bits) : 0;
  const unsigned long long all_ones = (1ull << format.exponent_bits) - 1;
  const unsigned long long nan =
      (all_ones << format.mantissa_bits) |
      (format.has_infinity ? 1ull << (format.mantissa_bits - 1) : (1ull << format.mantissa_bits) - 1);
  const int biased = static_cast<int>((bits >> 52) & 0x7FF);
  const unsigned long long fraction = bits & 0x000FFFFFFFFFFFFFull;
  if (biased == 0x7FF) {
    if (fraction != 0 || !format.has_infinity) return nan;
    return sign | (all_ones << format.mantissa_bits);
  }
  if (biased == 0) return sign;  // zero, or a double subnormal: far below every format's
  const int bias = (1 << (format.exponent_bits - 1)) - 1;
  const int max_exponent = static_cast<int>(all_ones) - (format.has_infinity ? 1 : 0) - bias;
  const int exponent = biased - 1023;
  const unsigned long long significand = fraction | (1ull << 52);
  // The bits below the kept mantissa: more for subnormals of the format.
  int dropped = 52 - format.mantissa_bits;
  int stored_exponent = exponent + bias;
  if (stored_exponent < 1) {
    dropped += 1 - stored_exponent;
    stored_exponent = 0;
  }
  if (dropped > 62) return sign;  // rounds to zero
  unsigned long long kept = significand >> dropped;
  const unsigned long long rest = significand & ((1ull << dropped) - 1);
  const unsigned long long half = 1ull << (dropped - 1);
  if (rest > half || (rest == half && (kept & 1) != 0)) ++kept;
  // `kept` holds the hidden bit for normals: stored exponent and mantissa add up either way
  // (a carry into the hidden bit raises the exponent by one).
  unsigned long long encoded;
  if (stored_exponent == 0) {
    encoded = kept;  // a subnormal, or the smallest normal when it rounded up
  } else {
    encoded = (static_cast<unsigned long long>(stored_exponent - 1) << format.mantissa_bits) + kept;
  }
  const int top = static_cast<int>(encoded >> format.mantissa_bits);
  const unsigned long long mantissa = encoded & ((1ull << format.mantissa_bits) - 1);
  if (top - bias > max_exponent ||
      (!format.has_infinity && top - bias == max_exponent &&
       mantissa == (1ull << format.mantissa_bits) - 1)) {
    return format.has_infinity ? sign | (all_ones << format.mantissa_bits) : nan;
  }
  return sign | encoded;
}

FORGE_DRAW_HOST_DEVICE inline double DecodeSmallFloat(DrawFormat format, unsigned long long bits) {
  const unsigned long long all_ones = (1ull << format.exponent_bits) - 1;
  const unsigned long long mantissa_mask = (1ull << format.mantissa_bits) - 1;
  const int bias = (1 << (format.exponent_bits - 1)) - 1;
  const bool negative = ((bits >> (format.exponent_bits + format.mantissa_bits)) & 1) != 0;
  const unsigned long long exponent = (bits >> format.mantissa_bits) & all_ones;
  const unsigned long long mantissa = bits & mantissa_mask;
  double magnitude;
  if (exponent == all_ones && (format.has_infinity || mantissa == mantissa_mask)) {
    magnitude = format.has_infinity && mantissa == 0 ? 1.0 / 0.0 : 0.0 / 0.0;
  } else {
    // mantissa * 2^(e - bias - mantissa_bits), the hidden bit added for normals: exact.
    const int scale_exponent =
        (exponent == 0 ? 1 : static_cast<int>(exponent)) - bias - format.mantissa_bits;
    const double significand =
        static_cast<double>(exponent == 0 ? mantissa : mantissa | (1ull << format.mantissa_bits));
    magnitude = significand * BitsDouble(static_cast<unsigned long long>(scale_exponent + 1023) << 52);
  }
  return negative ? -magnitude : magnitude;
}

// Saturating conversion, truncating, to `low`..`high` (NaN to 0), as EncodeElement's.
FORGE_DRAW_HOST_DEVICE inline long long ClampToInteger(double value, long long low,
                                                       long long high) {
  if (value != value) return 0;
  if (value <= static_cast<double>(low)) return low;
  if (value >= static_cast<double>(high)) return high;
  return static_cast<long long>(value);
}

// `value` in `dtype`'s bits (the low DrawElementBytes(dtype) bytes), as EncodeElement stores it.
FORGE_DRAW_HOST_DEVICE inline unsigned long long EncodeDrawValue(int dtype, double value) {
  switch (dtype) {
    case kDrawFloat64: return DoubleBits(value);
    case kDrawFloat32: {
      const float narrowed = static_cast<float>(value);
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
      return static_cast<unsigned int>(__float_as_uint(narrowed));
#else
      unsigned int bits;
      memcpy(&bits, &narrowed, sizeof bits);
      return bits;
#endif
    }
    case kDrawFloat16:
    case kDrawBfloat16:
    case kDrawFloat8E4M3:
    case kDrawFloat8E5M2: return EncodeSmallFloat(FormatOf(dtype), value);
    case kDrawInt8: return static_cast<unsigned char>(ClampToInteger(value, -128, 127));
    case kDrawInt16: return static_cast<unsigned short>(ClampToInteger(value, -32768, 32767));
    case kDrawInt32:
      return static_cast<unsigned int>(ClampToInteger(value, -2147483647 - 1, 2147483647));
    case kDrawInt64:
      return static_cast<unsigned long long>(
          ClampToInteger(value, -9223372036854775807ll - 1, 9223372036854775807ll));
    case kDrawUint8: return static_cast<unsigned char>(ClampToInteger(value, 0, 255));
    default: return value != 0 ? 1 : 0;  // kDrawBool
  }
}

// The value `dtype`'s bits stand for (floating dtypes only: what the cancellation draw reads).
FORGE_DRAW_HOST_DEVICE inline double DecodeDrawValue(int dtype, unsigned long long bits) {
  switch (dtype) {
    case kDrawFloat64: return BitsDouble(bits);
    case kDrawFloat32: {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
      return static_cast<double>(__uint_as_float(static_cast<unsigned int>(bits)));
#else
      const unsigned int word = static_cast<unsigned int>(bits);
      float value;
      memcpy(&value, &word, sizeof value);
      return value;
#endif
    }
    default: return DecodeSmallFloat(FormatOf(dtype), bits);
  }
}

FORGE_DRAW_HOST_DEVICE inline int DrawElementBytes(int dtype) {
  switch (dtype) {
    case kDrawFloat64:
    case kDrawInt64: return 8;
    case kDrawFloat32:
    case kDrawInt32: return 4;
    case kDrawFloat16:
    case kDrawBfloat16:
    case kDrawInt16: return 2;
    default: return 1;
  }
}

// Whether `bits` encode +0 or -0 in a floating `dtype` (only the sign bit, the top one, set).
FORGE_DRAW_HOST_DEVICE inline bool IsEncodedZeroBits(int dtype, unsigned long long bits) {
  const int width = 8 * DrawElementBytes(dtype);
  const unsigned long long magnitude_mask = width == 64 ? ~0ull >> 1 : (1ull << (width - 1)) - 1;
  return (bits & magnitude_mask) == 0;
}

FORGE_DRAW_HOST_DEVICE inline bool IsFloatingDraw(int dtype) { return dtype <= kDrawFloat8E5M2; }

FORGE_DRAW_HOST_DEVICE inline int MantissaBitsOf(int dtype) {
  switch (dtype) {
    case kDrawFloat64: return 52;
    case kDrawFloat32: return 23;
    default: return FormatOf(dtype).mantissa_bits;
  }
}

// The integer in [low, high) a stream gives (high > low).
FORGE_DRAW_HOST_DEVICE inline long long DrawInteger(DrawStream& stream, long long low,
                                                    long long high) {
  const unsigned long long span =
      static_cast<unsigned long long>(high) - static_cast<unsigned long long>(low);
  return static_cast<long long>(static_cast<unsigned long long>(low) + stream.Next() % span);
}

// The bits of element `index` of the draw `rule` describes.
FORGE_DRAW_HOST_DEVICE inline unsigned long long DrawElement(const DrawRule& rule,
                                                             long long index) {
  DrawStream stream = StreamOf(rule.seed, index);
  switch (rule.distribution) {
    case kDrawIntegers:
      return EncodeDrawValue(rule.dtype,
                             static_cast<double>(DrawInteger(stream, rule.low, rule.high)));
    case kDrawIntegerEdges: {
      const unsigned long long quarter = stream.Next() & 3;
      const long long value = quarter == 0   ? rule.low
                              : quarter == 1 ? rule.high - 1
                              : quarter == 2 ? ((stream.Next() & 1) == 0 ? rule.low : rule.high - 1)
                                             : DrawInteger(stream, rule.low, rule.high);
      return EncodeDrawValue(rule.dtype, static_cast<double>(value));
    }
    case kDrawCancellation: {
      if (index % 2 == 0) return EncodeDrawValue(rule.dtype, 8 * DrawNormal(stream));
      DrawStream even = StreamOf(rule.seed, index - 1);
      const double stored =
          DecodeDrawValue(rule.dtype, EncodeDrawValue(rule.dtype, 8 * DrawNormal(even)));
      return EncodeDrawValue(rule.dtype, -stored + DrawNormal(stream));
    }
    case kDrawKinks: {
      const double kinks[6] = {0, 1, -1, 3, -3, 6};
      const double kink = kinks[stream.Next() % 6];
      return EncodeDrawValue(rule.dtype,
                             (stream.Next() & 2) == 0 ? kink : kink + 0.01 * DrawNormal(stream));
    }
    case kDrawZerosAndSubnormals: {
      const int width = 8 * DrawElementBytes(rule.dtype);
      const unsigned long long sign = 1ull << (width - 1);
      const unsigned long long mantissa_span = (1ull << MantissaBitsOf(rule.dtype)) - 1;
      switch (stream.Next() & 3) {
        case 0: return 0;
        case 1: return sign;
        case 2: {
          const unsigned long long mantissa = 1 + stream.Next() % mantissa_span;
          return mantissa | ((stream.Next() & 1) == 0 ? 0 : sign);
        }
        default: return EncodeDrawValue(rule.dtype, DrawNormal(stream));
      }
    }
    default: {  // kDrawNormal, kDrawUniform
      for (;;) {
        double value = rule.distribution == kDrawUniform
                           ? rule.scale * (2 * stream.Uniform() - 1)
                           : rule.mean + rule.scale * DrawNormal(stream);
        if (rule.positive) value = fabs(value) + 0.1 * rule.scale;
        const unsigned long long bits = EncodeDrawValue(rule.dtype, value);
        if (!rule.nonzero || !IsEncodedZeroBits(rule.dtype, bits)) return bits;
      }
    }
  }
}

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_DRAW_ELEMENT_H_
