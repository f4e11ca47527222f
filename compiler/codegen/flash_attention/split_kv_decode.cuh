// The flash_attention family's split-KV decode kernel (flash_attention.h), embedded at build time
// after the kernel prelude and the constants the emitter defines:
//   FORGE_FA_T                storage type of Q, K, V and the output
//   FORGE_FA_B                batch
//   FORGE_FA_HKV, _G          K/V heads; query heads per K/V head (GQA group; 1: no GQA)
//   FORGE_FA_SQ, _D           query rows per head; head dim (Q, K and V alike)
//   FORGE_FA_KEYS             keys the kernel scans (Sk, or fewer where a causal mask with an
//                             infinite fill hides the rest)
//   FORGE_FA_Q_OFF, _K_OFF,   where Q's, K's and V's first elements are in the buffers the kernel
//   _V_OFF                    gets (an operand that is a view of a task input: a slice of a cache)
//   FORGE_FA_Q_SB, _SH, _SI   element strides of Q along batch, head, row (the head dim's is 1);
//   FORGE_FA_K_*, _V_*        K and V along batch, K/V head, key; the output's FORGE_FA_O_*
//                             along batch, head, row and head dim
//   FORGE_FA_MASK             0 none, 1 causal (key j hidden from row i when j > i), 2 bool
//                             tensor of kept scores, 3 bool tensor of masked-out scores,
//                             4 additive tensor; FORGE_FA_M_T its storage type and
//                             FORGE_FA_M_SB, _SH, _SI, _SJ its strides (0 where it broadcasts)
//   FORGE_FA_QSCALE           the softmax scale times log2(e): Q is pre-multiplied by it, so a
//                             score is in base-2 units and exp is one ex2
//   FORGE_FA_FILL             a hidden score, in the same units (-inf: the key weighs nothing; a
//                             finite fill stays finite, at most FLT_MAX in size)
//   FORGE_FA_ADD_SCALE        what an additive mask's element is multiplied by (log2(e), times
//                             the scale when the pattern masks before it scales)
//   FORGE_FA_EMPTY_NAN        a row whose every score is -inf: 1 NaN (softmax over the row), 0
//                             zeros (SDPA's safe softmax)
//   FORGE_FA_VEC              elements per vector load of K and V (16 bytes at most)
//   FORGE_FA_LPK              lanes that share one key (a power of two >= D / VEC, at most 32)
//   FORGE_FA_NV               vectors per lane per key (D / VEC / LPK rounded up)
//   FORGE_FA_UNROLL           keys each lane group loads before it uses them
//   FORGE_FA_WARPS            warps per block
//   FORGE_FA_ROWS             query rows per block (of the group's G * SQ), FORGE_FA_CHUNKS
//                             blocks along grid.z cover them
//   FORGE_FA_SPLIT_KEYS       keys per block; FORGE_FA_SPLITS blocks along grid.x cover the keys
//   FORGE_FA_STAGES           0: each step's K and V loaded straight into registers; 2..4: a
//                             ring of that many steps in shared memory filled by cp.async (sm_80
//                             and newer), the loads of the next STAGES - 1 steps in flight while
//                             a step computes (the vector must be 4, 8 or 16 bytes)
//
// Block (split, batch * HKV + kv head, chunk): its rows' queries in registers, the split's keys
// streamed with 16-byte loads, K and V of each key read once for all the group's query heads
// (with STAGES > 0 through a per-thread cp.async ring: each thread copies its own vectors of a
// step and reads back only those, so the ring needs no barrier, only cp.async.wait_group);
// an online softmax in float32 per lane group, then lane groups (shuffles) and warps (shared
// memory, in warp order) merged. One split writes the output; several write float32 partials
// (unnormalized sum, max, sum of weights) to the module's own __device__ workspace, and the
// last block of a (batch, kv head, chunk) to arrive (a ticket counter, reset by that block)
// combines them in split order. Every sum runs in an order fixed by the schedule point: the same
// bits on every launch. Two launches of one loaded module must not overlap (they would share the
// partials and tickets): stream order, as the judge, timer and plans launch, keeps them apart.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN

