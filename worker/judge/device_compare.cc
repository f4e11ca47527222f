#include "worker/judge/device_compare.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "worker/compile/compile_pool.h"
#include "worker/judge/host_tensor.h"
#include "worker/judge/thread_pool.h"

namespace forge::judge {

// compare_chunk.h's text, embedded at build time (compare_chunk_source.cc).
extern const char kCompareChunkHeader[];

namespace {

// How a comparison kernel turns an element's bits into a double.
enum DecodeMode : int {
  kDecodeTable = 0,  // 1- and 2-byte dtypes: the host's table, indexed by the bits
  kDecodeFloat32 = 1,
  kDecodeFloat64 = 2,
  kDecodeInt32 = 3,
  kDecodeInt64 = 4,
};

constexpr uint32_t kCompareBlock = 256;  // threads per chunk: kThreads of the kernel
constexpr uint32_t kBytesBlock = 256;
constexpr uint32_t kBytesGrid = 1024;  // a grid-stride loop: enough blocks to fill an H200 twice

constexpr char kKernels[] = R"(
namespace forge::judge {

__device__ unsigned long long LoadElementBits(const unsigned char* storage, int element_bytes,
                                              long long index) {
  switch (element_bytes) {
    case 1: return storage[index];
    case 2: return reinterpret_cast<const unsigned short*>(storage)[index];
    case 4: return reinterpret_cast<const unsigned int*>(storage)[index];
    default: return reinterpret_cast<const unsigned long long*>(storage)[index];
  }
}

__device__ double DecodeBits(unsigned long long bits, int mode, const double* table) {
  switch (mode) {
    case 0: return table[bits];
    case 1: return static_cast<double>(__uint_as_float(static_cast<unsigned int>(bits)));
    case 2: return __longlong_as_double(static_cast<long long>(bits));
    case 3: return static_cast<double>(static_cast<int>(static_cast<unsigned int>(bits)));
    default: return static_cast<double>(static_cast<long long>(bits));
  }
}

// 64-bit finalizer of splitmix64: every input bit reaches every output bit.
__device__ unsigned long long Mix(unsigned long long x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace forge::judge

// One block per chunk of `chunk_elements` elements, in tiles of kTile. In a tile every thread
// tallies its own elements (counts, first indices and maxima need no order) and leaves each
// element's two sum terms in shared memory (0 + t is t exactly, and an element the host skips
// adds +0, which changes no non-negative sum); then one thread per sum adds the tile's terms in
// element order, as the host's loop does.
constexpr int kTile = 1024;
constexpr int kThreads = 256;

__device__ void AddOrderFree(forge::judge::ChunkTally& into, const forge::judge::ChunkTally& from) {
  into.unwritten += from.unwritten;
  into.mismatches += from.mismatches;
  into.nan_reference += from.nan_reference;
  into.first_unwritten = forge::judge::SmallerIndex(into.first_unwritten, from.first_unwritten);
  into.first_mismatch = forge::judge::SmallerIndex(into.first_mismatch, from.first_mismatch);
  into.max_abs_error = forge::judge::LargerOf(into.max_abs_error, from.max_abs_error);
  into.max_rel_error = forge::judge::LargerOf(into.max_rel_error, from.max_rel_error);
}

extern "C" __global__ void __launch_bounds__(kThreads) forge_compare_chunks(
    const unsigned char* output, int element_bytes, int decode_mode, const double* table,
    unsigned long long poison, const double* reference, const double* native, long long count,
    long long chunk_elements, double atol, double rtol, double overflow,
    forge::judge::ChunkTally* tallies) {
  __shared__ double error_terms[kTile];
  __shared__ double reference_terms[kTile];
  __shared__ forge::judge::ChunkTally partial[kThreads];
  __shared__ double reference_total;
  const long long begin = static_cast<long long>(blockIdx.x) * chunk_elements;
  const long long end = begin + chunk_elements < count ? begin + chunk_elements : count;
  const bool has_native = native != nullptr;
  forge::judge::ChunkTally mine;
  double error_sum = 0;
  double reference_sum = 0;
  for (long long tile = begin; tile < end; tile += kTile) {
    for (int k = threadIdx.x; k < kTile; k += kThreads) {
      const long long i = tile + k;
      forge::judge::ChunkTally one;  // element i alone
      if (i < end) {
        const unsigned long long bits = forge::judge::LoadElementBits(output, element_bytes, i);
        forge::judge::TallyElement(i, forge::judge::DecodeBits(bits, decode_mode, table),
                                   bits == poison, reference[i], has_native,
                                   has_native ? native[i] : 0.0, atol, rtol, overflow, one);
        AddOrderFree(mine, one);
      }
      error_terms[k] = one.error_norm_squared;
      reference_terms[k] = one.reference_norm_squared;
    }
    __syncthreads();
    const int terms = end - tile < kTile ? static_cast<int>(end - tile) : kTile;
    if (threadIdx.x == 0) {
      for (int k = 0; k < terms; ++k) error_sum += error_terms[k];
    } else if (threadIdx.x == 32) {  // another warp: the two sums run side by side
      for (int k = 0; k < terms; ++k) reference_sum += reference_terms[k];
    }
    __syncthreads();
  }
  partial[threadIdx.x] = mine;
  if (threadIdx.x == 32) reference_total = reference_sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    forge::judge::ChunkTally tally = partial[0];
    for (int t = 1; t < kThreads; ++t) AddOrderFree(tally, partial[t]);
    tally.error_norm_squared = error_sum;
    tally.reference_norm_squared = reference_total;
    tallies[blockIdx.x] = tally;
  }
}

// Sets *differ when the first `bytes` bytes of a and b differ (both 16-byte aligned).
extern "C" __global__ void forge_bytes_differ(const unsigned char* a, const unsigned char* b,
                                              unsigned long long bytes,
                                              unsigned long long* differ) {
  const unsigned long long start = static_cast<unsigned long long>(blockIdx.x) * blockDim.x +
                                   threadIdx.x;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long vectors = bytes / 16;
  const uint4* a16 = reinterpret_cast<const uint4*>(a);
  const uint4* b16 = reinterpret_cast<const uint4*>(b);
  bool found = false;
  for (unsigned long long i = start; i < vectors && !found; i += stride) {
    const uint4 x = a16[i];
    const uint4 y = b16[i];
    found = x.x != y.x || x.y != y.y || x.z != y.z || x.w != y.w;
  }
  for (unsigned long long i = vectors * 16 + start; i < bytes && !found; i += stride) {
    found = a[i] != b[i];
  }
  if (found) *differ = 1;
}

// Adds Mix(word ^ index * golden) over the buffer's 8-byte words (the tail zero-padded): an
// order-free sum, so the same bytes give the same fingerprint on any grid.
extern "C" __global__ void forge_fingerprint(const unsigned char* data, unsigned long long bytes,
                                             unsigned long long* sum) {
  const unsigned long long start = static_cast<unsigned long long>(blockIdx.x) * blockDim.x +
                                   threadIdx.x;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long words = (bytes + 7) / 8;
  const unsigned long long* data8 = reinterpret_cast<const unsigned long long*>(data);
  unsigned long long local = 0;
  for (unsigned long long i = start; i < words; i += stride) {
    unsigned long long word = 0;
    if ((i + 1) * 8 <= bytes) {
      word = data8[i];
    } else {
      for (unsigned long long b = i * 8; b < bytes; ++b) {
        word |= static_cast<unsigned long long>(data[b]) << (8 * (b - i * 8));
      }
    }
    local += forge::judge::Mix(word ^ (i * 0x9E3779B97F4A7C15ull));
  }
  for (int offset = 16; offset > 0; offset /= 2) local += __shfl_down_sync(0xFFFFFFFFu, local, offset);
  if (threadIdx.x % 32 == 0) atomicAdd(sum, local);
}
)";

absl::StatusOr<DecodeMode> DecodeModeOf(forge::v1::DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT32: return kDecodeFloat32;
    case forge::v1::DTYPE_FLOAT64: return kDecodeFloat64;
    case forge::v1::DTYPE_INT32: return kDecodeInt32;
    case forge::v1::DTYPE_INT64: return kDecodeInt64;
    default:
      if (!DecodeTableOf(dtype).empty()) return kDecodeTable;
      return absl::UnimplementedError(
          absl::StrCat("no device comparison for ", forge::v1::DType_Name(dtype)));
  }
}

uint32_t BlocksFor(int64_t threads, uint32_t block) {
  return static_cast<uint32_t>(std::max<int64_t>(1, (threads + block - 1) / block));
}

}  // namespace

