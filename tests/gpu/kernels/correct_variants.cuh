// Correct kernels the judge must never reject (planted_bugs_test's NoFalseRejection suite): softmax
// and layer norm (no affine, eps 1e-5) over rows of 1003 float32 values, one block of 256 threads
// a row, each summing in an order of its own; and y = 2x + 1 over a 1 MiB input. Compiled with
// NVRTC at test time after row_kernels.cuh, whose COLUMNS, WarpSum, WarpMax and BlockReduce (warp
// shuffles, then shared memory) they use.
#define NEG_INF __int_as_float(0xff800000)

// The row's max and then the sum of exp(x - max), both by thread 0 alone, left to right: a
// sequential order where the others are trees.
extern "C" __global__ void softmax_sequential(const float* x, float* y) {
  __shared__ float top, sum;
  const float* in = x + blockIdx.x * COLUMNS;
  float* out = y + blockIdx.x * COLUMNS;
  if (threadIdx.x == 0) {
    float m = NEG_INF;
    for (int c = 0; c < COLUMNS; ++c) m = fmaxf(m, in[c]);
    float s = 0;
    for (int c = 0; c < COLUMNS; ++c) s += expf(in[c] - m);
    top = m;
    sum = s;
  }
  __syncthreads();
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) out[c] = expf(in[c] - top) / sum;
}

// Fast exp (__expf, a few ulp off expf) everywhere, the sums through warp shuffles then shared
// memory.
extern "C" __global__ void softmax_fast_exp(const float* x, float* y) {
  const float* in = x + blockIdx.x * COLUMNS;
  float* out = y + blockIdx.x * COLUMNS;
  float top = NEG_INF;
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) top = fmaxf(top, in[c]);
  top = BlockReduce(top, true);
  float sum = 0;
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) sum += __expf(in[c] - top);
  sum = BlockReduce(sum, false);
  const float inverse = 1.0f / sum;
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) out[c] = __expf(in[c] - top) * inverse;
}

// The exp sum through atomicAdd on one shared float: the order of the additions changes from
// launch to launch.
extern "C" __global__ void softmax_atomic_sum(const float* x, float* y) {
  __shared__ float sum;
  const float* in = x + blockIdx.x * COLUMNS;
  float* out = y + blockIdx.x * COLUMNS;
  if (threadIdx.x == 0) sum = 0;
  float top = NEG_INF;
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) top = fmaxf(top, in[c]);
  top = BlockReduce(top, true);  // its barriers also order the zeroing above
  float mine = 0;
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) mine += expf(in[c] - top);
  atomicAdd(&sum, mine);
  __syncthreads();
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) out[c] = expf(in[c] - top) / sum;
}

// Layer norm with both sums through atomicAdd on shared floats (launch-dependent order), two
// passes, the first shifted by the row's first element: float32 sums of the raw values lose the
// mean of a row far from zero (at the large-mean draw, mean 256 over 1003 columns, an unshifted
// sum's error was 1.7e-4 in the outputs, over float32's 1e-4 tolerance on the H200 — rightly
// rejected, as eager's Welford is accurate there), while the shifted sum keeps it.
extern "C" __global__ void layer_norm_atomic_sums(const float* x, float* y) {
  __shared__ float sum, squares;
  const float* in = x + blockIdx.x * COLUMNS;
  float* out = y + blockIdx.x * COLUMNS;
  if (threadIdx.x == 0) {
    sum = 0;
    squares = 0;
  }
  __syncthreads();
  const float pivot = in[0];
  float mine = 0;
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) mine += in[c] - pivot;
  atomicAdd(&sum, mine);
  __syncthreads();
  const float mean = pivot + sum / COLUMNS;
  mine = 0;
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) {
    const float d = in[c] - mean;
    mine += d * d;
  }
  atomicAdd(&squares, mine);
  __syncthreads();
  const float factor = rsqrtf(squares / COLUMNS + 1e-5f);
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) out[c] = (in[c] - mean) * factor;
}

// Layer norm by Welford's single pass per thread, the threads' (count, mean, M2) merged through
// warp shuffles and then across warps by thread 0.
__device__ void WelfordMerge(float& n, float& mean, float& m2, float n_b, float mean_b, float m2_b) {
  const float count = n + n_b;
  if (count == 0) return;
  const float delta = mean_b - mean;
  mean += delta * (n_b / count);
  m2 += m2_b + delta * delta * (n * n_b / count);
  n = count;
}
extern "C" __global__ void layer_norm_welford(const float* x, float* y) {
  __shared__ float warp_n[8], warp_mean[8], warp_m2[8];
  __shared__ float row_mean, row_var;
  const float* in = x + blockIdx.x * COLUMNS;
  float* out = y + blockIdx.x * COLUMNS;
  float n = 0, mean = 0, m2 = 0;
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) {
    n += 1;
    const float delta = in[c] - mean;
    mean += delta / n;
    m2 += delta * (in[c] - mean);
  }
  for (int o = 16; o > 0; o /= 2) {
    const float n_b = __shfl_xor_sync(0xffffffff, n, o);
    const float mean_b = __shfl_xor_sync(0xffffffff, mean, o);
    const float m2_b = __shfl_xor_sync(0xffffffff, m2, o);
    WelfordMerge(n, mean, m2, n_b, mean_b, m2_b);
  }
  if (threadIdx.x % 32 == 0) {
    warp_n[threadIdx.x / 32] = n;
    warp_mean[threadIdx.x / 32] = mean;
    warp_m2[threadIdx.x / 32] = m2;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float tn = 0, tmean = 0, tm2 = 0;
    for (int w = 0; w < 8; ++w) WelfordMerge(tn, tmean, tm2, warp_n[w], warp_mean[w], warp_m2[w]);
    row_mean = tmean;
    row_var = tm2 / tn;
  }
  __syncthreads();
  const float factor = rsqrtf(row_var + 1e-5f);
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) out[c] = (in[c] - row_mean) * factor;
}

// y = 2x + 1 over 512 x 512 float32 (1 MiB in, 1 MiB out).
extern "C" __global__ void affine_1mib(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 512 * 512) y[i] = x[i] * 2.0f + 1.0f;
}
