// The layout conversions of a cudnn_conv candidate that runs channels-last inside
// (RunKernelsSource in cudnn_conv.h): a batch of row-major [rows, columns] matrices, each written
// transposed, out[b][c][r] = in[b][r][c]. NCHW -> NHWC is rows = C, columns = H * W; NHWC ->
// NCHW rows = H * W, columns = C; a KCRS filter -> KRSC rows = C / groups, columns = R * S.
// 32 x 32 tiles through shared memory (a padded column, no bank conflicts), so both the reads and
// the writes are coalesced; elements are moved as bits: forge_transpose_2 for 2-byte dtypes
// (float16, bfloat16), forge_transpose_4 for float32. Launch: block (32, 8), grid
// (ceil(columns / 32), ceil(rows / 32), min(batch, 65535)); blocks stride over the batch.
// FORGE_EMBED_BEGIN
template <typename Bits>
__device__ __forceinline__ void forge_transpose_tiles(const Bits* in, Bits* out, long long batch,
                                                      long long rows, long long columns) {
  __shared__ Bits tile[32][33];
  const long long column = blockIdx.x * 32LL + threadIdx.x;
  const long long row_base = blockIdx.y * 32LL;
  const long long out_row = blockIdx.x * 32LL;  // out's rows are in's columns
  const long long out_column = row_base + threadIdx.x;
  for (long long b = blockIdx.z; b < batch; b += gridDim.z) {
    const Bits* matrix = in + b * rows * columns;
    Bits* transposed = out + b * rows * columns;
    for (int i = threadIdx.y; i < 32; i += 8) {
      const long long row = row_base + i;
      if (row < rows && column < columns) tile[i][threadIdx.x] = matrix[row * columns + column];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += 8) {
      const long long row = out_row + i;
      if (row < columns && out_column < rows) {
        transposed[row * rows + out_column] = tile[threadIdx.x][i];
      }
    }
    __syncthreads();
  }
}

extern "C" __global__ void __launch_bounds__(256)
    forge_transpose_2(const unsigned short* in, unsigned short* out, long long batch,
                      long long rows, long long columns) {
  forge_transpose_tiles(in, out, batch, rows, columns);
}

extern "C" __global__ void __launch_bounds__(256)
    forge_transpose_4(const unsigned* in, unsigned* out, long long batch, long long rows,
                      long long columns) {
  forge_transpose_tiles(in, out, batch, rows, columns);
}