const std::string& DeviceCompareSource() {
  static const std::string* const source = new std::string(absl::StrCat(kCompareChunkHeader, kKernels));
  return *source;
}

std::vector<std::string> DeviceCompareOptions() { return {"--fmad=false", "-std=c++17"}; }

absl::StatusOr<gpu::Module> CompileJudgeModule(const gpu::Device& device,
                                               const std::string& source,
                                               std::vector<std::string> options,
                                               const std::string& what) {
  compile::CompilePoolOptions pool_options;
  pool_options.threads = 1;
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<compile::CompilePool> pool,
                         compile::CompilePool::Create(pool_options));
  compile::CompileRequest request;
  request.source = source;
  request.arch = device.properties().arch();
  request.options = std::move(options);
  compile::CompileResult compiled = pool->Compile(request);
  if (!compiled.ok()) {
    return Annotate(compiled.status, absl::StrCat("compiling ", what, ":\n", compiled.log));
  }
  return device.LoadModule(compiled.cubin);
}

absl::StatusOr<std::unique_ptr<DeviceComparer>> DeviceComparer::Create(const gpu::Device& device) {
  FORGE_ASSIGN_OR_RETURN(gpu::Module module,
                         CompileJudgeModule(device, DeviceCompareSource(), DeviceCompareOptions(),
                                            "the judge's device comparison"));
  FORGE_ASSIGN_OR_RETURN(gpu::Kernel compare, module.GetKernel("forge_compare_chunks"));
  FORGE_ASSIGN_OR_RETURN(gpu::Kernel differ, module.GetKernel("forge_bytes_differ"));
  FORGE_ASSIGN_OR_RETURN(gpu::Kernel fingerprint, module.GetKernel("forge_fingerprint"));
  return std::unique_ptr<DeviceComparer>(new DeviceComparer(
      device, std::move(module), std::move(compare), std::move(differ), std::move(fingerprint)));
}

