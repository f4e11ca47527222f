// The row_scan template's kernel, embedded at build time after scan_prelude.cuh, what the
// emitter writes per task and point and tile.cuh (a tile's loads, scans and stores). Per task:
// ForgeScanOp, ForgeScanAcc, ForgeScanCarry, ForgeScanIndex, the constants kRows, kLength,
// kThreadsPerRow, kRowsPerBlock, kVectorWidth, kChunks, and the element functions forge_scan_load
// (the scanned element at (row, col .. col + kVectorWidth - 1), computed from the task's inputs by
// the fused prologue) and forge_scan_store (the fused epilogue of the scanned elements, and the
// stores of every task output there).
//
// A row (the scanned dim is the last; `row` numbers the others in row-major order) is scanned by
// kThreadsPerRow threads, kRowsPerBlock rows per block, in tiles of kThreadsPerRow x kChunks x
// kVectorWidth elements: each thread loads kChunks consecutive vectors, scans them in order, the
// row's threads scan their totals (warp shuffles, then the warps' totals through shared memory),
// and the carry of the earlier tiles is combined in front. Every combination happens in an order
// fixed by the schedule point: the same bits every launch.
//
// The emitter replaces FORGE_SCAN_PARAMETERS with the kernel's parameter list (the generated-
// kernel ABI) and FORGE_SCAN_ARGUMENTS with the same names, passed on to the element functions.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN

extern "C" __global__ void __launch_bounds__(kThreadsPerRow * kRowsPerBlock)
forge_scan(FORGE_SCAN_PARAMETERS) {
  // Two buffers, by tile parity: a fast warp's next tile never overwrites totals a slow warp of
  // this row still reads.
  __shared__ ForgeScanAcc warp_totals[2][kRowsPerBlock][kWarpsPerRow];
  const int lane = threadIdx.x % kThreadsPerRow;
  const int row_in_block = threadIdx.x / kThreadsPerRow;
  const long long row_number = (long long)blockIdx.x * kRowsPerBlock + row_in_block;
  // Threads past the last row still reach every barrier.
  const bool live = row_number < kRows;
  const ForgeScanIndex row = (ForgeScanIndex)row_number;
  ForgeScanCarry carry;
  int parity = 0;
  for (long long tile = 0; tile < kLength; tile += kTile, parity ^= 1) {
    ForgeScanAcc x[kItems];
    forge_scan_tile_load(FORGE_SCAN_ARGUMENTS, live, row, tile, lane, x);
    ForgeScanAcc tile_total;
    const ForgeScanAcc before = forge_row_exclusive_scan<kThreadsPerRow, ForgeScanOp>(
        x[kItems - 1], warp_totals[parity][row_in_block], &tile_total);
    forge_scan_tile_store(FORGE_SCAN_ARGUMENTS, live, row, tile, lane,
                          ForgeScanOp()(carry.get(), before), x);
    carry.add(tile_total);
  }
}
