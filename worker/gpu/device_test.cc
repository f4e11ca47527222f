#include "worker/gpu/device.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"
#include "worker/compile/compile_pool.h"

namespace forge::gpu {
namespace {

TEST(CudaStatusTest, SuccessIsOk) { EXPECT_TRUE(CudaStatus(CUDA_SUCCESS, "cuInit").ok()); }

TEST(CudaStatusTest, NamesTheCallAndMapsCodes) {
  absl::Status out_of_memory = CudaStatus(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc(64 bytes)");
  EXPECT_EQ(out_of_memory.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StartsWith(out_of_memory.message(), "cuMemAlloc(64 bytes): ")) << out_of_memory;
  EXPECT_FALSE(IsStickyError(out_of_memory));

  EXPECT_EQ(CudaStatus(CUDA_ERROR_NO_DEVICE, "cuInit").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaStatus(CUDA_ERROR_INVALID_VALUE, "x").code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaStatusTest, StickyErrorsAreMarked) {
  for (CUresult result : {CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_ASSERT, CUDA_ERROR_LAUNCH_FAILED,
                          CUDA_ERROR_ILLEGAL_INSTRUCTION, CUDA_ERROR_MISALIGNED_ADDRESS}) {
    absl::Status status = CudaStatus(result, "cuCtxSynchronize");
    EXPECT_TRUE(IsStickyError(status)) << status;
    EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
    EXPECT_TRUE(absl::StrContains(status.message(), "sticky error")) << status;
  }
  EXPECT_FALSE(IsStickyError(absl::AbortedError("not from the driver")));
}

TEST(DriverStatusTest, IsOkOrUnavailable) {
  absl::Status status = DriverStatus();
  EXPECT_TRUE(status.ok() || status.code() == absl::StatusCode::kUnavailable) << status;
  EXPECT_EQ(status, DriverStatus());  // cached
}

// The rest needs a GPU.
class DeviceTest : public forge::testing::GpuTest {};

TEST_F(DeviceTest, PropertiesAreFilled) {
  const DeviceProperties& properties = device_->properties();
  EXPECT_FALSE(properties.name.empty());
  EXPECT_GE(properties.compute_capability_major, 7);
  EXPECT_GT(properties.sm_count, 0);
  EXPECT_GT(properties.l2_cache_bytes, 0);
  EXPECT_GT(properties.total_memory_bytes, int64_t{1} << 30);
  EXPECT_GE(properties.max_threads_per_block, 1024);
  EXPECT_TRUE(absl::StartsWith(properties.arch(), "sm_")) << properties.arch();
  auto free_bytes = device_->FreeMemoryBytes();
  ASSERT_TRUE(free_bytes.ok()) << free_bytes.status();
  EXPECT_GT(*free_bytes, 0);
}

TEST_F(DeviceTest, CopiesAndFillsRoundTrip) {
  auto stream = device_->CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto buffer = device_->Allocate(64 * sizeof(float));
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::vector<float> values(64);
  for (int i = 0; i < 64; ++i) values[i] = static_cast<float>(i) + 0.5f;
  ASSERT_TRUE(buffer->CopyFromHost(values.data(), 64 * sizeof(float)).ok());
  std::vector<float> back(64);
  ASSERT_TRUE(buffer->CopyToHost(back.data(), 64 * sizeof(float)).ok());
  EXPECT_EQ(values, back);

  ASSERT_TRUE(buffer->Fill32(0x7FC00000u, *stream).ok());
  ASSERT_TRUE(buffer->CopyToHostAsync(back.data(), 64 * sizeof(float), *stream).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  for (float value : back) EXPECT_TRUE(std::isnan(value));

  EXPECT_EQ(buffer->CopyToHost(back.data(), 3).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(buffer->Fill16(1, *stream).code(), absl::StatusCode::kOk);
}

TEST_F(DeviceTest, CapturedWorkRunsOnlyWhenItsGraphIsLaunched) {
  auto stream = device_->CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto buffer = device_->Allocate(64 * sizeof(uint32_t));
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ASSERT_TRUE(buffer->Fill32(1, *stream).ok());
  ASSERT_TRUE(stream->Synchronize().ok());

  ASSERT_TRUE(stream->BeginCapture().ok());
  ASSERT_TRUE(buffer->Fill32(7, *stream).ok());
  auto graph = stream->EndCapture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_TRUE(device_->Synchronize().ok());
  std::vector<uint32_t> back(64);
  ASSERT_TRUE(buffer->CopyToHost(back.data(), back.size() * sizeof(uint32_t)).ok());
  EXPECT_EQ(back, std::vector<uint32_t>(64, 1));  // captured, not run

  ASSERT_TRUE(graph->Launch(*stream).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  ASSERT_TRUE(buffer->CopyToHost(back.data(), back.size() * sizeof(uint32_t)).ok());
  EXPECT_EQ(back, std::vector<uint32_t>(64, 7));

  // Synchronizing a stream under capture invalidates the capture; the stream works afterwards.
  ASSERT_TRUE(stream->BeginCapture().ok());
  EXPECT_FALSE(stream->Synchronize().ok());
  EXPECT_FALSE(stream->EndCapture().ok());
  ASSERT_TRUE(buffer->Fill32(9, *stream).ok());
  EXPECT_TRUE(stream->Synchronize().ok());
}

TEST_F(DeviceTest, GuardedBuffersKeepTheirGuardsApartFromTheTensor) {
  auto stream = device_->CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ(device_->AllocateGuarded(10, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device_->AllocateGuarded(10, 100).status().code(), absl::StatusCode::kInvalidArgument);
  auto buffer = device_->AllocateGuarded(10, 256);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(buffer->address() % 256, 0u);
  EXPECT_EQ(buffer->size_bytes(), 10u);
  EXPECT_EQ(buffer->guard_before_bytes(), 256u);
  EXPECT_EQ(buffer->guard_after_bytes(), 256u - 10u + 256u);
  std::vector<uint8_t> guards(buffer->guard_before_bytes() + buffer->guard_after_bytes());
  for (size_t i = 0; i < guards.size(); ++i) guards[i] = static_cast<uint8_t>(i * 7 + 1);
  ASSERT_TRUE(buffer->CopyGuardsFromHostAsync(guards.data(), *stream).ok());
  ASSERT_TRUE(buffer->Fill8(0xAB, *stream).ok());  // the tensor's bytes only
  std::vector<uint8_t> back(guards.size());
  ASSERT_TRUE(buffer->CopyGuardsToHostAsync(back.data(), *stream).ok());
  std::vector<uint8_t> tensor(10);
  ASSERT_TRUE(buffer->CopyToHostAsync(tensor.data(), tensor.size(), *stream).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(back, guards);
  EXPECT_EQ(tensor, std::vector<uint8_t>(10, 0xAB));
  DeviceBuffer moved = *std::move(buffer);  // freed once, from the allocation's start
  EXPECT_EQ(moved.guard_before_bytes(), 256u);
}

TEST_F(DeviceTest, PinnedHostMemoryRoundTrips) {
  constexpr size_t kBytes = size_t{3} << 20;
  auto upload = device_->AllocatePinned(kBytes);
  auto download = device_->AllocatePinned(kBytes);
  ASSERT_TRUE(upload.ok()) << upload.status();
  ASSERT_TRUE(download.ok()) << download.status();
  ASSERT_EQ(upload->size_bytes(), kBytes);
  for (size_t i = 0; i < kBytes; ++i) upload->data()[i] = static_cast<std::byte>(i * 7 + 3);
  std::memset(download->data(), 0, kBytes);
  auto buffer = device_->Allocate(kBytes);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ASSERT_TRUE(buffer->CopyFromHost(upload->data(), kBytes).ok());
  auto stream = device_->CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE(buffer->CopyToHostAsync(download->data(), kBytes, *stream).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(std::memcmp(upload->data(), download->data(), kBytes), 0);

  // Moving hands over the memory; the moved-from buffer holds none.
  gpu::PinnedHostBuffer moved = *std::move(download);
  EXPECT_EQ(moved.size_bytes(), kBytes);
  EXPECT_EQ(download->data(), nullptr);
  EXPECT_TRUE(device_->AllocatePinned(0).ok());
}

TEST_F(DeviceTest, LoadsACubinAndLaunches) {
  auto pool = compile::CompilePool::Create({.threads = 1});
  ASSERT_TRUE(pool.ok()) << pool.status();
  compile::CompileRequest request;
  request.source = R"(extern "C" __global__ void add_one(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
  })";
  request.name_expressions = {"add_one"};
  request.arch = device_->properties().arch();
  compile::CompileResult compiled = (*pool)->Compile(request);
  ASSERT_TRUE(compiled.ok()) << compiled.status << "\n" << compiled.log;

  auto module = device_->LoadModule(compiled.cubin);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ(module->GetKernel("no_such_kernel").status().code(), absl::StatusCode::kNotFound);
  auto kernel = module->GetKernel("add_one");
  ASSERT_TRUE(kernel.ok()) << kernel.status();

  constexpr int kCount = 1000;
  auto x = device_->Allocate(kCount * sizeof(float));
  auto y = device_->Allocate(kCount * sizeof(float));
  auto stream = device_->CreateStream();
  auto start = device_->CreateEvent();
  auto end = device_->CreateEvent();
  ASSERT_TRUE(x.ok() && y.ok() && stream.ok() && start.ok() && end.ok());
  std::vector<float> input(kCount, 2.0f);
  ASSERT_TRUE(x->CopyFromHost(input.data(), kCount * sizeof(float)).ok());

  CUdeviceptr x_address = x->address();
  CUdeviceptr y_address = y->address();
  int count = kCount;
  void* args[] = {&x_address, &y_address, &count};
  LaunchShape shape;
  shape.grid[0] = (kCount + 255) / 256;
  shape.block[0] = 256;
  ASSERT_TRUE(start->Record(*stream).ok());
  ASSERT_TRUE(kernel->Launch(shape, args, *stream).ok());
  ASSERT_TRUE(end->Record(*stream).ok());
  ASSERT_TRUE(end->Synchronize().ok());
  auto milliseconds = end->MillisecondsSince(*start);
  ASSERT_TRUE(milliseconds.ok()) << milliseconds.status();
  EXPECT_GE(*milliseconds, 0.0f);

  std::vector<float> output(kCount);
  ASSERT_TRUE(y->CopyToHost(output.data(), kCount * sizeof(float)).ok());
  for (float value : output) ASSERT_EQ(value, 3.0f);
  EXPECT_TRUE(device_->Synchronize().ok());
}

TEST_F(DeviceTest, RejectsABadImage) {
  auto module = device_->LoadModule("not an ELF image");
  EXPECT_FALSE(module.ok());
  EXPECT_FALSE(IsStickyError(module.status()));
}

}  // namespace
}  // namespace forge::gpu