bool DeviceComparer::Handles(const forge::v1::TensorSpec& spec) {
  return DecodeModeOf(spec.dtype()).ok() && IsRowMajor(spec);
}

absl::StatusOr<CUdeviceptr> DeviceComparer::DecodeTable(forge::v1::DType dtype) {
  absl::MutexLock lock(&mutex_);
  auto [entry, inserted] = decode_tables_.try_emplace(static_cast<int>(dtype));
  if (inserted) {
    const absl::Span<const double> table = DecodeTableOf(dtype);
    absl::StatusOr<gpu::DeviceBuffer> buffer = device_.Allocate(table.size() * sizeof(double));
    absl::Status copied = buffer.ok() ? buffer->CopyFromHost(table.data(), buffer->size_bytes())
                                      : buffer.status();
    // Landed before any stream's kernel reads it (a pageable copy may still be in flight).
    if (copied.ok()) copied = device_.Synchronize();
    if (!copied.ok()) {
      decode_tables_.erase(entry);
      return copied;
    }
    entry->second = *std::move(buffer);
  }
  return entry->second.address();
}

absl::StatusOr<std::vector<ChunkTally>> DeviceComparer::CompareChunks(
    const forge::v1::TensorSpec& spec, const gpu::DeviceBuffer& output,
    const gpu::DeviceBuffer& reference, const gpu::DeviceBuffer* native,
    const Tolerances& tolerances, gpu::Stream& stream, std::optional<Poison> poison_filled) {
  if (!Handles(spec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the device comparison does not handle ", DescribeSpec(spec)));
  }
  FORGE_ASSIGN_OR_RETURN(const DecodeMode mode, DecodeModeOf(spec.dtype()));
  FORGE_ASSIGN_OR_RETURN(const int element_bytes, ElementBytes(spec.dtype()));
  long long count = ElementCount(spec);
  const size_t reference_bytes = static_cast<size_t>(count) * sizeof(double);
  if (output.size_bytes() < static_cast<size_t>(count) * element_bytes ||
      reference.size_bytes() < reference_bytes ||
      (native != nullptr && native->size_bytes() < reference_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device comparison of ", DescribeSpec(spec), ": output, reference or native buffer too "
        "small (", output.size_bytes(), ", ", reference.size_bytes(), " bytes)"));
  }
  CUdeviceptr table = 0;
  if (mode == kDecodeTable) {
    FORGE_ASSIGN_OR_RETURN(table, DecodeTable(spec.dtype()));
  }
  const int64_t chunks = ThreadPool::ChunkCount(count);
  std::vector<ChunkTally> tallies(chunks);
  if (chunks == 0) return tallies;
  FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer tally_buffer,
                         device_.Allocate(chunks * sizeof(ChunkTally)));
  CUdeviceptr output_address = output.address();
  int element_bytes_arg = element_bytes;
  int mode_arg = mode;
  unsigned long long poison =
      PoisonElementBits(poison_filled.value_or(PoisonFor(spec.dtype())), element_bytes);
  CUdeviceptr reference_address = reference.address();
  CUdeviceptr native_address = native != nullptr ? native->address() : 0;
  long long chunk_elements = ThreadPool::kChunkElements;
  double atol = tolerances.atol;
  double rtol = tolerances.rtol;
  double overflow = OverflowThreshold(spec.dtype());
  CUdeviceptr tallies_address = tally_buffer.address();
  void* args[] = {&output_address, &element_bytes_arg, &mode_arg,     &table,
                  &poison,         &reference_address, &native_address, &count,
                  &chunk_elements, &atol,              &rtol,           &overflow,
                  &tallies_address};
  gpu::LaunchShape shape;
  shape.grid[0] = static_cast<uint32_t>(chunks);  // one block per chunk
  shape.block[0] = kCompareBlock;
  FORGE_RETURN_IF_ERROR(compare_.Launch(shape, args, stream));
  FORGE_RETURN_IF_ERROR(stream.Synchronize());
  FORGE_RETURN_IF_ERROR(tally_buffer.CopyToHost(tallies.data(), tally_buffer.size_bytes()));
  return tallies;
}

