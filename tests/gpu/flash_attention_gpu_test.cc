// flash_attention's split-KV decode candidates on the GPU: each compiled with NVRTC through the
// worker's compile pool, loaded as the worker loads generated kernels, judged by the real judge
// against the production float64 ATen reference (SDPA in float64): non-power-of-two KV lengths,
// GQA 4:1 and 1:1, head dims 64 / 80 / 128 / 256, float32 / float16 / bfloat16, one and several
// splits, several row chunks, causal, bool and additive masks, several queries per head, views of
// inputs (a transposed Q, K and V sliced from a cache) read in place; each at the default point
// (the cp.async ring where the vectors allow it), and at other ring depths and the register
// schedule (stages 0) beside it. Then
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
  // 4-byte copies, 4 keys in flight per lane group (past the register cap's room).
  ExpectAccepted(task, {{"vector_width", 2}, {"unroll", 4}, {"warps", 2}, {"max_registers", 0}});
  for (int64_t stages : {0, 2, 3}) ExpectAccepted(task, {{"stages", stages}});
  // A ring deeper than a split's steps (32 keys: 2 steps of 16 per warp): empty groups at the end.
  ExpectAccepted(task, {{"split_keys", 32}, {"stages", 4}});
}

TEST_F(FlashAttentionGpuTest, Gqa1To1HeadDim64Float16) {
  const KernelTask task =
      SdpaTask(kF16, {.batch = 2, .heads = 8, .kv_heads = 8, .kv_len = 2047, .head_dim = 64});
  ExpectAccepted(task);
  ExpectAccepted(task, {{"split_keys", 64}, {"warps", 8}, {"stages", 2}});
  ExpectAccepted(task, {{"split_keys", 64}, {"warps", 8}, {"stages", 0}});
  ExpectAccepted(task, {{"vector_width", 4}, {"stages", 2}});  // 8-byte copies
}

TEST_F(FlashAttentionGpuTest, SeveralQueriesHeadDim80Float32) {
  const KernelTask task = SdpaTask(kF32, {.batch = 2, .heads = 4, .kv_heads = 2, .q_len = 3,
                                          .kv_len = 1001, .head_dim = 80});
  ExpectAccepted(task);
  ExpectAccepted(task, {{"vector_width", 1}, {"stages", 3}});  // 4-byte copies, 32 lanes a key
  ExpectAccepted(task, {{"stages", 0}});
}

TEST_F(FlashAttentionGpuTest, HeadDim256Bfloat16) {
  const KernelTask task =
      SdpaTask(kBF16, {.heads = 4, .kv_heads = 1, .kv_len = 2500, .head_dim = 256});
  ExpectAccepted(task);
  ExpectAccepted(task, {{"stages", 0}});
}

TEST_F(FlashAttentionGpuTest, CausalTopLeftFloat16) {
  // ATen's is_causal: query i sees keys 0..i, whatever the KV length.
  const KernelTask task = SdpaTask(kF16, {.heads = 4, .kv_heads = 2, .q_len = 6, .kv_len = 900,
                                          .head_dim = 64}, "causal");
  ExpectAccepted(task);
  ExpectAccepted(task, {{"stages", 0}});
}

TEST_F(FlashAttentionGpuTest, BoolMaskWithFullyMaskedRowsFloat32) {
  // A row the draw masks wholly is zeros (SDPA's safe softmax), which the kernel writes too.
  const KernelTask task = SdpaTask(kF32, {.batch = 2, .heads = 4, .kv_heads = 1, .q_len = 4,
                                          .kv_len = 700, .head_dim = 64}, "bool");
  ExpectAccepted(task, {{"split_keys", 128}});
  ExpectAccepted(task, {{"split_keys", 128}, {"stages", 0}});
  ExpectAccepted(task, {{"split_keys", 128}, {"stages", 2}, {"vector_width", 2}});
}

TEST_F(FlashAttentionGpuTest, AdditiveMaskBfloat16) {
  const KernelTask task = SdpaTask(kBF16, {.heads = 8, .kv_heads = 2, .q_len = 2, .kv_len = 1500,
                                           .head_dim = 128}, "additive");
  ExpectAccepted(task);
  ExpectAccepted(task, {{"stages", 0}});
}

TEST_F(FlashAttentionGpuTest, ViewsOfInputsReadInPlace) {
  // Q a transpose of [B, 1, H, D], K and V 1000 keys of a 4096-key cache from key 8 (or 3).
  ExpectAccepted(codegen::testing::SdpaCacheSliceTask(kBF16, 8));
  ExpectAccepted(codegen::testing::SdpaCacheSliceTask(kF16, 3), {{"split_keys", 128}});
  ExpectAccepted(codegen::testing::SdpaCacheSliceTask(kBF16, 8), {{"stages", 0}});
}

