// The cross_entropy template's kernel, embedded at build time after reduction_prelude.cuh and the
// constants the emitter writes per task and point (kRows, kClasses, strides and offsets,
// kIgnoreIndex, kThreadsPerRow, kRowsPerBlock, kVectorWidth, kGridBlocks, kMean, the
// ForgeCeLogit / ForgeCeAcc types and forge_ce_load / forge_ce_store).
//
// The loss of each counted row is max + log(sum exp(x - max)) - x[target] (online softmax over
// the row, threads_per_row threads, vector_width elements per load); with label smoothing e
// (kSmoothed), lse - (1 - e) x[target] - e/C sum_c x_c, the row's sum of logits taken in the
// same pass; nll_loss (kNll) takes the row's log-probabilities as given: its loss is -x[target],
// with no pass over the row. With class weights (kWeighted) a row's loss is multiplied by its target's weight
// and the mean divides by the counted rows' weights; reduction none (kNone) writes each row's
// loss (0 for an ignored row) and no sum. Blocks stride over the rows;
// each writes its partial sum and count to a __device__ array, and the last block to finish (an
// integer atomic counter) adds them up in block order and resets the counter. The result depends
// only on the schedule point, not on which blocks finish first. The arrays and the counter are
// per loaded module: two launches of one module must not overlap (the judge and the timer launch
// one at a time on one stream).
//
// The emitter replaces FORGE_CE_PARAMETERS with the kernel's parameter list (the generated-kernel
// ABI) and FORGE_CE_ALIASES with the names the body reads (logits, target, out).
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN

constexpr int kBlockThreads = kThreadsPerRow * kRowsPerBlock;
constexpr int kWarpsPerRow = kThreadsPerRow / 32;
constexpr int kChunkColumns = kThreadsPerRow * kVectorWidth;
constexpr int kChunksPerThread = (kClasses + kChunkColumns - 1) / kChunkColumns;
constexpr bool kChunksCoverExactly = kClasses % kChunkColumns == 0;

__device__ ForgeCeAcc forge_ce_block_loss[kGridBlocks];
__device__ int forge_ce_block_count[kGridBlocks];
__device__ ForgeCeAcc forge_ce_block_weight[kWeighted ? kGridBlocks : 1];
__device__ unsigned int forge_ce_blocks_done;  // 0 at module load; the last block resets it

