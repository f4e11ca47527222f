// The gemv family's tensor-core template ("gemv_mma", gemv.h): forge_gemv_block for float16 and
// bfloat16 on mma.sync m16n8k16 (sm_80 and newer), float32 accumulators, embedded after gemv.cuh.
//   W stored [n, k] (B_T, linear's weight): Y^T = W X^T. W's rows are the mma's 16-row side, A's
//     rows its 8-column side (one n-tile for M <= 8, two for M <= 16).
//   W stored [k, n] (matmul's): Y = X W. A's rows are the mma's 16-row side (M <= 16: one tile),
//     W's columns its 8-column side.
// Its constants besides gemv.cuh's:
//   FORGE_GEMV_MMA_BF16     1: bfloat16 operands; 0: float16
//   FORGE_GEMV_TILES        tiles of W per warp (B_T: of 16 rows; else of 64 columns); each
//                           fragment of A read serves them all
//   FORGE_GEMV_N_TILES      B_T: 8-row tiles of A (1: M <= 8, 2: M <= 16)
//   FORGE_GEMV_UNROLL       steps along K (B_T: of 32 elements; else of 16) a warp loads for every
//                           tile before it uses them
//   FORGE_GEMV_L2_PREFETCH  1: W's loads ask L2 for the whole 256-byte line
// W is read in 16-byte vectors: B_T needs K, LDB and BSB multiples of 8, else N, LDB and BSB (the
// family's Validate checks). FORGE_GEMV_X_VECTOR: A's elements are read in pairs (B_T: in 8s).
//
// Fragments without shared memory (lane = 4 g + t). The order of K inside one mma is free as long
// as A and B agree on it, and so are the order of the rows and of the columns of the product:
//   B_T: lane loads 16 bytes of W's rows g and g + 8 at k = 8 t of a 32-element step, and 16 bytes
//     of A's row g at the same k; the words {k, k + 1} and {k + 2, k + 3} are the fragments'
//     columns 2 t and 2 t + 8 of the step's first mma, {k + 4, k + 5} and {k + 6, k + 7} those of
//     its second.
//   [k, n]: lane loads 16 bytes of W's rows k = 2 t, 2 t + 1, 2 t + 8, 2 t + 9 of a 16-element
//     step at the 8 columns 8 g ... 8 g + 7 of its 64-column tile; byte permutes pair rows 2 t and
//     2 t + 1 (2 t + 8 and 2 t + 9) at each column j: the B fragments of 8 mmas, mma j's column g
//     being the tile's column 8 g + j. A's fragments are its elements (g, 2 t), (g, 2 t + 8) and
//     the rows g + 8.
// The block's warps take UNROLL consecutive steps of the block's share of K in turn (whole
// 128-byte lines of W). A is read straight from global memory (each step of A is read by one warp
// of the block, so staging it in shared memory would add a copy without reuse).
//
// A block's sums: a warp's mmas in K order, then the warps in warp order through shared memory.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "gemv_mma needs mma.sync on float16 / bfloat16: sm_80 or newer"
#endif

struct __align__(16) ForgeGemvWords {
  unsigned x, y, z, w;
};

// 16 bytes of W, not kept in L1 (each is read once); zeros where !valid. One predicated load
// (volatile: never speculated past `valid`, which guards the ends of W).
#if FORGE_GEMV_L2_PREFETCH
#define FORGE_GEMV_LOAD_W "ld.global.nc.L1::no_allocate.L2::256B.v4.u32"
#else
#define FORGE_GEMV_LOAD_W "ld.global.nc.L1::no_allocate.v4.u32"
#endif
__device__ __forceinline__ ForgeGemvWords forge_gemv_load_w(const FORGE_GEMV_T* p, bool valid) {
  ForgeGemvWords v;
  asm volatile(
      "{\n\t.reg .pred valid;\n\tsetp.ne.b32 valid, %5, 0;\n\t"
      "mov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\tmov.b32 %2, 0;\n\tmov.b32 %3, 0;\n\t"
      "@valid " FORGE_GEMV_LOAD_W " {%0, %1, %2, %3}, [%4];\n\t}"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "r"(static_cast<int>(valid)));
  return v;
}