template <typename Launch>
absl::StatusOr<uint64_t> DeviceComparer::RunForWord(gpu::Stream& stream, const Launch& launch) {
  FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer word, device_.Allocate(sizeof(uint64_t)));
  FORGE_RETURN_IF_ERROR(word.Fill32(0, stream));
  FORGE_RETURN_IF_ERROR(launch(word.address()));
  FORGE_RETURN_IF_ERROR(stream.Synchronize());
  uint64_t value = 0;
  FORGE_RETURN_IF_ERROR(word.CopyToHost(&value, sizeof(value)));
  return value;
}

absl::StatusOr<bool> DeviceComparer::Equal(const gpu::DeviceBuffer& a, const gpu::DeviceBuffer& b,
                                           size_t bytes, gpu::Stream& stream) {
  if (a.size_bytes() < bytes || b.size_bytes() < bytes) {
    return absl::InvalidArgumentError(absl::StrCat("comparing ", bytes, " bytes of buffers of ",
                                                   a.size_bytes(), " and ", b.size_bytes()));
  }
  FORGE_ASSIGN_OR_RETURN(const uint64_t differ, RunForWord(stream, [&](CUdeviceptr result) {
    CUdeviceptr a_address = a.address();
    CUdeviceptr b_address = b.address();
    unsigned long long size = bytes;
    void* args[] = {&a_address, &b_address, &size, &result};
    gpu::LaunchShape shape;
    shape.grid[0] = std::min(kBytesGrid, BlocksFor(static_cast<int64_t>(bytes / 16), kBytesBlock));
    shape.block[0] = kBytesBlock;
    return differ_.Launch(shape, args, stream);
  }));
  return differ == 0;
}

absl::StatusOr<uint64_t> DeviceComparer::Fingerprint(const gpu::DeviceBuffer& buffer,
                                                     gpu::Stream& stream) {
  return RunForWord(stream, [&](CUdeviceptr result) {
    CUdeviceptr address = buffer.address();
    unsigned long long size = buffer.size_bytes();
    void* args[] = {&address, &size, &result};
    gpu::LaunchShape shape;
    shape.grid[0] =
        std::min(kBytesGrid, BlocksFor(static_cast<int64_t>(buffer.size_bytes() / 8), kBytesBlock));
    shape.block[0] = kBytesBlock;
    return fingerprint_.Launch(shape, args, stream);
  });
}

}  // namespace forge::judge
