// Transfer between GPUs on hand-checked figures of the arch table: a memory-bound task scales by
// the DRAM bandwidths, a float32 GEMM by the FFMA peaks, a bf16 GEMM by the tensor-core peaks, a
// tiny task not at all (one launch overhead for every GPU).
#include "compiler/cost/learned/transfer.h"

#include "gtest/gtest.h"

namespace forge::cost {
namespace {

forge::v1::KernelTask Task(forge::v1::KernelFamily family, forge::v1::DType dtype, int64_t flops,
                           int64_t bytes) {
  forge::v1::KernelTask task;
  task.set_family(family);
  task.set_flops(flops);
  task.set_min_bytes(bytes);
  task.add_inputs()->set_dtype(dtype);
  task.add_outputs()->set_dtype(dtype);
  return task;
}

class TransferTest : public ::testing::Test {
 protected:
  GpuArch h200_ = *FindGpu("H200");
  GpuArch a100_ = *FindGpu("A100");
};

TEST_F(TransferTest, MemoryBoundScalesByDramBandwidth) {
  // 1 GB moved, 1 flop per 4 bytes: far below either ridge point, 0.23 ms on the H200.
  const forge::v1::KernelTask task = Task(forge::v1::KERNEL_FAMILY_POINTWISE,
                                          forge::v1::DTYPE_FLOAT32, int64_t{1} << 28,
                                          int64_t{1} << 30);
  EXPECT_EQ(*BottleneckOf(h200_, task), Bottleneck::kDram);
  const Transfer transfer = *TransferSeconds(300e-6, task, h200_, a100_);
  EXPECT_EQ(transfer.bottleneck, Bottleneck::kDram);
  EXPECT_DOUBLE_EQ(transfer.ratio, 4.3 / 2.039);
  EXPECT_DOUBLE_EQ(transfer.seconds, 300e-6 * 4.3 / 2.039);
  // And back: the inverse ratio.
  EXPECT_DOUBLE_EQ(TransferSeconds(transfer.seconds, task, a100_, h200_)->seconds, 300e-6);
}

TEST_F(TransferTest, ComputeBoundScalesByTheMathUnitsPeak) {
  // A 4096^3 GEMM: 137 GFLOP over 100 MB.
  const int64_t flops = 2 * int64_t{4096} * 4096 * 4096;
  const int64_t bytes = 3 * int64_t{4096} * 4096 * 2;
  const forge::v1::KernelTask bf16 =
      Task(forge::v1::KERNEL_FAMILY_GEMM, forge::v1::DTYPE_BFLOAT16, flops, bytes);
  EXPECT_EQ(*BottleneckOf(h200_, bf16), Bottleneck::kTensorCore);
  EXPECT_DOUBLE_EQ(TransferSeconds(1e-3, bf16, h200_, a100_)->ratio, 790.0 / 312);
  const forge::v1::KernelTask fp32 =
      Task(forge::v1::KERNEL_FAMILY_GEMM, forge::v1::DTYPE_FLOAT32, flops, bytes * 2);
  EXPECT_EQ(*BottleneckOf(h200_, fp32), Bottleneck::kFfma);
  EXPECT_DOUBLE_EQ(TransferSeconds(1e-3, fp32, h200_, a100_)->ratio, 51.0 / 19.5);
}

TEST_F(TransferTest, LaunchBoundTasksKeepTheirTime) {
  const forge::v1::KernelTask tiny =
      Task(forge::v1::KERNEL_FAMILY_POINTWISE, forge::v1::DTYPE_FLOAT32, 1024, 8192);
  EXPECT_EQ(*BottleneckOf(h200_, tiny), Bottleneck::kLaunch);
  const Transfer transfer = *TransferSeconds(4e-6, tiny, h200_, a100_);
  EXPECT_EQ(transfer.bottleneck, Bottleneck::kLaunch);
  EXPECT_DOUBLE_EQ(transfer.seconds, 4e-6);
}

TEST_F(TransferTest, BadInputIsAnError) {
  const forge::v1::KernelTask task = Task(forge::v1::KERNEL_FAMILY_POINTWISE,
                                          forge::v1::DTYPE_FLOAT32, 1 << 20, 1 << 30);
  EXPECT_EQ(TransferSeconds(0, task, h200_, a100_).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TransferSeconds(-1, task, h200_, a100_).status().code(),
            absl::StatusCode::kInvalidArgument);
  // fp8 GEMMs: the A100 has no fp8 tensor cores.
  const forge::v1::KernelTask fp8 =
      Task(forge::v1::KERNEL_FAMILY_GEMM, forge::v1::DTYPE_FLOAT8_E4M3FN, int64_t{1} << 40,
           int64_t{1} << 20);
  EXPECT_EQ(TransferSeconds(1e-3, fp8, h200_, a100_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace forge::cost
