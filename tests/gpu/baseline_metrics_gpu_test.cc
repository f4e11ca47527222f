// The ATen baseline timed with the candidates' timer, checked against the CPU reference, and the
// range profiler's counters checked against the bytes a copy must move. Skips without a GPU.
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/substitute.h"
#include "aten/aten.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"
#include "worker/compile/compile_pool.h"
#include "worker/gpu/device.h"
#include "worker/timer/kernel_metrics.h"
#include "worker/timer/timer.h"

namespace forge {
namespace {

using aten::HostTensor;

constexpr int64_t kRows = 4096;
constexpr int64_t kSoftmaxColumns = 8192;
constexpr int64_t kNormColumns = 4096;

v1::KernelTask ParseTask(const std::string& text) {
  v1::KernelTask task;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &task)) << text;
  return task;
}

// softmax(x, dim=-1) of float32 [rows, columns], as torch.export records nn.Softmax.
v1::KernelTask SoftmaxTask() {
  v1::KernelTask task =
      ParseTask(absl::Substitute(R"(
    digest: "softmax-$0x$1" min_bytes: $2
    inputs { dtype: DTYPE_FLOAT32 shape: [ $0, $1 ] }
    outputs { dtype: DTYPE_FLOAT32 shape: [ $0, $1 ] }
    group {
      values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [ $0, $1 ] } }
      values { name: "y" tensor { dtype: DTYPE_FLOAT32 shape: [ $0, $1 ] } }
      inputs { value_name: "x" }
      nodes {
        name: "softmax" op: "aten::_softmax" overload: "default"
        arguments { name: "self" tensor: "x" }
        arguments { name: "dim" int_value: -1 }
        arguments { name: "half_to_float" bool_value: false }
        outputs: "y"
      }
      outputs { value_name: "y" }
    })",
                                 kRows, kSoftmaxColumns, 2 * kRows * kSoftmaxColumns * 4));
  return task;
}

// gelu(layer_norm(x, [columns], weight, bias)) of float32 [rows, columns].
v1::KernelTask LayerNormGeluTask() {
  return ParseTask(absl::Substitute(R"(
    digest: "layer_norm_gelu-$0x$1" min_bytes: $2
    inputs { dtype: DTYPE_FLOAT32 shape: [ $0, $1 ] }
    inputs { dtype: DTYPE_FLOAT32 shape: [ $1 ] }
    inputs { dtype: DTYPE_FLOAT32 shape: [ $1 ] }
    outputs { dtype: DTYPE_FLOAT32 shape: [ $0, $1 ] }
    group {
      values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [ $0, $1 ] } }
      values { name: "weight" tensor { dtype: DTYPE_FLOAT32 shape: [ $1 ] } }
      values { name: "bias" tensor { dtype: DTYPE_FLOAT32 shape: [ $1 ] } }
      values { name: "normed" tensor { dtype: DTYPE_FLOAT32 shape: [ $0, $1 ] } }
      values { name: "y" tensor { dtype: DTYPE_FLOAT32 shape: [ $0, $1 ] } }
      inputs { value_name: "x" }
      inputs { value_name: "weight" }
      inputs { value_name: "bias" }
      nodes {
        name: "norm" op: "aten::layer_norm" overload: "default"
        arguments { name: "input" tensor: "x" }
        arguments { name: "normalized_shape" ints { values: [ $1 ] } }
        arguments { name: "weight" tensor: "weight" }
        arguments { name: "bias" tensor: "bias" }
        outputs: "normed"
      }
      nodes {
        name: "gelu" op: "aten::gelu" overload: "default"
        arguments { name: "self" tensor: "normed" }
        outputs: "y"
      }
      outputs { value_name: "y" }
    })",
                                    kRows, kNormColumns,
                                    (2 * kRows * kNormColumns + 2 * kNormColumns) * 4));
}

// Deterministic values in [-3, 3).
HostTensor RandomFloat32(std::vector<int64_t> shape, uint32_t seed) {
  int64_t count = 1;
  for (int64_t size : shape) count *= size;
  std::vector<float> values(count);
  uint32_t state = seed;
  for (float& value : values) {
    state = state * 1664525u + 1013904223u;
    value = static_cast<float>(state >> 8) / static_cast<float>(1 << 24) * 6.0f - 3.0f;
  }
  HostTensor tensor{v1::DTYPE_FLOAT32, std::move(shape), {}, std::string(count * 4, '\0')};
  std::memcpy(tensor.bytes.data(), values.data(), tensor.bytes.size());
  return tensor;
}

class BaselineMetricsGpuTest : public forge::testing::GpuTest {
 protected:
  void SetUpDevice() override {
    auto timer = timer::Timer::Create(*device_);
    ASSERT_TRUE(timer.ok()) << timer.status();
    timer_ = *std::move(timer);
  }