// d += A B for one m16n8k16 tile: A's fragment a0..a3, B's b0, b1.
__device__ __forceinline__ void forge_gemv_mma(float (&d)[4], unsigned a0, unsigned a1,
                                               unsigned a2, unsigned a3, unsigned b0,
                                               unsigned b1) {
#if FORGE_GEMV_MMA_BF16
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
#else
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
#endif
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The lane's place in its warp (lane = 4 g + t) and the steps of K (of kStep elements) that
// the cluster rank's block sums: [begin, end).
struct ForgeGemvShare {
  int warp, g, t;
  long long begin, end;
};
template <long long kStep>
__device__ __forceinline__ ForgeGemvShare forge_gemv_share(unsigned rank) {
  constexpr long long kSteps = (FORGE_GEMV_K + kStep - 1) / kStep;
  constexpr long long kPerRank = (kSteps + FORGE_GEMV_SPLIT - 1) / FORGE_GEMV_SPLIT;
  const int lane = threadIdx.x % 32;
  const long long begin = rank * kPerRank;
  return {static_cast<int>(threadIdx.x / 32), lane / 4, lane % 4, begin,
          begin + kPerRank < kSteps ? begin + kPerRank : kSteps};
}

// Adds the warps' sums `acc` in warp order into `part` (element (i, n) at i * TILE_N + n);
// index(r, n, j) gives acc[r][n][j]'s element there, -1 for a padding row of A.
template <int kR, int kN, typename Index>
__device__ __forceinline__ void forge_gemv_sum_warps(const float (&acc)[kR][kN][4], Index index,
                                                     float* part) {
  constexpr int kElements = FORGE_GEMV_M * FORGE_GEMV_TILE_N;
#if FORGE_GEMV_WARPS > 1
  __shared__ float partials[FORGE_GEMV_WARPS * kElements];
  float* mine = partials + (threadIdx.x / 32) * kElements;
#else
  float* mine = part;
#endif
#pragma unroll
  for (int r = 0; r < kR; ++r) {
#pragma unroll
    for (int n = 0; n < kN; ++n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int element = index(r, n, j);
        if (element >= 0) mine[element] = acc[r][n][j];
      }
    }
  }
#if FORGE_GEMV_WARPS > 1
  __syncthreads();
  for (int element = threadIdx.x; element < kElements; element += FORGE_GEMV_WARPS * 32) {
    float sum = partials[element];
#pragma unroll
    for (int other = 1; other < FORGE_GEMV_WARPS; ++other) {
      sum += partials[other * kElements + element];
    }
    part[element] = sum;
  }
#endif
  // forge_gemv_run synchronizes the block (or the cluster) before anyone reads `part`.
}

#if FORGE_GEMV_B_T
// Elements k ... k + 7 of A's row i as packed words (zeros past M or K).
__device__ __forceinline__ ForgeGemvWords forge_gemv_load_a(const FORGE_GEMV_T* __restrict__ a,
                                                            int i, long long k) {
  ForgeGemvWords v = {0u, 0u, 0u, 0u};
  if (i >= FORGE_GEMV_M || k >= FORGE_GEMV_K) return v;
#if FORGE_GEMV_X_VECTOR
  v = *reinterpret_cast<const ForgeGemvWords*>(a + (long long)i * FORGE_GEMV_LDA + k);
#else
  unsigned bits[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    bits[j] = (FORGE_GEMV_A_T ? a[(k + j) * FORGE_GEMV_LDA + i]
                              : a[(long long)i * FORGE_GEMV_LDA + k + j]).bits;
  }
  v.x = bits[0] | (bits[1] << 16);
  v.y = bits[2] | (bits[3] << 16);
  v.z = bits[4] | (bits[5] << 16);
  v.w = bits[6] | (bits[7] << 16);
#endif
  return v;
}

