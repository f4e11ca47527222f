// The col_scan template's kernel, embedded at build time after scan_prelude.cuh and what the
// emitter writes per task and point: ForgeScanOp, ForgeScanAcc, ForgeScanCarry, ForgeScanIndex,
// the constants kRows, kLength, kThreads, kUnroll (and kVectorWidth = 1), and the element
// functions forge_scan_load and forge_scan_store (row_scan.cuh says what they do).
//
// For a scanned dim with inner elements after it (dim 1 of (N, C, H, W)): consecutive threads own
// consecutive rows (`row` numbers every position but the scanned dim in row-major order, so
// consecutive rows are consecutive inner positions and a warp's loads are coalesced) and each
// walks its row along the scanned dim, loading kUnroll elements before it combines them. The
// running carry is ForgeKahanCarry for float32 sums (a long column stays within a few ulps), the
// plain combination otherwise; its order is fixed: the same bits every launch.
//
// The emitter replaces FORGE_SCAN_PARAMETERS and FORGE_SCAN_ARGUMENTS as in row_scan.cuh.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN

extern "C" __global__ void __launch_bounds__(kThreads) forge_scan(FORGE_SCAN_PARAMETERS) {
  const long long row_number = (long long)blockIdx.x * kThreads + threadIdx.x;
  if (row_number >= kRows) return;
  const ForgeScanIndex row = (ForgeScanIndex)row_number;
  ForgeScanCarry carry;
  for (long long col = 0; col < kLength; col += kUnroll) {
    ForgeScanAcc x[kUnroll][1];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (col + u < kLength) {
        forge_scan_load(FORGE_SCAN_ARGUMENTS, row, (ForgeScanIndex)(col + u), x[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (col + u >= kLength) break;
      carry.add(x[u][0]);
      const ForgeScanAcc scanned[1] = {carry.get()};
      forge_scan_store(FORGE_SCAN_ARGUMENTS, row, (ForgeScanIndex)(col + u), scanned);
    }
  }
}