#define FORGE_FA_NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ float forge_fa_float(float v) { return v; }
__device__ __forceinline__ float forge_fa_float(ForgeHalf v) { return forge_half_to_float(v); }
__device__ __forceinline__ float forge_fa_float(ForgeBFloat16 v) {
  return forge_bfloat16_to_float(v);
}
__device__ __forceinline__ void forge_fa_store(float* p, float v) { *p = v; }
__device__ __forceinline__ void forge_fa_store(ForgeHalf* p, float v) {
  *p = forge_float_to_half(v);
}
__device__ __forceinline__ void forge_fa_store(ForgeBFloat16* p, float v) {
  *p = forge_float_to_bfloat16(v);
}

typedef ForgeVec<FORGE_FA_T, FORGE_FA_VEC> ForgeFaVec;

constexpr int kForgeFaThreads = FORGE_FA_WARPS * 32;
constexpr int kForgeFaGroupRows = FORGE_FA_G * FORGE_FA_SQ;
constexpr int kForgeFaKeysPerWarp = 32 / FORGE_FA_LPK;
constexpr int kForgeFaKeysPerStep = FORGE_FA_WARPS * kForgeFaKeysPerWarp;
constexpr int kForgeFaWidth = FORGE_FA_NV * FORGE_FA_VEC;

// The reference a running max is subtracted from: 0 while every score so far is -inf, so that
// exp2(-inf - ref) is 0 and never NaN.
__device__ __forceinline__ float forge_fa_ref(float m) { return m == FORGE_FA_NEG_INF ? 0.f : m; }

// The score of row (h, i) and key j from the pre-scaled dot product x, mask applied.
template <typename MaskT>
__device__ __forceinline__ float forge_fa_score(float x, const MaskT* __restrict__ mask,
                                                long long b, int h, int i, long long j) {
#if FORGE_FA_MASK == 0
  return x;
#elif FORGE_FA_MASK == 1
  return j > i ? FORGE_FA_FILL : x;
#else
  const MaskT m = mask[b * FORGE_FA_M_SB + (long long)h * FORGE_FA_M_SH +
                       (long long)i * FORGE_FA_M_SI + j * FORGE_FA_M_SJ];
#if FORGE_FA_MASK == 2
  return m ? x : FORGE_FA_FILL;
#elif FORGE_FA_MASK == 3
  return m ? FORGE_FA_FILL : x;
#else
  // A finite mask element stays finite in base-2 units (finfo.min times log2(e) would overflow
  // to -inf, and a row of such keys would weigh nothing instead of evenly).
  const float add = forge_fa_float(m), scaled = add * FORGE_FA_ADD_SCALE;
  return x + (isinf(scaled) && !isinf(add) ? copysignf(3.40282347e38f, scaled) : scaled);
#endif
#endif
}

// Calls f(u, n, j, d0, in_bounds) for each vector this thread reads in the step at j_warp: the
// u-th of its keys (j), the n-th of its vectors of that key (head dims d0..d0 + VEC - 1);
// in_bounds is false past the split or the head dim.
template <typename F>
__device__ __forceinline__ void forge_fa_step_vectors(long long j_warp, long long k_end,
                                                      int key_lane, int d_lane, F f) {
#pragma unroll
  for (int u = 0; u < FORGE_FA_UNROLL; ++u) {
    const long long j = j_warp + (long long)u * kForgeFaKeysPerStep + key_lane;
#pragma unroll
    for (int n = 0; n < FORGE_FA_NV; ++n) {
      const int d0 = (n * FORGE_FA_LPK + d_lane) * FORGE_FA_VEC;
      f(u, n, j, d0, j < k_end && d0 < FORGE_FA_D);
    }
  }
}

