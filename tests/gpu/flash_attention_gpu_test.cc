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
using codegen::testing::LlamaDecodeShape;
using codegen::testing::SdpaTask;
using forge::v1::KernelTask;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
constexpr auto kF16 = forge::v1::DTYPE_FLOAT16;
constexpr auto kBF16 = forge::v1::DTYPE_BFLOAT16;

using FlashAttentionGpuTest = testing::JudgedFamilyTest<FlashAttentionFamily>;

TEST_F(FlashAttentionGpuTest, Gqa4To1OddKvLengthBfloat16) {
  const KernelTask task = SdpaTask(kBF16, LlamaDecodeShape(1, 3001));
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
  const double bandwidth = CopyBandwidth();
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
    const KernelTask task = SdpaTask(kBF16, LlamaDecodeShape(batch, kv_len));
    std::vector<std::map<std::string, int64_t>> valid;
    for (const auto& changes : points) {
      if (FlashAttentionFamily().Validate(task, PointOf(task, changes)).ok()) {
        valid.push_back(changes);
      }
    }
    PrintShareOfCopy(task, absl::StrCat("b", batch, " kv", kv_len),
                     static_cast<double>(task.min_bytes()), bandwidth, valid);
  }
}

}  // namespace
}  // namespace forge
