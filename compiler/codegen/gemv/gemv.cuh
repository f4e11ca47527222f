// The gemv family's kernel body (gemv.h), embedded at build time after the kernel prelude and the
// constants the emitter defines:
//   FORGE_GEMV_T            storage type of A, B (and the product)
//   FORGE_GEMV_M, _N, _K    the product's sizes; FORGE_GEMV_BATCH products (grid.y)
//   FORGE_GEMV_LDA, _BSA    A (m x k): element (i, k) of batch b at b * BSA + i * LDA + k, or
//   FORGE_GEMV_A_T          b * BSA + k * LDA + i when A_T (A stored transposed)
//   FORGE_GEMV_LDB, _BSB    B (k x n) likewise; FORGE_GEMV_B_T: B stored as W[n, k] (linear's
//   FORGE_GEMV_B_T          weight: each output's weights contiguous along K)
//   FORGE_GEMV_X_VECTOR     1: A's rows are read as FORGE_GEMV_VEC-element vectors too
//   FORGE_GEMV_VEC          elements of B per vector load (16 bytes at most)
//   FORGE_GEMV_UNROLL       vector loads of B a thread issues per row before it uses them
//   FORGE_GEMV_ROWS         B_T: outputs (rows of W) per warp; else vectors of columns per lane
//   FORGE_GEMV_WARPS        warps per block
//   FORGE_GEMV_SPLIT        blocks of one thread block cluster that split K (1: no cluster)
//   FORGE_GEMV_MP           rows of A one pass computes (the passes re-read B's tile from L2)
//   FORGE_GEMV_TILE_N       outputs (columns of the product) per block
// The kernel calls forge_gemv_run with a functor store(float value, long long e) that finishes
// (the epilogue) and stores the product's element e = (b * M + i) * N + n.
//
// Every sum is in float32 and in a fixed order: a lane's own products in K order, then the
// lanes (B_T: a butterfly of shuffles) or the warps (in warp order, through shared memory), then
// the cluster's blocks in rank order through distributed shared memory: no atomics, the same
// bits on every run.
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

typedef ForgeVec<FORGE_GEMV_T, FORGE_GEMV_VEC> ForgeGemvVec;

// FORGE_GEMV_VEC elements of A's row i from k on, as float.
__device__ __forceinline__ void forge_gemv_load_x(const FORGE_GEMV_T* __restrict__ a, int i,
                                                  long long k, float (&x)[FORGE_GEMV_VEC]) {
#if FORGE_GEMV_X_VECTOR
  const ForgeGemvVec v =
      *reinterpret_cast<const ForgeGemvVec*>(a + (long long)i * FORGE_GEMV_LDA + k);
#pragma unroll
  for (int j = 0; j < FORGE_GEMV_VEC; ++j) x[j] = forge_gemv_float(v.v[j]);
#else
#pragma unroll
  for (int j = 0; j < FORGE_GEMV_VEC; ++j) {
    x[j] = forge_gemv_float(FORGE_GEMV_A_T ? a[(k + j) * FORGE_GEMV_LDA + i]
                                           : a[(long long)i * FORGE_GEMV_LDA + k + j]);
  }
#endif
}