#if FORGE_FA_STAGES > 0
// The ring: slot (stage, u, n, K or V) of every thread, consecutive threads' vectors adjacent
// (a warp's accesses are free of bank conflicts).
constexpr int kForgeFaRingSlots = FORGE_FA_STAGES * FORGE_FA_UNROLL * FORGE_FA_NV * 2;
__device__ __forceinline__ int forge_fa_ring_index(int stage, int u, int n, int operand) {
  return (((stage * FORGE_FA_UNROLL + u) * FORGE_FA_NV + n) * 2 + operand) * kForgeFaThreads +
         threadIdx.x;
}
// An asynchronous copy of one vector (4, 8 or 16 bytes, aligned) from global to shared memory;
// 16-byte copies bypass L1.
__device__ __forceinline__ void forge_fa_cp_async(ForgeFaVec* shared, const FORGE_FA_T* global) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  if (sizeof(ForgeFaVec) == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(address), "l"(global) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(address), "l"(global),
                 "n"((int)sizeof(ForgeFaVec)) : "memory");
  }
}
// Requests this thread's vectors of K and V of the step at j_warp into ring stage `stage`, as one
// cp.async group (an empty one past the split: every step commits one group, so waiting for all
// but the newest STAGES - 1 groups waits for the step about to be read).
__device__ __forceinline__ void forge_fa_request(ForgeFaVec* ring, int stage, long long j_warp,
                                                 long long k_end, const FORGE_FA_T* kb,
                                                 const FORGE_FA_T* vb, int key_lane, int d_lane) {
  forge_fa_step_vectors(j_warp, k_end, key_lane, d_lane,
                        [&](int u, int n, long long j, int d0, bool in_bounds) {
    if (!in_bounds) return;
    forge_fa_cp_async(&ring[forge_fa_ring_index(stage, u, n, 0)], kb + j * FORGE_FA_K_SJ + d0);
    forge_fa_cp_async(&ring[forge_fa_ring_index(stage, u, n, 1)], vb + j * FORGE_FA_V_SJ + d0);
  });
  asm volatile("cp.async.commit_group;" ::: "memory");
}
#endif

#if FORGE_FA_SPLITS > 1
// The partials of every (batch * kv head, chunk, row, split), and a ticket per (batch * kv head,
// chunk): how many of its splits have written theirs in this launch.
constexpr long long kForgeFaSlots =
    (long long)FORGE_FA_B * FORGE_FA_HKV * FORGE_FA_CHUNKS * FORGE_FA_ROWS;
static __device__ __align__(16) float forge_fa_part_o[kForgeFaSlots * FORGE_FA_SPLITS * FORGE_FA_D];
static __device__ float forge_fa_part_m[kForgeFaSlots * FORGE_FA_SPLITS];
static __device__ float forge_fa_part_l[kForgeFaSlots * FORGE_FA_SPLITS];
static __device__ unsigned forge_fa_ticket[FORGE_FA_B * FORGE_FA_HKV * FORGE_FA_CHUNKS];
// The combine reads the partials 4 head dims at a time where D allows, through L2 (ld.cg: they
// were written by other blocks of this launch).
constexpr int kForgeFaCombineVec = FORGE_FA_D % 4 == 0 ? 4 : 1;
__device__ __forceinline__ void forge_fa_load_partial(const float* p, float (&x)[4]) {
  asm("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
      : "=f"(x[0]), "=f"(x[1]), "=f"(x[2]), "=f"(x[3])
      : "l"(p));
}
__device__ __forceinline__ void forge_fa_load_partial(const float* p, float (&x)[1]) {
  x[0] = __ldcg(p);
}
#endif

// Stores row r's finished value at head dim d (acc over the sum of weights l).
__device__ __forceinline__ void forge_fa_finish(FORGE_FA_T* __restrict__ out, long long b,
                                                int kvh, int row, int d, float acc, float l) {
  const int h = kvh * FORGE_FA_G + row / FORGE_FA_SQ;
  const int i = row % FORGE_FA_SQ;
  const float value = l > 0.f ? acc / l : (FORGE_FA_EMPTY_NAN ? __int_as_float(0x7fc00000) : 0.f);
  forge_fa_store(out + b * FORGE_FA_O_SB + (long long)h * FORGE_FA_O_SH +
                     (long long)i * FORGE_FA_O_SI + (long long)d * FORGE_FA_O_SD,
                 value);
}

