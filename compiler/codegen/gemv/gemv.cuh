// The gemv family's shared kernel code (gemv.h), embedded at build time after the kernel prelude
// and the constants the emitter defines; the template's body (gemv_ffma.cuh or gemv_mma.cuh, which
// defines forge_gemv_block) follows it. The constants every template gets:
//   FORGE_GEMV_T            storage type of A, B (and the product)
//   FORGE_GEMV_M, _N, _K    the product's sizes; FORGE_GEMV_BATCH products (grid.y)
//   FORGE_GEMV_LDA, _BSA    A (m x k): element (i, k) of batch b at b * BSA + i * LDA + k, or
//   FORGE_GEMV_A_T          b * BSA + k * LDA + i when A_T (A stored transposed)
//   FORGE_GEMV_LDB, _BSB    B (k x n) likewise; FORGE_GEMV_B_T: B stored as W[n, k] (linear's
//   FORGE_GEMV_B_T          weight: each output's weights contiguous along K)
//   FORGE_GEMV_X_VECTOR     1: A's rows are read as FORGE_GEMV_VEC-element vectors too
//   FORGE_GEMV_VEC          elements of B per vector load (16 bytes at most)
//   FORGE_GEMV_WARPS        warps per block
//   FORGE_GEMV_SPLIT        blocks of one thread block cluster that split K (1: no cluster)
//   FORGE_GEMV_MP           rows of A one pass computes (the passes re-read B's tile from L2)
//   FORGE_GEMV_TILE_N       outputs (columns of the product) per block
// The kernel calls forge_gemv_run with a functor store(float value, long long e) that finishes
// (the epilogue) and stores the product's element e = (b * M + i) * N + n.
//
// Every sum is in float32 and in a fixed order: within a block as the template's body says, then
// the cluster's blocks in rank order through distributed shared memory: no atomics, the same bits
// on every run.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN

__device__ __forceinline__ float forge_gemv_float(float v) { return v; }
__device__ __forceinline__ float forge_gemv_float(ForgeHalf v) { return forge_half_to_float(v); }
__device__ __forceinline__ float forge_gemv_float(ForgeBFloat16 v) {
  return forge_bfloat16_to_float(v);
}

#if FORGE_GEMV_SPLIT > 1
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "gemv with split_k > 1 needs thread block clusters: sm_90 or newer"
#endif
// Every block of the cluster arrives before any continues; shared-memory writes made before are
// visible to the other blocks after.
__device__ __forceinline__ void forge_gemv_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
               ::: "memory");
}
__device__ __forceinline__ unsigned forge_gemv_rank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
// Element `index` of `part` in the shared memory of the cluster's block `rank`.
__device__ __forceinline__ float forge_gemv_remote(const float* part, unsigned rank, int index) {
  unsigned long long remote;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(remote) : "l"(part + index), "r"(rank));
  return *reinterpret_cast<const float*>(remote);
}
#else
__device__ __forceinline__ void forge_gemv_sync() { __syncthreads(); }
__device__ __forceinline__ unsigned forge_gemv_rank() { return 0; }
__device__ __forceinline__ float forge_gemv_remote(const float* part, unsigned, int index) {
  return part[index];
}
#endif

// Writes this block's part of the product (rows pass * MP ..., columns n0 ...) to `part`, in
// float32, over the cluster rank's share of K: the template's body defines it.
__device__ __forceinline__ void forge_gemv_block(const FORGE_GEMV_T* __restrict__ a,
                                                 const FORGE_GEMV_T* __restrict__ b, int pass,
                                                 long long n0, unsigned rank, float* part);

// One block: its tile of FORGE_GEMV_TILE_N outputs for every row of A, pass by pass; the
// cluster's blocks (one per share of K) then sum their parts in rank order, each block finishing
// a share of the tile's elements.
template <typename Store>
__device__ __forceinline__ void forge_gemv_run(const FORGE_GEMV_T* __restrict__ a,
                                               const FORGE_GEMV_T* __restrict__ b, Store store) {
  __shared__ float part[FORGE_GEMV_MP * FORGE_GEMV_TILE_N];
  const unsigned rank = forge_gemv_rank();
  const long long batch = blockIdx.y;
  const long long n0 = (long long)(blockIdx.x / FORGE_GEMV_SPLIT) * FORGE_GEMV_TILE_N;
  a += batch * FORGE_GEMV_BSA;
  b += batch * FORGE_GEMV_BSB;
  constexpr int kPasses = (FORGE_GEMV_M + FORGE_GEMV_MP - 1) / FORGE_GEMV_MP;
  constexpr int kElements = FORGE_GEMV_MP * FORGE_GEMV_TILE_N;
  constexpr int kThreads = FORGE_GEMV_WARPS * 32;
  for (int pass = 0; pass < kPasses; ++pass) {
    forge_gemv_block(a, b, pass, n0, rank, part);
    forge_gemv_sync();
    for (int index = rank * kThreads + threadIdx.x; index < kElements;
         index += kThreads * FORGE_GEMV_SPLIT) {
      const int i = pass * FORGE_GEMV_MP + index / FORGE_GEMV_TILE_N;
      const long long n = n0 + index % FORGE_GEMV_TILE_N;
      if (i >= FORGE_GEMV_M || n >= FORGE_GEMV_N) continue;
      float sum = forge_gemv_remote(part, 0, index);
#pragma unroll
      for (unsigned r = 1; r < FORGE_GEMV_SPLIT; ++r) sum += forge_gemv_remote(part, r, index);
      store(sum, (batch * FORGE_GEMV_M + i) * FORGE_GEMV_N + n);
    }
    // No block overwrites (or leaves) its part while another may still read it.
    forge_gemv_sync();
  }
}
