// The chained_scan template's kernel, for few long rows (a row of a million elements and more):
// the blocks of a row share it, one tile each, and pass the prefix from tile to tile in one pass
// (a decoupled look-back in the manner of Merrill & Garland, made deterministic). Embedded at
// build time after scan_prelude.cuh, what the emitter writes per task and point (ForgeScanOp,
// ForgeScanAcc, ForgeScanIndex, the constants kRows, kLength, kThreadsPerRow, kVectorWidth,
// kChunks, kTilesPerLane, kTilesPerRow, kGroupsPerRow, and forge_scan_load / forge_scan_store:
// row_scan.cuh says what they do) and tile.cuh (a tile's loads, scans and stores).
//
// A block takes the next tile from a ticket counter (so every tile before it belongs to a block
// already running: the waits below always end; consecutive tickets go to the rows in turn, so
// the rows' chains below advance side by side), scans it as row_scan scans a tile, and publishes
// the tile's total (its aggregate). Its prefix is combined in a fixed order, whatever the timing:
// the tiles of a row form groups of 32 x kTilesPerLane, lane k of a warp folding the aggregates
// of the group's tiles k * kTilesPerLane ... (k + 1) * kTilesPerLane - 1 in order, then the warp
// scanning the lanes' folds (Hillis-Steele). The prefix of tile j of group g is P(g - 1), the
// inclusive prefix of the groups before, combined with the aggregates of the group's tiles before
// j, so combined; the group's last tile publishes P(g) = P(g - 1) combined with all of them. Only P
// chains from block to block: one wait per group.
//
// The flags live in __device__ arrays of the module, zero at load, and hold the epoch of the
// launch that wrote them (the ticket counter, never reset, says which launch a block belongs to:
// ticket / tiles + 1), so no launch needs a memset and a flag left by an earlier launch never
// matches. Launches of one loaded module must not overlap (the judge and the timer launch one at
// a time on one stream).
//
// The emitter replaces FORGE_SCAN_PARAMETERS and FORGE_SCAN_ARGUMENTS as in row_scan.cuh.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN

constexpr long long kTiles = kRows * kTilesPerRow;
constexpr long long kGroupTiles = 32LL * kTilesPerLane;

// Static: the runtime's extension compiles each task's kernel in a translation unit of its own,
// and two of them must not define one host-side symbol.
static __device__ unsigned long long forge_scan_ticket;  // tiles taken by every launch so far
static __device__ unsigned long long forge_scan_aggregate_epoch[kTiles];
static __device__ ForgeScanAcc forge_scan_aggregate[kTiles];
static __device__ unsigned long long forge_scan_prefix_epoch[kRows * kGroupsPerRow];
static __device__ ForgeScanAcc forge_scan_prefix[kRows * kGroupsPerRow];

// A component loaded from L2 (not from a stale L1 line), through its address.
struct ForgeScanLoadL2 {
  template <class X>
  __device__ __forceinline__ X operator()(const X& x) const {
    return __ldcg(&x);
  }
};

// Publishes `value` at `slot` for the launch of `epoch`: the value is visible before the flag.
__device__ __forceinline__ void forge_scan_publish(ForgeScanAcc* slot, unsigned long long* flag,
                                                   const ForgeScanAcc& value,
                                                   unsigned long long epoch) {
  *slot = value;
  __threadfence();
  atomicExch(flag, epoch);
}

// The value at `slot` once its flag says the launch of `epoch` wrote it.
__device__ __forceinline__ ForgeScanAcc forge_scan_wait(const ForgeScanAcc* slot,
                                                        const unsigned long long* flag,
                                                        unsigned long long epoch) {
  while (*(volatile const unsigned long long*)flag != epoch) {
  }
  __threadfence();
  return forge_scan_each(*slot, ForgeScanLoadL2{});
}

