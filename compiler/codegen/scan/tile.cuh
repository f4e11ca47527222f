// What row_scan and chained_scan share: a thread's part of a tile (its kChunks consecutive
// vectors of kVectorWidth elements), loaded and scanned in order, and stored after the prefix of
// everything before it is combined in front. Embedded at build time after the element functions
// (forge_scan_load, forge_scan_store) and the constants of the template (kThreadsPerRow,
// kVectorWidth, kChunks, kLength); the emitter replaces FORGE_SCAN_PARAMETERS and
// FORGE_SCAN_ARGUMENTS as in row_scan.cuh.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN

constexpr int kItems = kVectorWidth * kChunks;
constexpr long long kTile = (long long)kThreadsPerRow * kItems;
constexpr int kWarpsPerRow = kThreadsPerRow / 32;

// The first column of chunk c of the thread at `lane` of the row's threads, in the tile at `tile`.
__device__ __forceinline__ long long forge_scan_chunk_column(long long tile, int lane, int c) {
  return tile + ((long long)lane * kChunks + c) * kVectorWidth;
}

// x[i]: the combination of this thread's items 0..i of the tile (the identity past the row's end,
// and everywhere for a thread without a row: `live` false).
__device__ __forceinline__ void forge_scan_tile_load(FORGE_SCAN_PARAMETERS, bool live,
                                                     ForgeScanIndex row, long long tile, int lane,
                                                     ForgeScanAcc (&x)[kItems]) {
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const long long col = forge_scan_chunk_column(tile, lane, c);
    ForgeScanAcc chunk[kVectorWidth];
    if (live && col < kLength) {
      forge_scan_load(FORGE_SCAN_ARGUMENTS, row, (ForgeScanIndex)col, chunk);
    } else {
#pragma unroll
      for (int v = 0; v < kVectorWidth; ++v) chunk[v] = ForgeScanOp::identity();
    }
#pragma unroll
    for (int v = 0; v < kVectorWidth; ++v) x[c * kVectorWidth + v] = chunk[v];
  }
#pragma unroll
  for (int i = 1; i < kItems; ++i) x[i] = ForgeScanOp()(x[i - 1], x[i]);
}

// Stores prefix combined with x[i], for every item of this thread in the row.
__device__ __forceinline__ void forge_scan_tile_store(FORGE_SCAN_PARAMETERS, bool live,
                                                      ForgeScanIndex row, long long tile, int lane,
                                                      const ForgeScanAcc& prefix,
                                                      const ForgeScanAcc (&x)[kItems]) {
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const long long col = forge_scan_chunk_column(tile, lane, c);
    if (!live || col >= kLength) continue;
    ForgeScanAcc chunk[kVectorWidth];
#pragma unroll
    for (int v = 0; v < kVectorWidth; ++v) {
      chunk[v] = ForgeScanOp()(prefix, x[c * kVectorWidth + v]);
    }
    forge_scan_store(FORGE_SCAN_ARGUMENTS, row, (ForgeScanIndex)col, chunk);
  }
}