__device__ __forceinline__ void forge_gemv_block(const FORGE_GEMV_T* __restrict__ a,
                                                 const FORGE_GEMV_T* __restrict__ b, int /*pass*/,
                                                 long long n0, unsigned rank, float* part) {
  const ForgeGemvShare share = forge_gemv_share<32>(rank);
  const int g = share.g, t = share.t;
  // W's rows of this lane (rows past N read row N - 1: their sums are never stored). Without a
  // partial tile the rows are one pointer plus constant offsets.
  constexpr bool kPartialTile = FORGE_GEMV_N % FORGE_GEMV_TILE_N != 0;
  const FORGE_GEMV_T* __restrict__ w_row[FORGE_GEMV_TILES][2];
#pragma unroll
  for (int r = 0; r < FORGE_GEMV_TILES; ++r) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      long long row = n0 + 16 * r + 8 * h + g;
      if (kPartialTile && row >= FORGE_GEMV_N) row = FORGE_GEMV_N - 1;
      w_row[r][h] = b + row * FORGE_GEMV_LDB + 8 * t;
    }
  }
  float acc[FORGE_GEMV_TILES][FORGE_GEMV_N_TILES][4] = {};
  for (long long c0 = share.begin + (long long)share.warp * FORGE_GEMV_UNROLL; c0 < share.end;
       c0 += (long long)FORGE_GEMV_WARPS * FORGE_GEMV_UNROLL) {
    ForgeGemvWords w[FORGE_GEMV_UNROLL][FORGE_GEMV_TILES][2];
    ForgeGemvWords x[FORGE_GEMV_UNROLL][FORGE_GEMV_N_TILES];
#pragma unroll
    for (int u = 0; u < FORGE_GEMV_UNROLL; ++u) {
      const long long k = (c0 + u) * 32 + 8 * t;
      const bool valid = c0 + u < share.end && k < FORGE_GEMV_K;
#pragma unroll
      for (int r = 0; r < FORGE_GEMV_TILES; ++r) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          w[u][r][h] = forge_gemv_load_w(w_row[r][h] + (c0 + u) * 32, valid);
        }
      }
#pragma unroll
      for (int n = 0; n < FORGE_GEMV_N_TILES; ++n) {
        x[u][n] = valid ? forge_gemv_load_a(a, 8 * n + g, k) : ForgeGemvWords{0u, 0u, 0u, 0u};
      }
    }
#pragma unroll
    for (int u = 0; u < FORGE_GEMV_UNROLL; ++u) {
#pragma unroll
      for (int r = 0; r < FORGE_GEMV_TILES; ++r) {
        const ForgeGemvWords& lo = w[u][r][0];
        const ForgeGemvWords& hi = w[u][r][1];
#pragma unroll
        for (int n = 0; n < FORGE_GEMV_N_TILES; ++n) {
          forge_gemv_mma(acc[r][n], lo.x, hi.x, lo.y, hi.y, x[u][n].x, x[u][n].y);
          forge_gemv_mma(acc[r][n], lo.z, hi.z, lo.w, hi.w, x[u][n].z, x[u][n].w);
        }
      }
    }
  }
  // acc[r][n]: rows 16 r + g (j = 0, 1) and + 8 (j = 2, 3) of W, rows 8 n + 2 t + j % 2 of A.
  forge_gemv_sum_warps(acc, [=](int r, int n, int j) {
    const int i = 8 * n + 2 * t + j % 2;
    return i < FORGE_GEMV_M ? i * FORGE_GEMV_TILE_N + 16 * r + 8 * (j / 2) + g : -1;
  }, part);
}
#else
// A's elements (i, k) and (i, k + 1) as a packed word (zeros past M or K).
__device__ __forceinline__ unsigned forge_gemv_load_a_pair(const FORGE_GEMV_T* __restrict__ a,
                                                           int i, long long k) {
  if (i >= FORGE_GEMV_M || k >= FORGE_GEMV_K) return 0u;
#if FORGE_GEMV_X_VECTOR
  return *reinterpret_cast<const unsigned*>(a + (long long)i * FORGE_GEMV_LDA + k);
#else
  const unsigned first = (FORGE_GEMV_A_T ? a[k * FORGE_GEMV_LDA + i]
                                         : a[(long long)i * FORGE_GEMV_LDA + k]).bits;
  const unsigned second =
      k + 1 < FORGE_GEMV_K ? (FORGE_GEMV_A_T ? a[(k + 1) * FORGE_GEMV_LDA + i]
                                             : a[(long long)i * FORGE_GEMV_LDA + k + 1]).bits
                           : 0u;
  return first | (second << 16);
#endif
}