  // Times the task's baseline with the candidates' protocol; checks its output against the CPU
  // reference and its median against the bandwidth floor; prints its counters.
  void TimeAndCheck(const v1::KernelTask& task, const std::vector<HostTensor>& inputs) {
    auto baseline = aten::Baseline::Create(task, inputs);
    ASSERT_TRUE(baseline.ok()) << baseline.status();
    const timer::LaunchFn launch = [&](gpu::Stream& stream) {
      return (*baseline)->Launch(stream.handle());
    };
    auto timing = timer_->Time(launch);
    ASSERT_TRUE(timing.ok()) << timing.status();
    auto bandwidth = timer_->CopyBandwidth();
    ASSERT_TRUE(bandwidth.ok()) << bandwidth.status();
    const double floor_us = timer::RooflineFloorUs(0, task.min_bytes(), 0, *bandwidth);
    std::cout << task.digest() << ": median " << timing->summary.median << " us (spread "
              << timing->summary.spread << "), kernels " << timing->kernels_per_rep
              << ", bandwidth floor " << floor_us << " us at " << *bandwidth / 1e9 << " GB/s\n";
    EXPECT_GT(timing->summary.median, 0);
    EXPECT_GT(timing->summary.median, 0.5 * floor_us);

    auto outputs = (*baseline)->Outputs();
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    auto expected = aten::RunTaskGroup(task, inputs, aten::Precision::kNative);
    ASSERT_TRUE(expected.ok()) << expected.status();
    ASSERT_EQ(outputs->size(), 1u);
    ASSERT_EQ((*outputs)[0].bytes.size(), (*expected)[0].bytes.size());
    const auto* got = reinterpret_cast<const float*>((*outputs)[0].bytes.data());
    const auto* want = reinterpret_cast<const float*>((*expected)[0].bytes.data());
    const size_t count = (*outputs)[0].bytes.size() / 4;
    size_t mismatches = 0;
    for (size_t i = 0; i < count; ++i) {
      if (!(std::abs(got[i] - want[i]) <= 1e-4 + 1e-4 * std::abs(want[i]))) {
        if (++mismatches <= 5)
          ADD_FAILURE() << "element " << i << ": " << got[i] << " vs " << want[i];
      }
    }
    EXPECT_EQ(mismatches, 0u);

    auto counters = timer::ReadKernelCounters(*device_, timer_->stream(), launch);
    ASSERT_TRUE(counters.ok()) << counters.status();
    if (counters->counters_status.ok()) {
      std::cout << task.digest() << ": DRAM " << counters->metrics.dram_bytes()
                << " bytes (at least " << task.min_bytes() << "), occupancy "
                << counters->metrics.achieved_occupancy() << "\n";
    } else {
      std::cout << task.digest() << ": " << counters->counters_status << "\n";
    }
  }

  std::unique_ptr<timer::Timer> timer_;
};

TEST_F(BaselineMetricsGpuTest, SoftmaxBaseline) {
  TimeAndCheck(SoftmaxTask(), {RandomFloat32({kRows, kSoftmaxColumns}, 1)});
}

TEST_F(BaselineMetricsGpuTest, LayerNormGeluBaseline) {
  TimeAndCheck(LayerNormGeluTask(),
               {RandomFloat32({kRows, kNormColumns}, 2), RandomFloat32({kNormColumns}, 3),
                RandomFloat32({kNormColumns}, 4)});
}

// A copy of 256 MiB reads and writes 512 MiB: the counters must say so within 20%.
TEST_F(BaselineMetricsGpuTest, CopyKernelCounters) {
  auto pool = compile::CompilePool::Create({.threads = 1});
  ASSERT_TRUE(pool.ok()) << pool.status();
  compile::CompileRequest request;
  request.source = R"(extern "C" __global__ void copy(const float4* x, float4* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
  })";
  request.name_expressions = {"copy"};
  request.arch = device_->properties().arch();
  compile::CompileResult compiled = (*pool)->Compile(request);
  ASSERT_TRUE(compiled.ok()) << compiled.status << compiled.log;
  auto module = device_->LoadModule(compiled.cubin);
  ASSERT_TRUE(module.ok()) << module.status();
  auto kernel = module->GetKernel("copy");
  ASSERT_TRUE(kernel.ok()) << kernel.status();

  constexpr int64_t kBytes = int64_t{256} << 20;
  auto source = device_->Allocate(kBytes);
  auto destination = device_->Allocate(kBytes);
  ASSERT_TRUE(source.ok() && destination.ok());
  ASSERT_TRUE(source->Fill32(0x3f800000, timer_->stream()).ok());
  CUdeviceptr x = source->address();
  CUdeviceptr y = destination->address();
  long vectors = kBytes / 16;
  gpu::LaunchShape shape;
  shape.block[0] = 256;
  shape.grid[0] = static_cast<uint32_t>(vectors / 256);
  auto counters = timer::ReadKernelCounters(*device_, timer_->stream(), [&](gpu::Stream& stream) {
    void* args[] = {&x, &y, &vectors};
    return kernel->Launch(shape, args, stream);
  });
  ASSERT_TRUE(counters.ok()) << counters.status();
  if (!counters->counters_status.ok()) {
    std::cout << "counters unavailable here: " << counters->counters_status << "\n";
    EXPECT_FALSE(counters->metrics.counters_available());
    EXPECT_TRUE(absl::StartsWith(counters->counters_status.message(), "counters unavailable: "));
    EXPECT_EQ(counters->metrics.dram_bytes(), 0);
    return;
  }
  std::cout << "copy of " << kBytes << " bytes: DRAM " << counters->metrics.dram_bytes()
            << " bytes, occupancy " << counters->metrics.achieved_occupancy() << "\n";
  EXPECT_TRUE(counters->metrics.counters_available());
  EXPECT_NEAR(static_cast<double>(counters->metrics.dram_bytes()), 2.0 * kBytes,
              0.2 * 2.0 * kBytes);
  EXPECT_GT(counters->metrics.achieved_occupancy(), 0);
  EXPECT_LE(counters->metrics.achieved_occupancy(), 1.0);
}

}  // namespace
}  // namespace forge
