// Kernels of planted_bugs_test: softmax and layer norm (no affine, eps 1e-5) over rows of 1003,
// one block of 256 threads per row: correct kernels with other reduction orders, and the bugs only
// adversarial draws show. Block sums go through warp shuffles, then shared memory (BlockReduce).
// Compiled with NVRTC at test time, followed by correct_variants.cuh (kernel_source.h).
#define COLUMNS 1003
__device__ float WarpSum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}
__device__ float WarpMax(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  return v;
}
// The block's sum (or max) through warp shuffles: every thread gets it.
__device__ float BlockReduce(float v, bool max) {
  __shared__ float warps[8];
  __shared__ float total;
  v = max ? WarpMax(v) : WarpSum(v);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    float w = threadIdx.x < 8 ? warps[threadIdx.x] : (max ? __int_as_float(0xff800000) : 0.0f);
    w = max ? WarpMax(w) : WarpSum(w);
    if (threadIdx.x == 0) total = w;
  }
  __syncthreads();
  v = total;
  __syncthreads();
  return v;
}
// Softmax with the max subtracted, warp-shuffle reductions, and each thread's exp sum kept with
// Kahan compensation over its columns taken in reverse: another summation order that must pass.
extern "C" __global__ void softmax_shuffle_kahan(const float* x, float* y) {
  const float* in = x + blockIdx.x * COLUMNS;
  float* out = y + blockIdx.x * COLUMNS;
  float top = __int_as_float(0xff800000);
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) top = fmaxf(top, in[c]);
  top = BlockReduce(top, true);
  float sum = 0, carry = 0;
  int last = threadIdx.x + ((COLUMNS - 1 - threadIdx.x) / blockDim.x) * blockDim.x;
  for (int c = last; c >= 0 && threadIdx.x < COLUMNS; c -= blockDim.x) {
    float term = expf(in[c] - top) - carry;
    float next = sum + term;
    carry = (next - sum) - term;
    sum = next;
  }
  sum = BlockReduce(sum, false);
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) out[c] = expf(in[c] - top) / sum;
}
// The bug: exp without the max subtracted, exact until a logit passes ~88.
extern "C" __global__ void softmax_without_max(const float* x, float* y) {
  const float* in = x + blockIdx.x * COLUMNS;
  float* out = y + blockIdx.x * COLUMNS;
  float sum = 0;
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) sum += expf(in[c]);
  sum = BlockReduce(sum, false);
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) out[c] = expf(in[c]) / sum;
}
// LAYER_NORM(name, variance, scale): mean first; `variance` from the row's sums; `scale` the
// factor applied to x - mean.
#define LAYER_NORM(name, variance, scale)                                         \
  extern "C" __global__ void name(const float* x, float* y) {                   \
    const float* in = x + blockIdx.x * COLUMNS;                                 \
    float* out = y + blockIdx.x * COLUMNS;                                      \
    float sum = 0, squares = 0;                                                 \
    for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) sum += in[c];       \
    const float mean = BlockReduce(sum, false) / COLUMNS;                       \
    for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) {                   \
      float d = in[c] - mean;                                                   \
      squares += (variance) == 0 ? d * d : in[c] * in[c];                       \
    }                                                                           \
    squares = BlockReduce(squares, false) / COLUMNS;                            \
    const float var = (variance) == 0 ? squares : squares - mean * mean;        \
    const float factor = scale;                                                 \
    for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) out[c] = (in[c] - mean) * factor; \
  }
// Two passes, rsqrt(var + eps): correct.
LAYER_NORM(layer_norm, 0, rsqrtf(var + 1e-5f))
// The bugs: E[x^2] - E[x]^2 (cancels on rows with a large mean), and 1 / (sqrt(var) + eps)
// (wrong where var is near eps).
LAYER_NORM(layer_norm_moments, 1, rsqrtf(var + 1e-5f))
LAYER_NORM(layer_norm_eps_outside, 0, 1.0f / (sqrtf(var) + 1e-5f))
