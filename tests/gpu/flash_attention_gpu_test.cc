// flash_attention's split-KV decode candidates on the GPU: each compiled with NVRTC through the
// worker's compile pool, loaded as the worker loads generated kernels, judged by the real judge
// against the production float64 ATen reference (SDPA in float64): non-power-of-two KV lengths,
// GQA 4:1 and 1:1, head dims 64 / 80 / 128 / 256, float32 / float16 / bfloat16, one and several
// splits, several row chunks, causal, bool and additive masks, several queries per head, views of
// inputs (a transposed Q, K and V sliced from a cache) read in place. Then
// Llama-3-8B's decode attention (32 query heads over 8 K/V heads, D 128, bf16) at batch 1 with
// 8192 keys and batch 8 with 2048 keys, judged and timed at several points against the measured
// copy bandwidth (issue 22's target, >= 85% of it, is the benchmark anchors', not this test's:
// a timed unit test would fail on a busy GPU).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "compiler/codegen/flash_attention/flash_attention.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "tests/gpu/judged_kernel_fixture.h"
#include "worker/gpu/device.h"
#include "worker/judge/judge.h"
#include "worker/timer/timer.h"

namespace forge {
namespace {

using codegen::FlashAttentionFamily;
using codegen::SchedulePoint;
using codegen::testing::AttentionShape;
using codegen::testing::SdpaTask;
using forge::v1::KernelTask;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
constexpr auto kF16 = forge::v1::DTYPE_FLOAT16;
constexpr auto kBF16 = forge::v1::DTYPE_BFLOAT16;

AttentionShape Llama(int64_t batch, int64_t kv_len) {
  return {.batch = batch, .heads = 32, .kv_heads = 8, .q_len = 1, .kv_len = kv_len,
          .head_dim = 128};
}

// The default point of the task's space with `changes` applied.
SchedulePoint PointOf(const KernelTask& task, const std::map<std::string, int64_t>& changes) {
  auto spaces = FlashAttentionFamily().ScheduleSpace(task);
  EXPECT_TRUE(spaces.ok()) << spaces.status();
  if (!spaces.ok()) return {};
  SchedulePoint point = codegen::DefaultPoint(spaces->front());
  for (const auto& [name, value] : changes) point.parameters[name] = value;
  return point;
}

std::string Describe(const SchedulePoint& point) {
  std::string text;
  for (const auto& [name, value] : point.parameters) absl::StrAppend(&text, name, "=", value, " ");
  return text;
}

class FlashAttentionGpuTest : public testing::JudgedKernelTest {
 protected:
  void SetUpDevice() override { ASSERT_TRUE(device_->MakeCurrent().ok()); }