extern "C" __global__ void __launch_bounds__(kBlockThreads)
forge_cross_entropy(FORGE_CE_PARAMETERS) {
  FORGE_CE_ALIASES
  __shared__ ForgeSoftmaxAcc<ForgeCeAcc> scratch[kRowsPerBlock][kWarpsPerRow];
  __shared__ ForgeCeAcc sum_scratch[kSmoothed ? kRowsPerBlock : 1][kWarpsPerRow];
  __shared__ ForgeCeAcc row_group_loss[kRowsPerBlock];
  __shared__ int row_group_count[kRowsPerBlock];
  __shared__ ForgeCeAcc row_group_weight[kRowsPerBlock];
  __shared__ double warp_loss[kBlockThreads / 32];
  __shared__ long long warp_count[kBlockThreads / 32];
  __shared__ double warp_weight[kBlockThreads / 32];
  __shared__ bool last_block;
  const int lane = threadIdx.x % kThreadsPerRow;
  const int row_in_block = threadIdx.x / kThreadsPerRow;
  ForgeCeAcc loss_sum = 0;  // this row group's rows, kept by its lane 0
  int count = 0;
  ForgeCeAcc weight_sum = 0;  // of the counted rows' target weights (kWeighted)
  // `first` is the same for the whole block: every thread reaches the row reduction's barriers.
  for (long long first = (long long)blockIdx.x * kRowsPerBlock; first < kRows;
       first += (long long)kGridBlocks * kRowsPerBlock) {
    const long long row = first + row_in_block;
    const long long target_class =
        row < kRows ? target[kTargetOffset + row * kTargetStride] : kIgnoreIndex;
    const bool counted = target_class != kIgnoreIndex;
    const ForgeCeLogit* row_logits = logits + kLogitsOffset + row * kRowStride;
    ForgeSoftmaxAcc<ForgeCeAcc> acc = {-(ForgeCeAcc)forge_inf(), (ForgeCeAcc)0};
    ForgeCeAcc row_sum = 0;  // of the logits, with label smoothing
    if (!kNll && counted) {
      // Where every chunk is in the row the loop body has no bounds check: the unrolled chunks'
      // loads issue together.
#pragma unroll 4
      for (int j = 0; j < kChunksPerThread; ++j) {
        const int c0 = (j * kThreadsPerRow + lane) * kVectorWidth;
        if (!kChunksCoverExactly && c0 >= kClasses) break;
        ForgeCeAcc x[kVectorWidth];
        if (kVectorWidth > 1) {
          const ForgeVec<ForgeCeLogit, kVectorWidth> chunk =
              *reinterpret_cast<const ForgeVec<ForgeCeLogit, kVectorWidth>*>(row_logits + c0);
#pragma unroll
          for (int v = 0; v < kVectorWidth; ++v) x[v] = forge_ce_load(chunk.v[v]);
        } else {
          x[0] = forge_ce_load(row_logits[(long long)c0 * kClassStride]);
        }
        forge_softmax_add(acc, x);
        if constexpr (kSmoothed) {
#pragma unroll
          for (int v = 0; v < kVectorWidth; ++v) row_sum += x[v];
        }
      }
    }
    if constexpr (!kNll) {
      acc = forge_row_allreduce<kThreadsPerRow>(acc, ForgeSoftmaxOp(), scratch[row_in_block]);
    }
    if constexpr (kSmoothed) {
      row_sum = forge_row_allreduce<kThreadsPerRow>(row_sum, ForgeSumOp(),
                                                    sum_scratch[row_in_block]);
    }
    if (lane == 0 && counted) {
      // ATen asserts on a target outside [0, C); here it makes the loss NaN.
      const ForgeCeAcc picked = target_class >= 0 && target_class < kClasses
                                    ? forge_ce_load(row_logits[target_class * kClassStride])
                                    : (ForgeCeAcc)forge_nan();
      // nll_loss: the input holds log-probabilities already.
      const ForgeCeAcc lse = kNll ? (ForgeCeAcc)0 : acc.max + forge_log(acc.sum);
      ForgeCeAcc loss = lse - picked;
      if constexpr (kSmoothed) {
        loss = lse - (ForgeCeAcc)(1 - kLabelSmoothing) * picked -
               (ForgeCeAcc)(kLabelSmoothing / (double)kClasses) * row_sum;
      }
      if constexpr (kWeighted) {
        const ForgeCeAcc row_weight =
            target_class >= 0 && target_class < kClasses
                ? forge_ce_load(weight[kWeightOffset + target_class * kWeightStride])
                : (ForgeCeAcc)forge_nan();
        loss *= row_weight;
        weight_sum += row_weight;
      }
      if constexpr (kNone) out[row * kOutStride] = forge_ce_store(loss);
      loss_sum += loss;
      ++count;
    } else if (kNone && lane == 0 && row < kRows) {
      out[row * kOutStride] = forge_ce_store((ForgeCeAcc)0);
    }
  }
  if constexpr (kNone) return;  // every row's loss is written; no sum
  if (lane == 0) {
    row_group_loss[row_in_block] = loss_sum;
    row_group_count[row_in_block] = count;
    row_group_weight[row_in_block] = weight_sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ForgeCeAcc block_loss = 0, block_weight = 0;
    int block_count = 0;
    for (int r = 0; r < kRowsPerBlock; ++r) {
      block_loss += row_group_loss[r];
      block_count += row_group_count[r];
      block_weight += row_group_weight[r];
    }
    forge_ce_block_loss[blockIdx.x] = block_loss;
    forge_ce_block_count[blockIdx.x] = block_count;
    if constexpr (kWeighted) forge_ce_block_weight[blockIdx.x] = block_weight;
    __threadfence();  // the partials are visible before the counter says so
    last_block = atomicAdd(&forge_ce_blocks_done, 1u) == kGridBlocks - 1;
  }
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  // Fixed order: thread t adds blocks t, t + kBlockThreads, ...; then warps, then thread 0.
  double total = 0, total_weight = 0;
  long long total_count = 0;
  for (int b = threadIdx.x; b < kGridBlocks; b += kBlockThreads) {
    total += (double)__ldcg(&forge_ce_block_loss[b]);
    total_count += __ldcg(&forge_ce_block_count[b]);
    if constexpr (kWeighted) total_weight += (double)__ldcg(&forge_ce_block_weight[b]);
  }
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) {
    total += __shfl_xor_sync(0xffffffffu, total, mask);
    total_count += __shfl_xor_sync(0xffffffffu, total_count, mask);
    if constexpr (kWeighted) total_weight += __shfl_xor_sync(0xffffffffu, total_weight, mask);
  }
  if (threadIdx.x % 32 == 0) {
    warp_loss[threadIdx.x / 32] = total;
    warp_count[threadIdx.x / 32] = total_count;
    warp_weight[threadIdx.x / 32] = total_weight;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double loss = 0, weights = 0;
    long long rows_counted = 0;
    for (int w = 0; w < kBlockThreads / 32; ++w) {
      loss += warp_loss[w];
      rows_counted += warp_count[w];
      weights += warp_weight[w];
    }
    // Mean over no counted row (or weights summing to 0) is 0 / 0 = NaN, as ATen's.
    const double divisor = kWeighted ? weights : (double)rows_counted;
    out[0] = forge_ce_store((ForgeCeAcc)(kMean ? loss / divisor : loss));
    forge_ce_blocks_done = 0;
  }
}
