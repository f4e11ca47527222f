// Tests that need a GPU and skip where none answers, so the same binaries run on CPU-only machines.
// Header-only on purpose: test_support must not pull CUDA into CPU-only tests, and a test that
// includes this header links forge::gpu already (forge::gpu_test_support names both).
#ifndef FORGE_TESTS_SUPPORT_GPU_TEST_H_
#define FORGE_TESTS_SUPPORT_GPU_TEST_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "worker/gpu/device.h"

// Skips the calling test (a TEST body or a SetUp) where no CUDA driver and GPU answer.
#define FORGE_SKIP_WITHOUT_GPU()                                                            \
  if (absl::Status forge_gpu_status = ::forge::gpu::DriverStatus(); !forge_gpu_status.ok()) { \
    GTEST_SKIP() << "no GPU: " << forge_gpu_status;                                          \
  }

namespace forge::testing {

// A fixture whose SetUp opens GPU 0 into device_, or skips the test without a GPU; failing to
// open a GPU the driver reports fails the test. Fixtures that need more (a stream, a timer)
// override SetUpDevice, which runs once device_ is open.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() final {
    FORGE_SKIP_WITHOUT_GPU();
    absl::StatusOr<std::unique_ptr<gpu::Device>> device = gpu::Device::Open(0);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *std::move(device);
    SetUpDevice();
  }
  virtual void SetUpDevice() {}

  // A device buffer holding `values` (the test fails where the upload does).
  gpu::DeviceBuffer UploadFloats(const std::vector<float>& values) {
    absl::StatusOr<gpu::DeviceBuffer> buffer = device_->Allocate(values.size() * sizeof(float));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_TRUE(buffer->CopyFromHost(values.data(), values.size() * sizeof(float)).ok());
    return *std::move(buffer);
  }

  std::unique_ptr<gpu::Device> device_;
};

// `count` small integers (i * 7 + shift) % modulus - modulus / 2: products and sums of a few
// thousand of them are exact in float32, so a library call can be checked for equality.
inline std::vector<float> SmallIntegerRamp(int64_t count, int modulus, int shift) {
  std::vector<float> values(count);
  for (int64_t i = 0; i < count; ++i) {
    values[i] = static_cast<float>((i * 7 + shift) % modulus - modulus / 2);
  }
  return values;
}

}  // namespace forge::testing

#endif  // FORGE_TESTS_SUPPORT_GPU_TEST_H_
