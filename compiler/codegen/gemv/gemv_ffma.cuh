// The gemv family's FFMA template ("gemv", gemv.h): forge_gemv_block for every dtype, embedded
// after gemv.cuh. Its constants besides gemv.cuh's:
//   FORGE_GEMV_UNROLL       vector loads of B a thread issues per row before it uses them
//   FORGE_GEMV_ROWS         B_T: outputs (rows of W) per warp; else vectors of columns per lane
// A block's sums: a lane's own products in K order, then the lanes (B_T: a butterfly of
// shuffles) or the warps (in warp order, through shared memory).
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN

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