template <typename MaskT>
__device__ __forceinline__ void forge_fa_run(const FORGE_FA_T* __restrict__ q,
                                             const FORGE_FA_T* __restrict__ k,
                                             const FORGE_FA_T* __restrict__ v,
                                             const MaskT* __restrict__ mask,
                                             FORGE_FA_T* __restrict__ out) {
  __shared__ float s_acc[FORGE_FA_WARPS][FORGE_FA_ROWS][FORGE_FA_D];
  __shared__ float s_m[FORGE_FA_WARPS][FORGE_FA_ROWS];
  __shared__ float s_l[FORGE_FA_WARPS][FORGE_FA_ROWS];
  const int split = blockIdx.x;
  const int group = blockIdx.y;
  const int chunk = blockIdx.z;
  const long long b = group / FORGE_FA_HKV;
  const int kvh = group % FORGE_FA_HKV;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int key_lane = lane / FORGE_FA_LPK;  // which of the warp's keys this lane reads
  const int d_lane = lane % FORGE_FA_LPK;    // which vectors of that key

  // The block's rows of Q, pre-scaled, as float: lane d_lane holds vectors d_lane, d_lane + LPK...
  float qr[FORGE_FA_ROWS][kForgeFaWidth];
#pragma unroll
  for (int r = 0; r < FORGE_FA_ROWS; ++r) {
    const int row = chunk * FORGE_FA_ROWS + r;
    const int h = kvh * FORGE_FA_G + row / FORGE_FA_SQ;
    const int i = row % FORGE_FA_SQ;
#pragma unroll
    for (int n = 0; n < FORGE_FA_NV; ++n) {
      const int d0 = (n * FORGE_FA_LPK + d_lane) * FORGE_FA_VEC;
      ForgeFaVec vec;
      if (row < kForgeFaGroupRows && d0 < FORGE_FA_D) {
        vec = *reinterpret_cast<const ForgeFaVec*>(q + FORGE_FA_Q_OFF + b * FORGE_FA_Q_SB +
                                                  (long long)h * FORGE_FA_Q_SH +
                                                  (long long)i * FORGE_FA_Q_SI + d0);
      } else {
#pragma unroll
        for (int e = 0; e < FORGE_FA_VEC; ++e) vec.v[e] = FORGE_FA_T{};
      }
#pragma unroll
      for (int e = 0; e < FORGE_FA_VEC; ++e) {
        qr[r][n * FORGE_FA_VEC + e] = forge_fa_float(vec.v[e]) * FORGE_FA_QSCALE;
      }
    }
  }

  float m[FORGE_FA_ROWS], l[FORGE_FA_ROWS], acc[FORGE_FA_ROWS][kForgeFaWidth];
#pragma unroll
  for (int r = 0; r < FORGE_FA_ROWS; ++r) {
    m[r] = FORGE_FA_NEG_INF;
    l[r] = 0.f;
#pragma unroll
    for (int e = 0; e < kForgeFaWidth; ++e) acc[r][e] = 0.f;
  }

  const long long k_begin = (long long)split * FORGE_FA_SPLIT_KEYS;
  const long long k_end =
      k_begin + FORGE_FA_SPLIT_KEYS < FORGE_FA_KEYS ? k_begin + FORGE_FA_SPLIT_KEYS : FORGE_FA_KEYS;
  const FORGE_FA_T* __restrict__ kb =
      k + FORGE_FA_K_OFF + b * FORGE_FA_K_SB + (long long)kvh * FORGE_FA_K_SH;
  const FORGE_FA_T* __restrict__ vb =
      v + FORGE_FA_V_OFF + b * FORGE_FA_V_SB + (long long)kvh * FORGE_FA_V_SH;
  const long long j_first = k_begin + warp * kForgeFaKeysPerWarp;
  constexpr long long kStepKeys = (long long)kForgeFaKeysPerStep * FORGE_FA_UNROLL;
#if FORGE_FA_STAGES > 0
  __shared__ ForgeFaVec s_ring[kForgeFaRingSlots * kForgeFaThreads];
  // The first STAGES - 1 steps requested before the loop; each iteration requests the step
  // STAGES - 1 ahead into the stage the previous iteration read, then waits for its own.
#pragma unroll
  for (int s = 0; s < FORGE_FA_STAGES - 1; ++s) {
    forge_fa_request(s_ring, s, j_first + s * kStepKeys, k_end, kb, vb, key_lane, d_lane);
  }
  int stage = 0;
#endif
  // The loop bound is the warp's, so every lane runs every iteration (the shuffles need them).
  for (long long j_warp = j_first; j_warp < k_end; j_warp += kStepKeys) {
    ForgeFaVec kv[FORGE_FA_UNROLL][FORGE_FA_NV], vv[FORGE_FA_UNROLL][FORGE_FA_NV];
#if FORGE_FA_STAGES > 0
    forge_fa_request(s_ring, (stage + FORGE_FA_STAGES - 1) % FORGE_FA_STAGES,
                     j_warp + (FORGE_FA_STAGES - 1) * kStepKeys, k_end, kb, vb, key_lane, d_lane);
    asm volatile("cp.async.wait_group %0;" ::"n"(FORGE_FA_STAGES - 1) : "memory");
#endif
    forge_fa_step_vectors(j_warp, k_end, key_lane, d_lane,
                          [&](int u, int n, long long j, int d0, bool in_bounds) {
      if (in_bounds) {
#if FORGE_FA_STAGES > 0
        kv[u][n] = s_ring[forge_fa_ring_index(stage, u, n, 0)];
        vv[u][n] = s_ring[forge_fa_ring_index(stage, u, n, 1)];
#else
        kv[u][n] = *reinterpret_cast<const ForgeFaVec*>(kb + j * FORGE_FA_K_SJ + d0);
        vv[u][n] = *reinterpret_cast<const ForgeFaVec*>(vb + j * FORGE_FA_V_SJ + d0);
#endif
      } else {
#pragma unroll
        for (int e = 0; e < FORGE_FA_VEC; ++e) kv[u][n].v[e] = vv[u][n].v[e] = FORGE_FA_T{};
      }
    });
#if FORGE_FA_STAGES > 0
    stage = stage + 1 == FORGE_FA_STAGES ? 0 : stage + 1;
#endif
    float t[FORGE_FA_UNROLL][FORGE_FA_ROWS];
#pragma unroll
    for (int u = 0; u < FORGE_FA_UNROLL; ++u) {
      const long long j = j_warp + (long long)u * kForgeFaKeysPerStep + key_lane;
#pragma unroll
      for (int r = 0; r < FORGE_FA_ROWS; ++r) {
        float x = 0.f;
#pragma unroll
        for (int n = 0; n < FORGE_FA_NV; ++n) {
#pragma unroll
          for (int e = 0; e < FORGE_FA_VEC; ++e) {
            x = fmaf(qr[r][n * FORGE_FA_VEC + e], forge_fa_float(kv[u][n].v[e]), x);
          }
        }
#pragma unroll
        for (int offset = FORGE_FA_LPK / 2; offset > 0; offset /= 2) {
          x += __shfl_xor_sync(0xffffffffu, x, offset);
        }
        // Rows past the group's (the last chunk's padding) read no mask.
        const int row = chunk * FORGE_FA_ROWS + r;
        t[u][r] = j < k_end && row < kForgeFaGroupRows
                      ? forge_fa_score(x, mask, b, kvh * FORGE_FA_G + row / FORGE_FA_SQ,
                                       row % FORGE_FA_SQ, j)
                      : FORGE_FA_NEG_INF;
      }
    }
#pragma unroll
    for (int r = 0; r < FORGE_FA_ROWS; ++r) {
      float top = m[r];
#pragma unroll
      for (int u = 0; u < FORGE_FA_UNROLL; ++u) top = fmaxf(top, t[u][r]);
      const float ref = forge_fa_ref(top);
      const float correction = forge_fast_exp2(m[r] - ref);
      l[r] *= correction;
#pragma unroll
      for (int e = 0; e < kForgeFaWidth; ++e) acc[r][e] *= correction;
#pragma unroll
      for (int u = 0; u < FORGE_FA_UNROLL; ++u) {
        const float p = forge_fast_exp2(t[u][r] - ref);
        l[r] += p;
#pragma unroll
        for (int n = 0; n < FORGE_FA_NV; ++n) {
#pragma unroll
          for (int e = 0; e < FORGE_FA_VEC; ++e) {
            acc[r][n * FORGE_FA_VEC + e] =
                fmaf(p, forge_fa_float(vv[u][n].v[e]), acc[r][n * FORGE_FA_VEC + e]);
          }
        }
      }
      m[r] = top;
    }
  }

#if FORGE_FA_STAGES > 0
  // Only empty groups (steps past the split) can be pending; none outlives the loop.
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif

  // The warp's lane groups merged (butterfly over the key lanes), then written for the block.
#pragma unroll
  for (int offset = FORGE_FA_LPK; offset < 32; offset *= 2) {
#pragma unroll
    for (int r = 0; r < FORGE_FA_ROWS; ++r) {
      const float m_other = __shfl_xor_sync(0xffffffffu, m[r], offset);
      const float l_other = __shfl_xor_sync(0xffffffffu, l[r], offset);
      const float top = fmaxf(m[r], m_other);
      const float ref = forge_fa_ref(top);
      const float mine = forge_fast_exp2(m[r] - ref), theirs = forge_fast_exp2(m_other - ref);
      l[r] = l[r] * mine + l_other * theirs;
#pragma unroll
      for (int e = 0; e < kForgeFaWidth; ++e) {
        const float a_other = __shfl_xor_sync(0xffffffffu, acc[r][e], offset);
        acc[r][e] = acc[r][e] * mine + a_other * theirs;
      }
      m[r] = top;
    }
  }
  if (key_lane == 0) {
#pragma unroll
    for (int r = 0; r < FORGE_FA_ROWS; ++r) {
#pragma unroll
      for (int n = 0; n < FORGE_FA_NV; ++n) {
        const int d0 = (n * FORGE_FA_LPK + d_lane) * FORGE_FA_VEC;
        if (d0 >= FORGE_FA_D) continue;
#pragma unroll
        for (int e = 0; e < FORGE_FA_VEC; ++e) s_acc[warp][r][d0 + e] = acc[r][n * FORGE_FA_VEC + e];
      }
      if (d_lane == 0) {
        s_m[warp][r] = m[r];
        s_l[warp][r] = l[r];
      }
    }
  }
  __syncthreads();

  // The warps merged in warp order, element (row, d) per thread.
  for (int index = threadIdx.x; index < FORGE_FA_ROWS * FORGE_FA_D; index += kForgeFaThreads) {
    const int r = index / FORGE_FA_D, d = index % FORGE_FA_D;
    float top = FORGE_FA_NEG_INF;
#pragma unroll
    for (int w = 0; w < FORGE_FA_WARPS; ++w) top = fmaxf(top, s_m[w][r]);
    const float ref = forge_fa_ref(top);
    float sum = 0.f, weight = 0.f;
#pragma unroll
    for (int w = 0; w < FORGE_FA_WARPS; ++w) {
      const float scale = forge_fast_exp2(s_m[w][r] - ref);
      weight = fmaf(s_l[w][r], scale, weight);
      sum = fmaf(s_acc[w][r][d], scale, sum);
    }
#if FORGE_FA_SPLITS == 1
    const int row = chunk * FORGE_FA_ROWS + r;
    if (row < kForgeFaGroupRows) forge_fa_finish(out, b, kvh, row, d, sum, weight);
#else
    const long long slot = ((long long)group * FORGE_FA_CHUNKS + chunk) * FORGE_FA_ROWS + r;
    forge_fa_part_o[(slot * FORGE_FA_SPLITS + split) * FORGE_FA_D + d] = sum;
    if (d == 0) {
      forge_fa_part_m[slot * FORGE_FA_SPLITS + split] = top;
      forge_fa_part_l[slot * FORGE_FA_SPLITS + split] = weight;
    }
#endif
  }

#if FORGE_FA_SPLITS > 1
  // The last split to arrive combines every split's partials, in split order.
  __shared__ float s_w[FORGE_FA_ROWS][FORGE_FA_SPLITS];
  __shared__ float s_total[FORGE_FA_ROWS];
  __shared__ bool s_last;
  __threadfence();
  __syncthreads();
  const int ticket = group * FORGE_FA_CHUNKS + chunk;
  if (threadIdx.x == 0) {
    s_last = atomicAdd(&forge_fa_ticket[ticket], 1u) == FORGE_FA_SPLITS - 1;
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  const long long slot0 = ((long long)group * FORGE_FA_CHUNKS + chunk) * FORGE_FA_ROWS;
  // Per row, one warp: the splits' maxima and weights, lanes over splits in a fixed order.
  for (int r = warp; r < FORGE_FA_ROWS; r += FORGE_FA_WARPS) {
    const long long base = (slot0 + r) * FORGE_FA_SPLITS;
    float top = FORGE_FA_NEG_INF;
    for (int s = lane; s < FORGE_FA_SPLITS; s += 32) top = fmaxf(top, __ldcg(&forge_fa_part_m[base + s]));
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, offset));
    }
    const float ref = forge_fa_ref(top);
    float total = 0.f;
    for (int s = lane; s < FORGE_FA_SPLITS; s += 32) {
      const float w = forge_fast_exp2(__ldcg(&forge_fa_part_m[base + s]) - ref);
      s_w[r][s] = w;
      total = fmaf(__ldcg(&forge_fa_part_l[base + s]), w, total);
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      total += __shfl_xor_sync(0xffffffffu, total, offset);
    }
    if (lane == 0) s_total[r] = total;
  }
  __syncthreads();
  constexpr int kVectors = FORGE_FA_D / kForgeFaCombineVec;
  for (int index = threadIdx.x; index < FORGE_FA_ROWS * kVectors; index += kForgeFaThreads) {
    const int r = index / kVectors, d = index % kVectors * kForgeFaCombineVec;
    const int row = chunk * FORGE_FA_ROWS + r;
    if (row >= kForgeFaGroupRows) continue;
    const float* part = forge_fa_part_o + (slot0 + r) * FORGE_FA_SPLITS * FORGE_FA_D + d;
    float sum[kForgeFaCombineVec];
#pragma unroll
    for (int e = 0; e < kForgeFaCombineVec; ++e) sum[e] = 0.f;
#pragma unroll 8
    for (int s = 0; s < FORGE_FA_SPLITS; ++s) {
      float x[kForgeFaCombineVec];
      forge_fa_load_partial(part + (long long)s * FORGE_FA_D, x);
#pragma unroll
      for (int e = 0; e < kForgeFaCombineVec; ++e) sum[e] = fmaf(s_w[r][s], x[e], sum[e]);
    }
#pragma unroll
    for (int e = 0; e < kForgeFaCombineVec; ++e) {
      forge_fa_finish(out, b, kvh, row, d + e, sum[e], s_total[r]);
    }
  }
  // Every split of this launch has taken its ticket: the next launch starts from 0.
  if (threadIdx.x == 0) forge_fa_ticket[ticket] = 0;
#endif
}