// Judges and times Llama-3-8B's decode attention at several points and prints each one's share
// of the copy bandwidth (bytes of Q, K, V and the output once): the default (the ring), the
// register schedule it replaces, other depths, loads per step and splits. (The wide sweep with
// eager SDPA in the same run is benchmarks/gpu/run_decode_sweep.sh.)
TEST_F(FlashAttentionGpuTest, LlamaDecodeIsJudgedAndTimed) {
  const double bandwidth = CopyBandwidth();
  const std::vector<std::map<std::string, int64_t>> points = {
      {},
      {{"stages", 0}, {"max_registers", 0}},  // session 20's default
      {{"stages", 0}},
      {{"max_registers", 0}},
      {{"stages", 2}},
      {{"stages", 3}},
      {{"unroll", 1}},
      {{"warps", 8}, {"unroll", 1}, {"stages", 2}},
      {{"warps", 2}},
      {{"split_keys", 64}},
      {{"split_keys", 256}},
      {{"split_keys", 512}}};
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

// The schedule sweep the default is picked from (issue 22): Llama-3-8B's decode attention (32
// query heads over 8 K/V heads, D 128, bf16) at batch 1 and 8 over 2048, 8192 and 32768 keys, up
// to 15 points per shape, each judged, then timed; a row per point ("| b1 kv2048 | point | us |
// GB/s | % of copy |") and the three fastest per shape ("best b1 kv2048 #1 | ..."). Disabled by
// default (about two minutes of GPU): run with --gtest_also_run_disabled_tests
// --gtest_filter='*DecodeSweep*' (benchmarks/gpu/run_decode_sweep.sh, which times eager SDPA on
// the same shapes beside it).
TEST_F(FlashAttentionGpuTest, DISABLED_DecodeSweep) {
  const double bandwidth = CopyBandwidth();
  for (const auto& [batch, kv_len] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 2048}, {1, 8192}, {1, 32768}, {8, 2048}, {8, 8192}, {8, 32768}}) {
    const KernelTask task = SdpaTask(kBF16, LlamaDecodeShape(batch, kv_len));
    const std::string label = absl::StrCat("b", batch, " kv", kv_len);
    const int64_t split = PointOf(task, {}).parameters.at("split_keys");
    const std::vector<std::map<std::string, int64_t>> sweep = {
        {},
        {{"stages", 0}, {"max_registers", 0}},  // session 20's default
        {{"stages", 0}},
        {{"stages", 2}},
        {{"stages", 3}},
        {{"split_keys", split / 2}},
        {{"split_keys", split * 2}},
        {{"split_keys", split * 4}},
        {{"split_keys", split * 2}, {"stages", 2}},
        {{"unroll", 1}},
        {{"unroll", 4}, {"stages", 2}, {"max_registers", 0}},
        {{"warps", 8}, {"unroll", 1}, {"stages", 3}},
        {{"warps", 8}, {"unroll", 1}, {"stages", 2}, {"split_keys", split * 2}},
        {{"warps", 2}, {"unroll", 4}, {"max_registers", 0}},
        {{"max_registers", 0}},
    };
    struct Row {
      double us;
      std::string point;
    };
    std::vector<Row> rows;
    for (const auto& changes : sweep) {
      const SchedulePoint point = PointOf(task, changes);
      if (!FlashAttentionFamily().Validate(task, point).ok()) continue;
      if (std::any_of(rows.begin(), rows.end(),
                      [&](const Row& row) { return row.point == DescribePoint(point); })) {
        continue;  // a change that gives the default (or an earlier point) again
      }
      ExpectAccepted(task, changes);
      const double us = TimeJudged();
      if (us <= 0 || bandwidth <= 0) continue;
      const double bytes = static_cast<double>(task.min_bytes());
      rows.push_back({us, DescribePoint(point)});
      std::printf("| %s | %-70s | %8.2f us | %6.0f GB/s | %5.1f%% of copy |\n", label.c_str(),
                  rows.back().point.c_str(), us, bytes / (us * 1e-6) / 1e9,
                  100 * bytes / (us * 1e-6) / bandwidth);
      std::fflush(stdout);  // rows survive a run cut short by its time limit
    }
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.us < b.us; });
    for (size_t i = 0; i < rows.size() && i < 3; ++i) {
      const double bytes = static_cast<double>(task.min_bytes());
      std::printf("best %s #%zu | %-70s | %8.2f us | %5.1f%% of copy\n", label.c_str(), i + 1,
                  rows[i].point.c_str(), rows[i].us,
                  100 * bytes / (rows[i].us * 1e-6) / bandwidth);
    }
    std::fflush(stdout);
    EXPECT_FALSE(rows.empty()) << label << ": no point was judged correct and timed";
  }
}

}  // namespace
}  // namespace forge