extern "C" __global__ void __launch_bounds__(kThreadsPerRow) forge_scan(FORGE_SCAN_PARAMETERS) {
  __shared__ ForgeScanAcc warp_totals[kWarpsPerRow];
  __shared__ ForgeScanAcc tile_prefix;
  __shared__ unsigned long long ticket;
  if (threadIdx.x == 0) ticket = atomicAdd(&forge_scan_ticket, 1ull);
  __syncthreads();
  const unsigned long long epoch = ticket / kTiles + 1;
  const long long tile_number = (long long)(ticket % kTiles);
  const long long row_number = tile_number % kRows;  // the rows take turns
  const long long j = tile_number / kRows;            // the tile's place in its row
  const long long slot = row_number * kTilesPerRow + j;
  const ForgeScanIndex row = (ForgeScanIndex)row_number;
  const int lane = threadIdx.x;
  const long long tile = j * kTile;

  ForgeScanAcc x[kItems];
  forge_scan_tile_load(FORGE_SCAN_ARGUMENTS, true, row, tile, lane, x);
  ForgeScanAcc aggregate;
  const ForgeScanAcc before =
      forge_row_exclusive_scan<kThreadsPerRow, ForgeScanOp>(x[kItems - 1], warp_totals, &aggregate);
  if (threadIdx.x == 0) {
    forge_scan_publish(&forge_scan_aggregate[slot], &forge_scan_aggregate_epoch[slot], aggregate,
                       epoch);
  }
  if (threadIdx.x < 32) {
    // The first warp combines the prefix from the aggregates of the group's earlier tiles.
    const long long group = j / kGroupTiles;
    const int place = (int)(j % kGroupTiles);
    const long long first = row_number * kTilesPerRow + group * kGroupTiles;
    const int holder = place / kTilesPerLane;  // the lane whose tiles include this one
    ForgeScanAcc before_place = ForgeScanOp::identity();  // holder: its tiles before this one
    ForgeScanAcc mine = ForgeScanOp::identity();          // the fold of the lane's tiles up to j
#pragma unroll
    for (int k = 0; k < kTilesPerLane; ++k) {
      const int p = threadIdx.x * kTilesPerLane + k;
      if (p < place) {
        mine = ForgeScanOp()(mine, forge_scan_wait(&forge_scan_aggregate[first + p],
                                                   &forge_scan_aggregate_epoch[first + p], epoch));
        before_place = mine;
      } else if (p == place) {
        mine = ForgeScanOp()(mine, aggregate);
      }
    }
    const ForgeScanAcc scanned = forge_warp_inclusive_scan<ForgeScanOp>(mine);
    const ForgeScanAcc lanes_before = forge_scan_shfl_from(scanned, holder > 0 ? holder - 1 : 0);
    const ForgeScanAcc holder_before = forge_scan_shfl_from(before_place, holder);
    const ForgeScanAcc through_this = forge_scan_shfl_from(scanned, holder);
    if (threadIdx.x == 0) {
      const long long group_slot = row_number * kGroupsPerRow + group;
      ForgeScanAcc prefix = ForgeScanOp::identity();
      if (group > 0) {
        prefix = forge_scan_wait(&forge_scan_prefix[group_slot - 1],
                                 &forge_scan_prefix_epoch[group_slot - 1], epoch);
      }
      // Combining with the identity is exact: the first lane and tile need no special case.
      const ForgeScanAcc in_group =
          ForgeScanOp()(holder > 0 ? lanes_before : ForgeScanOp::identity(), holder_before);
      tile_prefix = ForgeScanOp()(prefix, in_group);
      if (place == kGroupTiles - 1 || j == kTilesPerRow - 1) {
        forge_scan_publish(&forge_scan_prefix[group_slot], &forge_scan_prefix_epoch[group_slot],
                           ForgeScanOp()(prefix, through_this), epoch);
      }
    }
  }
  __syncthreads();
  forge_scan_tile_store(FORGE_SCAN_ARGUMENTS, true, row, tile, lane,
                        ForgeScanOp()(tile_prefix, before), x);
}
