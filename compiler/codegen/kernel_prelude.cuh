// The prelude every generated kernel starts with (KernelPrelude in cuda_expr.h): the half and
// bfloat16 types and conversions, and the math helpers the op table's emitters call. Embedded
// byte for byte from the line after FORGE_EMBED_BEGIN (forge_embed_cuda in CMakeLists.txt).
// FORGE_EMBED_BEGIN
// float16 and bfloat16 as bits, converted by PTX instructions: NVRTC does not ship
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
