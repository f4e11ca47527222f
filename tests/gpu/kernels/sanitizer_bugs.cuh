// Kernels of sanitizer_gpu_test: y = 2x + 1 over N = 1003000 float32 elements, 256 threads a
// block. Every one writes the right outputs, so the judge's comparison passes it; all but `affine`
// carry a bug only compute-sanitizer sees. Compiled with NVRTC at test time (read from this file).
#define N 1003000

// Honest.
extern "C" __global__ void affine(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i] * 2.0f + 1.0f;
}

// Reads one element past its input's end (the last thread reads x[N]): in the judge that byte is
// a guard zone, and the value read changes the result only if it is exactly 1234.5. memcheck.
extern "C" __global__ void affine_reads_past_the_end(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N) return;
  float next = x[i + 1];
  y[i] = x[i] * 2.0f + (next == 1234.5f ? 1.0000001f : 1.0f);
}

// Thread 0 sets the block's scale in shared memory and nothing orders that write before the other
// warps read it: they spin ~20 us first, so the write lands first on every launch in practice (the
// outputs are right), but it is a race. racecheck.
extern "C" __global__ void affine_shared_race(const float* x, float* y) {
  __shared__ float scale;
  if (threadIdx.x == 0) scale = 2.0f;
  if (threadIdx.x >= 32) {
    long long start = clock64();
    while (clock64() - start < 40000) {
    }
  }
  __syncwarp();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i] * scale + 1.0f;
}

// Reads every 1000th output element before writing it: whatever the output held (the judge's
// poison) changes the result only if it is exactly 1234.5. initcheck. (Every element read first
// cost initcheck 100 s on the H200, a million reports; a thousand show the same bug.)
extern "C" __global__ void affine_reads_its_output_first(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N) return;
  float old = i % 1000 == 0 ? y[i] : 0.0f;
  y[i] = x[i] * 2.0f + (old == 1234.5f ? 1.0000001f : 1.0f);
}