  // The candidate of `task` at the default point with `changes`: valid, compiled with NVRTC,
  // loaded and judged; expects it to pass and keeps it for timing.
  void ExpectAccepted(const KernelTask& task, const std::map<std::string, int64_t>& changes = {}) {
    const SchedulePoint point = PointOf(task, changes);
    const std::string label = Describe(point);
    ASSERT_TRUE(FlashAttentionFamily().Validate(task, point).ok())
        << label << FlashAttentionFamily().Validate(task, point);
    auto kernel = FlashAttentionFamily().Generate(task, point);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    compile::CompileResult compiled =
        codegen::testing::Pool()
            .Submit(codegen::testing::RequestFor(*kernel, device_->properties().arch()))
            .get();
    ASSERT_TRUE(compiled.ok()) << compiled.status << "\n" << compiled.log;
    auto launch = judge::LoadGeneratedKernel(*device_, compiled.cubin, *kernel);
    ASSERT_TRUE(launch.ok()) << launch.status();
    JudgeLaunch(task, *std::move(launch), label);
  }
};

TEST_F(FlashAttentionGpuTest, Gqa4To1OddKvLengthBfloat16) {
  const KernelTask task = SdpaTask(kBF16, Llama(1, 3001));
  ExpectAccepted(task);                                       // several splits, one chunk
  ExpectAccepted(task, {{"split_keys", 4096}});               // one split: no combine
  ExpectAccepted(task, {{"rows", 2}, {"split_keys", 256}});   // two chunks of rows
  ExpectAccepted(task, {{"vector_width", 2}, {"unroll", 4}, {"warps", 2}});
}

TEST_F(FlashAttentionGpuTest, Gqa1To1HeadDim64Float16) {
  const KernelTask task =
      SdpaTask(kF16, {.batch = 2, .heads = 8, .kv_heads = 8, .kv_len = 2047, .head_dim = 64});
  ExpectAccepted(task);
  ExpectAccepted(task, {{"split_keys", 64}, {"warps", 8}});
}

TEST_F(FlashAttentionGpuTest, SeveralQueriesHeadDim80Float32) {
  ExpectAccepted(SdpaTask(kF32, {.batch = 2, .heads = 4, .kv_heads = 2, .q_len = 3,
                                 .kv_len = 1001, .head_dim = 80}));
}

TEST_F(FlashAttentionGpuTest, HeadDim256Bfloat16) {
  ExpectAccepted(SdpaTask(kBF16, {.heads = 4, .kv_heads = 1, .kv_len = 2500, .head_dim = 256}));
}

TEST_F(FlashAttentionGpuTest, CausalTopLeftFloat16) {
  // ATen's is_causal: query i sees keys 0..i, whatever the KV length.
  ExpectAccepted(SdpaTask(kF16, {.heads = 4, .kv_heads = 2, .q_len = 6, .kv_len = 900,
                                 .head_dim = 64}, "causal"));
}

TEST_F(FlashAttentionGpuTest, BoolMaskWithFullyMaskedRowsFloat32) {
  // A row the draw masks wholly is zeros (SDPA's safe softmax), which the kernel writes too.
  ExpectAccepted(SdpaTask(kF32, {.batch = 2, .heads = 4, .kv_heads = 1, .q_len = 4,
                                 .kv_len = 700, .head_dim = 64}, "bool"),
                 {{"split_keys", 128}});
}

TEST_F(FlashAttentionGpuTest, AdditiveMaskBfloat16) {
  ExpectAccepted(SdpaTask(kBF16, {.heads = 8, .kv_heads = 2, .q_len = 2, .kv_len = 1500,
                                  .head_dim = 128}, "additive"));
}

TEST_F(FlashAttentionGpuTest, ViewsOfInputsReadInPlace) {
  // Q a transpose of [B, 1, H, D], K and V 1000 keys of a 4096-key cache from key 8 (or 3).
  ExpectAccepted(codegen::testing::SdpaCacheSliceTask(kBF16, 8));
  ExpectAccepted(codegen::testing::SdpaCacheSliceTask(kF16, 3), {{"split_keys", 128}});
}

// Judges and times Llama-3-8B's decode attention at several points and prints each one's share
// of the copy bandwidth (bytes of Q, K, V and the output once).
TEST_F(FlashAttentionGpuTest, LlamaDecodeIsJudgedAndTimed) {
  auto timer = timer::Timer::Create(*device_);
  ASSERT_TRUE(timer.ok()) << timer.status();
  auto bandwidth = (*timer)->CopyBandwidth();
  ASSERT_TRUE(bandwidth.ok()) << bandwidth.status();
  std::printf("copy bandwidth %.0f GB/s (read + written)\n", *bandwidth / 1e9);
  const std::vector<std::map<std::string, int64_t>> points = {
      {},
      {{"unroll", 4}},
      {{"unroll", 1}},
      {{"warps", 8}},
      {{"warps", 2}},
      {{"split_keys", 128}},
      {{"split_keys", 512}},
      {{"split_keys", 1024}, {"warps", 8}}};
  for (const auto& [batch, kv_len] : std::vector<std::pair<int64_t, int64_t>>{{1, 8192},
                                                                             {8, 2048}}) {
    const KernelTask task = SdpaTask(kBF16, Llama(batch, kv_len));
    const double bytes = static_cast<double>(task.min_bytes());
    double best = 0;
    for (const auto& changes : points) {
      if (!FlashAttentionFamily().Validate(task, PointOf(task, changes)).ok()) continue;
      ExpectAccepted(task, changes);
      const double us = TimeJudged();
      if (us <= 0) continue;
      const double fraction = bytes / (us * 1e-6) / *bandwidth;
      best = std::max(best, fraction);
      std::printf("| b%lld kv%lld | %-60s | %8.2f us | %6.0f GB/s | %5.1f%% of copy |\n",
                  static_cast<long long>(batch), static_cast<long long>(kv_len),
                  Describe(PointOf(task, changes)).c_str(), us, bytes / (us * 1e-6) / 1e9,
                  100 * fraction);
    }
    std::printf("b%lld kv%lld: best %.1f%% of the copy bandwidth\n",
                static_cast<long long>(batch), static_cast<long long>(kv_len), 100 * best);
    EXPECT_GT(best, 0) << "no point was judged correct and timed";
  }
}

}  // namespace
}  // namespace forge