// Writes this block's part of the product (rows pass * MP ..., columns n0 ...) to `part`, in
// float32, over the cluster rank's share of K.
#if FORGE_GEMV_B_T
// Each warp owns ROWS rows of W (outputs); its lanes stride along K by vectors; a butterfly of
// shuffles sums the lanes; lane 0 writes the warp's sums to `part`.
__device__ __forceinline__ void forge_gemv_block(const FORGE_GEMV_T* __restrict__ a,
                                                 const FORGE_GEMV_T* __restrict__ b, int pass,
                                                 long long n0, unsigned rank, float* part) {
  constexpr long long kChunks = FORGE_GEMV_K / FORGE_GEMV_VEC;
  constexpr long long kPerRank = (kChunks + FORGE_GEMV_SPLIT - 1) / FORGE_GEMV_SPLIT;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long long begin = rank * kPerRank;
  const long long end = begin + kPerRank < kChunks ? begin + kPerRank : kChunks;
  const long long row0 = n0 + (long long)warp * FORGE_GEMV_ROWS;
  float acc[FORGE_GEMV_ROWS][FORGE_GEMV_MP];
#pragma unroll
  for (int r = 0; r < FORGE_GEMV_ROWS; ++r) {
#pragma unroll
    for (int i = 0; i < FORGE_GEMV_MP; ++i) acc[r][i] = 0.f;
  }
  for (long long c0 = begin + lane; c0 < end; c0 += 32 * FORGE_GEMV_UNROLL) {
    ForgeGemvVec w[FORGE_GEMV_UNROLL][FORGE_GEMV_ROWS];
#pragma unroll
    for (int u = 0; u < FORGE_GEMV_UNROLL; ++u) {
      const long long c = c0 + 32LL * u;
#pragma unroll
      for (int r = 0; r < FORGE_GEMV_ROWS; ++r) {
        const long long row = row0 + r;
        if (c < end && row < FORGE_GEMV_N) {
          w[u][r] = *reinterpret_cast<const ForgeGemvVec*>(b + row * FORGE_GEMV_LDB +
                                                            c * FORGE_GEMV_VEC);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < FORGE_GEMV_UNROLL; ++u) {
      const long long c = c0 + 32LL * u;
      if (c >= end) break;
#pragma unroll
      for (int i = 0; i < FORGE_GEMV_MP; ++i) {
        const int row_a = pass * FORGE_GEMV_MP + i;
        if (FORGE_GEMV_M % FORGE_GEMV_MP != 0 && row_a >= FORGE_GEMV_M) break;
        float x[FORGE_GEMV_VEC];
        forge_gemv_load_x(a, row_a, c * FORGE_GEMV_VEC, x);
#pragma unroll
        for (int r = 0; r < FORGE_GEMV_ROWS; ++r) {
#pragma unroll
          for (int j = 0; j < FORGE_GEMV_VEC; ++j) {
            acc[r][i] = fmaf(x[j], forge_gemv_float(w[u][r].v[j]), acc[r][i]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < FORGE_GEMV_ROWS; ++r) {
#pragma unroll
    for (int i = 0; i < FORGE_GEMV_MP; ++i) {
      float v = acc[r][i];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0) part[i * FORGE_GEMV_TILE_N + warp * FORGE_GEMV_ROWS + r] = v;
    }
  }
  __syncthreads();
}
#else
// W is [k, n], contiguous along N: each lane owns ROWS vectors of columns (spaced 32 vectors
// apart), every warp of the block the same columns; the warps stride along K and add their sums
// into `part` one warp after the other.
__device__ __forceinline__ void forge_gemv_block(const FORGE_GEMV_T* __restrict__ a,
                                                 const FORGE_GEMV_T* __restrict__ b, int pass,
                                                 long long n0, unsigned rank, float* part) {
  constexpr long long kPerRank = (FORGE_GEMV_K + FORGE_GEMV_SPLIT - 1) / FORGE_GEMV_SPLIT;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long long begin = rank * kPerRank;
  const long long end = begin + kPerRank < FORGE_GEMV_K ? begin + kPerRank : FORGE_GEMV_K;
  float acc[FORGE_GEMV_ROWS][FORGE_GEMV_VEC][FORGE_GEMV_MP];
#pragma unroll
  for (int r = 0; r < FORGE_GEMV_ROWS; ++r) {
#pragma unroll
    for (int j = 0; j < FORGE_GEMV_VEC; ++j) {
#pragma unroll
      for (int i = 0; i < FORGE_GEMV_MP; ++i) acc[r][j][i] = 0.f;
    }
  }
  for (long long k0 = begin + warp; k0 < end; k0 += FORGE_GEMV_WARPS * FORGE_GEMV_UNROLL) {
    ForgeGemvVec w[FORGE_GEMV_UNROLL][FORGE_GEMV_ROWS];
#pragma unroll
    for (int u = 0; u < FORGE_GEMV_UNROLL; ++u) {
      const long long k = k0 + (long long)FORGE_GEMV_WARPS * u;
#pragma unroll
      for (int r = 0; r < FORGE_GEMV_ROWS; ++r) {
        const long long column = n0 + ((long long)r * 32 + lane) * FORGE_GEMV_VEC;
        if (k < end && column < FORGE_GEMV_N) {
          w[u][r] = *reinterpret_cast<const ForgeGemvVec*>(b + k * FORGE_GEMV_LDB + column);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < FORGE_GEMV_UNROLL; ++u) {
      const long long k = k0 + (long long)FORGE_GEMV_WARPS * u;
      if (k >= end) break;
#pragma unroll
      for (int i = 0; i < FORGE_GEMV_MP; ++i) {
        const int row_a = pass * FORGE_GEMV_MP + i;
        if (FORGE_GEMV_M % FORGE_GEMV_MP != 0 && row_a >= FORGE_GEMV_M) break;
        const float x = forge_gemv_float(FORGE_GEMV_A_T ? a[k * FORGE_GEMV_LDA + row_a]
                                                        : a[(long long)row_a * FORGE_GEMV_LDA + k]);
#pragma unroll
        for (int r = 0; r < FORGE_GEMV_ROWS; ++r) {
#pragma unroll
          for (int j = 0; j < FORGE_GEMV_VEC; ++j) {
            acc[r][j][i] = fmaf(x, forge_gemv_float(w[u][r].v[j]), acc[r][j][i]);
          }
        }
      }
    }
  }
  for (int turn = 0; turn < FORGE_GEMV_WARPS; ++turn) {
    if (warp == turn) {
#pragma unroll
      for (int r = 0; r < FORGE_GEMV_ROWS; ++r) {
#pragma unroll
        for (int j = 0; j < FORGE_GEMV_VEC; ++j) {
#pragma unroll
          for (int i = 0; i < FORGE_GEMV_MP; ++i) {
            float& slot = part[i * FORGE_GEMV_TILE_N + (r * 32 + lane) * FORGE_GEMV_VEC + j];
            slot = turn == 0 ? acc[r][j][i] : slot + acc[r][j][i];
          }
        }
      }
    }
    __syncthreads();
  }
}
#endif

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
