// cuBLASLt calls checked against products computed here. Skips without a GPU; the binary linking
// libcublasLt and starting on a machine without one is itself part of what runs everywhere.
#include "worker/library/cublaslt_gemm.h"

#include <cmath>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"

namespace forge::library {
namespace {

using codegen::LibraryEpilogue;
using codegen::LibraryGemmCall;

class CublasLtGemmTest : public forge::testing::GpuTest {
 protected:
  void SetUpDevice() override {
    auto gemm = CublasLtGemm::Create(*device_);
    ASSERT_TRUE(gemm.ok()) << gemm.status();
    gemm_ = *std::move(gemm);
  }

  std::unique_ptr<CublasLtGemm> gemm_;
};

// Small integers: every product below is exact in float32.
using forge::testing::SmallIntegerRamp;

TEST_F(CublasLtGemmTest, BatchedTransposedProductWithBiasAndRelu) {
  constexpr int kBatch = 2, kM = 3, kN = 5, kK = 4;
  LibraryGemmCall call;
  call.m = kM, call.n = kN, call.k = kK, call.batch = kBatch;
  call.dtype = forge::v1::DTYPE_FLOAT32;
  call.a = {0, /*transposed=*/true, kM, kM * kK};  // a stored [batch][k][m]
  call.b = {1, false, kN, kK * kN};
  call.bias_input = 2;
  call.epilogue = LibraryEpilogue::kReluBias;
  const std::vector<float> a = SmallIntegerRamp(kBatch * kK * kM, 7, 1);
  const std::vector<float> b = SmallIntegerRamp(kBatch * kK * kN, 5, 2);
  const std::vector<float> bias = SmallIntegerRamp(kN, 9, 3);
  gpu::DeviceBuffer a_buffer = UploadFloats(a), b_buffer = UploadFloats(b);
  gpu::DeviceBuffer bias_buffer = UploadFloats(bias);
  gpu::DeviceBuffer d_buffer = UploadFloats(std::vector<float>(kBatch * kM * kN, NAN));
  auto count = gemm_->AlgorithmCount(call);
  ASSERT_TRUE(count.ok()) << count.status();
  ASSERT_GE(*count, 1);
  auto stream = device_->CreateStream();
  ASSERT_TRUE(stream.ok());
  for (call.algo = 0; call.algo < *count; ++call.algo) {
    ASSERT_TRUE(gemm_->Run(call, {a_buffer.address(), b_buffer.address(), bias_buffer.address(),
                                  d_buffer.address()},
                           stream->handle())
                    .ok());
    ASSERT_TRUE(stream->Synchronize().ok());
    std::vector<float> d(kBatch * kM * kN);
    ASSERT_TRUE(d_buffer.CopyToHost(d.data(), d.size() * sizeof(float)).ok());
    for (int batch = 0; batch < kBatch; ++batch) {
      for (int i = 0; i < kM; ++i) {
        for (int j = 0; j < kN; ++j) {
          double sum = bias[j];
          for (int k = 0; k < kK; ++k) {
            sum += a[batch * kM * kK + k * kM + i] * b[batch * kK * kN + k * kN + j];
          }
          EXPECT_EQ(d[(batch * kM + i) * kN + j], std::max(sum, 0.0))
              << "algo " << call.algo << " batch " << batch << " [" << i << ", " << j << "]";
        }
      }
    }
  }
  call.algo = *count;
  const absl::Status past_end = gemm_->Run(
      call, {a_buffer.address(), b_buffer.address(), bias_buffer.address(), d_buffer.address()},
      stream->handle());
  EXPECT_EQ(past_end.code(), absl::StatusCode::kOutOfRange) << past_end;
}

TEST_F(CublasLtGemmTest, EveryAlgorithmIsDescribedByItsConfiguration) {
  LibraryGemmCall call;
  call.m = 64, call.n = 96, call.k = 80;
  call.dtype = forge::v1::DTYPE_BFLOAT16;
  call.a = {0, false, 80, 0};
  call.b = {1, /*transposed=*/true, 80, 0};
  call.bias_input = 2;
  call.epilogue = LibraryEpilogue::kBias;
  auto count = gemm_->AlgorithmCount(call);
  ASSERT_TRUE(count.ok()) << count.status();
  ASSERT_GE(*count, 1);
  for (call.algo = 0; call.algo < *count; ++call.algo) {
    auto description = gemm_->AlgorithmDescription(call);
    ASSERT_TRUE(description.ok()) << description.status();
    EXPECT_THAT(*description,
                ::testing::MatchesRegex("id -?[0-9]+ tile [0-9]+ stages [0-9]+ splitk -?[0-9]+ "
                                        "reduction [0-9]+ swizzle [0-9]+ custom [0-9]+ "
                                        "inner [0-9]+ cluster [0-9]+"))
        << "algo " << call.algo;
  }
  call.algo = *count;
  EXPECT_EQ(gemm_->AlgorithmDescription(call).status().code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace forge::library