// Word `j / 2` of `lo` and of `hi`, element j % 2 of each, as one word: (lo's, hi's).
__device__ __forceinline__ unsigned forge_gemv_pair(const ForgeGemvWords& lo,
                                                    const ForgeGemvWords& hi, int j) {
  const unsigned words_lo[4] = {lo.x, lo.y, lo.z, lo.w};
  const unsigned words_hi[4] = {hi.x, hi.y, hi.z, hi.w};
  return __byte_perm(words_lo[j / 2], words_hi[j / 2], j % 2 ? 0x7632 : 0x5410);
}

__device__ __forceinline__ void forge_gemv_block(const FORGE_GEMV_T* __restrict__ a,
                                                 const FORGE_GEMV_T* __restrict__ b, int /*pass*/,
                                                 long long n0, unsigned rank, float* part) {
  const ForgeGemvShare share = forge_gemv_share<16>(rank);
  const int g = share.g, t = share.t;
  // Rows 2 t, 2 t + 1, 2 t + 8, 2 t + 9 of a step.
  const int row_of[4] = {2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9};
  float acc[FORGE_GEMV_TILES][8][4] = {};
  for (long long c0 = share.begin + (long long)share.warp * FORGE_GEMV_UNROLL; c0 < share.end;
       c0 += (long long)FORGE_GEMV_WARPS * FORGE_GEMV_UNROLL) {
    ForgeGemvWords w[FORGE_GEMV_UNROLL][FORGE_GEMV_TILES][4];
    unsigned x[FORGE_GEMV_UNROLL][4];
#pragma unroll
    for (int u = 0; u < FORGE_GEMV_UNROLL; ++u) {
      const long long k0 = (c0 + u) * 16;
      const bool step = c0 + u < share.end;
#pragma unroll
      for (int r = 0; r < FORGE_GEMV_TILES; ++r) {
        const long long column = n0 + 64 * r + 8 * g;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const long long k = k0 + row_of[q];
          w[u][r][q] = forge_gemv_load_w(b + k * FORGE_GEMV_LDB + column,
                                         step && k < FORGE_GEMV_K && column < FORGE_GEMV_N);
        }
      }
      // A's fragment: (g, 2 t), (g + 8, 2 t), (g, 2 t + 8), (g + 8, 2 t + 8), each with k + 1.
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int i = g + 8 * (q % 2);
        x[u][q] = step && (FORGE_GEMV_M > 8 || q % 2 == 0)
                      ? forge_gemv_load_a_pair(a, i, k0 + 2 * t + 8 * (q / 2))
                      : 0u;
      }
    }
#pragma unroll
    for (int u = 0; u < FORGE_GEMV_UNROLL; ++u) {
#pragma unroll
      for (int r = 0; r < FORGE_GEMV_TILES; ++r) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          forge_gemv_mma(acc[r][j], x[u][0], x[u][1], x[u][2], x[u][3],
                         forge_gemv_pair(w[u][r][0], w[u][r][1], j),
                         forge_gemv_pair(w[u][r][2], w[u][r][3], j));
        }
      }
    }
  }
  // acc[r][j]: rows g (e = 0, 1) and g + 8 (e = 2, 3) of A, the tile's columns 8 (2 t + e % 2) + j.
  forge_gemv_sum_warps(acc, [=](int r, int j, int e) {
    const int i = g + 8 * (e / 2);
    return i < FORGE_GEMV_M ? i * FORGE_GEMV_TILE_N + 64 * r + 8 * (2 * t + e % 2) + j : -1;
  }, part);
}
#endif
