#include "compiler/codegen/flash_attention/flash_attention.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/search/prior.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::testing::HasSubstr;
using testing::AttentionShape;
using testing::LlamaDecodeShape;
using testing::SdpaTask;
using forge::v1::KernelTask;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
constexpr auto kF16 = forge::v1::DTYPE_FLOAT16;
constexpr auto kBF16 = forge::v1::DTYPE_BFLOAT16;

SchedulePoint Default(const KernelTask& task) {
  auto spaces = FlashAttentionFamily().ScheduleSpace(task);
  EXPECT_TRUE(spaces.ok()) << spaces.status();
  if (!spaces.ok()) return {};
  return DefaultPoint(spaces->front());
}

SchedulePoint With(const KernelTask& task, const std::map<std::string, int64_t>& changes) {
  SchedulePoint point = Default(task);
  for (const auto& [name, value] : changes) point.parameters[name] = value;
  return point;
}

TEST(FlashAttentionTest, AppliesToDecodeAttentionAndDeclinesTheRestWithReasons) {
  const FlashAttentionFamily family;
  EXPECT_TRUE(family.Applies(SdpaTask(kBF16, LlamaDecodeShape(1, 8192))).ok());
  EXPECT_TRUE(family.Applies(SdpaTask(kF32, {.q_len = 16, .kv_len = 100, .head_dim = 80})).ok());
  EXPECT_TRUE(family.Applies(SdpaTask(kF16, {.q_len = 4, .kv_len = 999}, "bool")).ok());
  EXPECT_TRUE(family.Applies(SdpaTask(kF16, {.q_len = 4, .kv_len = 999}, "additive")).ok());
  EXPECT_TRUE(family.Applies(SdpaTask(kBF16, LlamaDecodeShape(2, 300), "causal")).ok());

  EXPECT_THAT(family.Applies(SdpaTask(kBF16, {.q_len = 16, .kv_len = 16}, "causal")).message(),
              HasSubstr("not decode (16 keys for 16 queries"));
  EXPECT_THAT(family.Applies(SdpaTask(kBF16, {.q_len = 17, .kv_len = 4096})).message(),
              HasSubstr("17 queries per head; the decode template takes at most 16"));
  EXPECT_THAT(family.Applies(SdpaTask(forge::v1::DTYPE_FLOAT64, {.kv_len = 64})).message(),
              HasSubstr("runs float32, float16 and bfloat16 only"));
  EXPECT_THAT(family.Applies(SdpaTask(kBF16, {.kv_len = 64, .head_dim = 512})).message(),
              HasSubstr("at most 256"));
  KernelTask not_attention = testing::ReluTask();
  EXPECT_THAT(family.Applies(not_attention).message(), HasSubstr("not an ATTENTION task"));
}

TEST(FlashAttentionTest, DefaultPointReadsTheGroupOnceWithSixteenByteLoadsOverTwoWaves) {
  const KernelTask task = SdpaTask(kBF16, LlamaDecodeShape(1, 8192));
  const SchedulePoint point = Default(task);
  EXPECT_EQ(point.parameters.at("rows"), 4);  // the 4 query heads of a K/V head: K, V read once
  EXPECT_EQ(point.parameters.at("vector_width"), 8);
  EXPECT_EQ(point.parameters.at("stages"), 4);  // the bandwidth-oriented schedule: a cp.async ring
  // 128 registers per thread: four blocks of 4 warps per SM, the ~4 blocks per SM of the grid
  // in one wave (the compiler's own choice, 130, fits three).
  EXPECT_EQ(point.parameters.at("max_registers"), 128);
  auto plan = FlashAttentionFamily().Plan(task, point);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const auto& grid = plan->launch.grid;
  EXPECT_EQ(grid[1], 8u);  // batch x K/V heads
  EXPECT_EQ(grid[2], 1u);  // one chunk of rows
  EXPECT_GE(grid[0] * grid[1] * grid[2], 264u);
  EXPECT_EQ(grid[0], (8192 + point.parameters.at("split_keys") - 1) /
                         point.parameters.at("split_keys"));
  EXPECT_EQ(plan->hints.vector_width, 8);
  // Each thread keeps 4 stages of 2 keys' 16-byte vectors of K and V requested.
  EXPECT_EQ(plan->hints.bytes_in_flight_per_thread, 4 * 2 * 2 * 16);
  EXPECT_EQ(plan->hints.max_registers, 128);
  auto kernel = FlashAttentionFamily().Generate(task, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("__launch_bounds__(128, 4) forge_flash_decode("));
}

// Every Llama decode shape the issue targets (b1 and b8, KV 2048 to 32768) defaults to the ring,
// with at least two blocks per SM of an H200 (132 SMs).
TEST(FlashAttentionTest, DecodeShapesDefaultToTheRingOverTwoBlocksPerSm) {
  for (const auto& [batch, kv_len] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 2048}, {1, 8192}, {1, 32768}, {8, 2048}, {8, 8192}, {8, 32768}}) {
    const KernelTask task = SdpaTask(kBF16, LlamaDecodeShape(batch, kv_len));
    const SchedulePoint point = Default(task);
    EXPECT_GE(point.parameters.at("stages"), 2) << "b" << batch << " kv" << kv_len;
    auto plan = FlashAttentionFamily().Plan(task, point);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const auto& grid = plan->launch.grid;
    EXPECT_GE(grid[0] * grid[1] * grid[2], 2u * 132) << "b" << batch << " kv" << kv_len;
  }
  // Two-byte vectors cannot be copied by cp.async: the default falls back to registers.
  const KernelTask odd_f16 = SdpaTask(kF16, {.kv_len = 1000, .head_dim = 67});
  EXPECT_EQ(Default(odd_f16).parameters.at("stages"), 0);
  EXPECT_TRUE(FlashAttentionFamily().Validate(odd_f16, Default(odd_f16)).ok());
}

TEST(FlashAttentionTest, ValidateNamesTheViolatedConstraint) {
  const FlashAttentionFamily family;
  const KernelTask llama = SdpaTask(kBF16, LlamaDecodeShape(1, 2048));
  const KernelTask f32 = SdpaTask(kF32, {.heads = 4, .kv_heads = 4, .kv_len = 1000});
  EXPECT_THAT(family.Validate(f32, With(f32, {{"vector_width", 8}})).message(),
              HasSubstr("exceeds a 16-byte load"));
  const KernelTask odd_d = SdpaTask(kF16, {.kv_len = 1000, .head_dim = 80});
  EXPECT_THAT(family.Validate(odd_d, With(odd_d, {{"vector_width", 8}})).ok(), true);
  const KernelTask d_not_vector = SdpaTask(kF16, {.kv_len = 1000, .head_dim = 68});
  EXPECT_THAT(family.Validate(d_not_vector, With(d_not_vector, {{"vector_width", 8}})).message(),
              HasSubstr("does not divide the head dim (68)"));
  EXPECT_THAT(family.Validate(llama, With(llama, {{"rows", 16}})).message(),
              HasSubstr("rows 16 for 4 query rows per K/V head"));
  const KernelTask short_kv = SdpaTask(kBF16, {.kv_len = 100});
  EXPECT_THAT(family.Validate(short_kv, With(short_kv, {{"split_keys", 4096}})).message(),
              HasSubstr("a smaller split is the same kernel"));
  // D 32 in 16-byte vectors: 4 lanes per key, 8 keys per warp, 64 per step of 8 warps.
  const KernelTask narrow = SdpaTask(kBF16, {.kv_len = 1000, .head_dim = 32});
  EXPECT_THAT(family.Validate(narrow, With(narrow, {{"split_keys", 32}, {"warps", 8},
                                                    {"vector_width", 8}})).message(),
              HasSubstr("leaves warps idle: a step of 8 warps reads 64 keys"));
  const KernelTask wide = SdpaTask(kF32, {.heads = 16, .q_len = 1, .kv_len = 4096,
                                          .head_dim = 256});
  EXPECT_THAT(family.Validate(wide, With(wide, {{"rows", 16}, {"vector_width", 4}})).message(),
              HasSubstr("the kernel would spill"));
  EXPECT_THAT(family.Validate(wide, With(wide, {{"rows", 8}, {"warps", 8}, {"vector_width", 4},
                                                {"unroll", 1}})).message(),
              HasSubstr("exceed 48 KiB"));
  EXPECT_THAT(family.Validate(llama, SchedulePoint{"split_kv_decode", {{"warps", 3}}}).ok(),
              false);
  // The ring: cp.async moves 4, 8 or 16 bytes, and the ring shares the 48 KiB.
  EXPECT_THAT(family.Validate(odd_d, With(odd_d, {{"vector_width", 1}, {"stages", 2}})).message(),
              HasSubstr("cp.async, which moves 4, 8 or 16 bytes: vector_width 1 of 2-byte "
                        "elements is 2 bytes"));
  EXPECT_TRUE(family.Validate(odd_d, With(odd_d, {{"vector_width", 1}, {"stages", 0}})).ok());
  EXPECT_TRUE(family.Validate(f32, With(f32, {{"vector_width", 1}, {"stages", 3}})).ok());
  EXPECT_THAT(family.Validate(llama, With(llama, {{"warps", 8}, {"unroll", 4}, {"stages", 4},
                                                  {"max_registers", 0}}))
                  .message(),
              HasSubstr("a ring of 4 stages of 4 keys per lane group: 131072 bytes"));
  EXPECT_TRUE(
      family.Validate(llama, With(llama, {{"warps", 8}, {"unroll", 1}, {"stages", 2}})).ok());
  EXPECT_FALSE(family.Validate(llama, With(llama, {{"stages", 1}})).ok());
  EXPECT_THAT(family.Validate(wide, With(wide, {{"rows", 8}, {"vector_width", 4}, {"unroll", 1},
                                                {"stages", 0}, {"max_registers", 128}}))
                  .message(),
              HasSubstr("max_registers 128 with 184 registers of data and row state (past "
                        "104): the kernel would spill under the cap"));
  EXPECT_TRUE(family.Validate(llama, With(llama, {{"max_registers", 0}})).ok());
}

// Every ring depth and both load paths, with 16-, 8- and 4-byte copies, with and without the
// register cap, compile with NVRTC for sm_80 and sm_90 without spills, and the source names the
// depth.
TEST(FlashAttentionTest, EveryRingDepthCompilesWithoutSpills) {
  struct Case {
    std::string name;
    KernelTask task;
    std::map<std::string, int64_t> changes;
  };
  const std::vector<Case> cases = {
      {"llama b1 kv8192 bf16 16-byte", SdpaTask(kBF16, LlamaDecodeShape(1, 8192)), {}},
      {"llama b8 kv2048 bf16 unroll 1 2 warps", SdpaTask(kBF16, LlamaDecodeShape(8, 2048)),
       {{"unroll", 1}, {"warps", 2}}},
      {"d80 f16 8-byte additive",
       SdpaTask(kF16, {.heads = 4, .kv_heads = 1, .q_len = 5, .kv_len = 640, .head_dim = 80},
                "additive"),
       {{"vector_width", 4}}},
      {"d64 f32 4-byte bool",
       SdpaTask(kF32, {.heads = 2, .kv_heads = 1, .q_len = 2, .kv_len = 777, .head_dim = 64},
                "bool"),
       {{"vector_width", 1}}},
  };
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const Case& c : cases) {
    for (int64_t stages : {0, 2, 3, 4}) {
      std::map<std::string, int64_t> changes = c.changes;
      changes["stages"] = stages;
      // Every other depth under the register cap where the point allows it, the rest without.
      if (stages % 2 == 1 || stages == 0) changes["max_registers"] = 0;
      const SchedulePoint point = With(c.task, changes);
      ASSERT_TRUE(FlashAttentionFamily().Validate(c.task, point).ok())
          << c.name << " stages " << stages << ": "
          << FlashAttentionFamily().Validate(c.task, point);
      auto kernel = FlashAttentionFamily().Generate(c.task, point);
      ASSERT_TRUE(kernel.ok()) << c.name << ": " << kernel.status();
      EXPECT_THAT(kernel->source, HasSubstr(absl::StrCat("#define FORGE_FA_STAGES ", stages)));
      kernels.push_back(*std::move(kernel));
      labels.push_back(absl::StrCat(c.name, " stages=", stages));
    }
  }
  testing::ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_80", "sm_90"});
}

TEST(FlashAttentionTest, CausalDecodeReadsOnlyTheKeysTheQueriesSee) {
  // ATen's is_causal is top-left aligned: query i sees keys 0..i, so 3 queries read 3 keys.
  const KernelTask task = SdpaTask(kBF16, {.q_len = 3, .kv_len = 5000}, "causal");
  auto plan = FlashAttentionFamily().Plan(task, Default(task));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->launch.grid[0], 1u);
  auto kernel = FlashAttentionFamily().Generate(task, Default(task));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("#define FORGE_FA_KEYS 3LL"));
}

TEST(FlashAttentionTest, ReadsViewsOfInputsInPlace) {
  const KernelTask task = testing::SdpaCacheSliceTask(kBF16, 8);
  ASSERT_TRUE(FlashAttentionFamily().Applies(task).ok()) << FlashAttentionFamily().Applies(task);
  auto kernel = FlashAttentionFamily().Generate(task, Default(task));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("#define FORGE_FA_K_OFF 512LL"));
  EXPECT_THAT(kernel->source, HasSubstr("#define FORGE_FA_K_SH 262144LL"));
  EXPECT_THAT(kernel->source, HasSubstr("#define FORGE_FA_Q_SI 512LL"));
  EXPECT_THAT(kernel->source, HasSubstr("forge_fa_run(in0, in1, in2,"));
  testing::ExpectCompiles({*kernel}, {"cache slices"}, /*expect_no_spills=*/true, {"sm_90"});
}

TEST(FlashAttentionTest, DeclinesOperandsTheGroupComputes) {
  using testing::TensorArg;
  const KernelTask task =
      testing::TaskBuilder()
          .Input("x", kF16, {1, 4, 1, 64})
          .Input("k", kF16, {1, 4, 300, 64})
          .Input("v", kF16, {1, 4, 300, 64})
          .Node("q", "neg", "", {TensorArg("self", "x")}, kF16, {1, 4, 1, 64})
          .Node("attention", "scaled_dot_product_attention", "",
                {TensorArg("query", "q"), TensorArg("key", "k"), TensorArg("value", "v")}, kF16,
                {1, 4, 1, 64})
          .Output("attention")
          .Build(forge::v1::KERNEL_FAMILY_ATTENTION);
  EXPECT_THAT(FlashAttentionFamily().Applies(task).message(),
              HasSubstr("Q (q) is computed in the group by aten::neg"));
}

TEST(FlashAttentionTest, GenerationIsDeterministic) {
  const KernelTask task = SdpaTask(kBF16, LlamaDecodeShape(8, 2048));
  auto first = FlashAttentionFamily().Generate(task, Default(task));
  auto second = FlashAttentionFamily().Generate(task, Default(task));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->source, second->source);
  EXPECT_EQ(first->kernel_name, FlashAttentionFamily::kDecodeKernel);
}

// The search's prior reads the plan's hints: the default point of Llama's decode attention near
// the DRAM floor, one scalar load per lane predicted slower.
TEST(FlashAttentionTest, PriorPredictsDecodeNearTheBandwidthFloor) {
  auto prior = search::CostModelPrior::ForGpu("H200");
  ASSERT_TRUE(prior.ok()) << prior.status();
  for (const auto& [batch, kv_len] : std::vector<std::pair<int64_t, int64_t>>{{1, 8192},
                                                                             {8, 32768}}) {
    const KernelTask task = SdpaTask(kBF16, LlamaDecodeShape(batch, kv_len));
    auto plan = FlashAttentionFamily().Plan(task, Default(task));
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto seconds = prior->PredictSeconds(task, *plan);
    ASSERT_TRUE(seconds.ok()) << seconds.status();
    const double floor =
        static_cast<double>(task.min_bytes()) / prior->gpu().dram_bytes_per_second;
    EXPECT_GE(*seconds, floor) << "b" << batch;
    EXPECT_LE(*seconds, 2 * floor) << "b" << batch;
    auto scalar = FlashAttentionFamily().Plan(
        task, With(task, {{"vector_width", 1}, {"unroll", 1}, {"warps", 1}, {"stages", 0}}));
    ASSERT_TRUE(scalar.ok()) << scalar.status();
    auto scalar_seconds = prior->PredictSeconds(task, *scalar);
    ASSERT_TRUE(scalar_seconds.ok()) << scalar_seconds.status();
    EXPECT_GT(*scalar_seconds, *seconds) << "b" << batch;
    // The ring keeps more bytes in flight than loads into registers: never predicted slower.
    auto registers = FlashAttentionFamily().Plan(task, With(task, {{"stages", 0}}));
    ASSERT_TRUE(registers.ok()) << registers.status();
    auto register_seconds = prior->PredictSeconds(task, *registers);
    ASSERT_TRUE(register_seconds.ok()) << register_seconds.status();
    EXPECT_LE(*seconds, *register_seconds) << "b" << batch;
    std::printf("b%lld kv%lld: predicted %.2f us (ring), %.2f us (registers), floor %.2f us\n",
                static_cast<long long>(batch), static_cast<long long>(kv_len), *seconds * 1e6,
                *register_seconds * 1e6, floor * 1e6);
  }
}

// Sampled valid points of tasks over every dtype, head dim, GQA ratio and mask compile with
// NVRTC for sm_80 and sm_90 without spills.
TEST(FlashAttentionTest, SampledPointsCompileWithoutSpills) {
  const std::vector<std::pair<std::string, KernelTask>> tasks = {
      {"llama b1 kv8192 bf16", SdpaTask(kBF16, LlamaDecodeShape(1, 8192))},
      {"llama b8 kv32768 bf16", SdpaTask(kBF16, LlamaDecodeShape(8, 32768))},
      {"gqa 1:1 d64 kv3001 f16", SdpaTask(kF16, {.batch = 2, .heads = 8, .kv_heads = 8,
                                                 .kv_len = 3001, .head_dim = 64})},
      {"q16 d96 f32 bool", SdpaTask(kF32, {.heads = 2, .kv_heads = 1, .q_len = 16,
                                           .kv_len = 777, .head_dim = 96}, "bool")},
      {"d256 additive bf16", SdpaTask(kBF16, {.heads = 4, .kv_heads = 2, .q_len = 2,
                                              .kv_len = 2048, .head_dim = 256}, "additive")},
      {"d80 causal f16", SdpaTask(kF16, {.heads = 4, .kv_heads = 1, .q_len = 5, .kv_len = 64,
                                         .head_dim = 80}, "causal")},
  };
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const auto& [name, task] : tasks) {
    const std::vector<SchedulePoint> points =
        testing::EvenSample(testing::ValidPoints(FlashAttentionFamily(), task), 3);
    std::vector<SchedulePoint> chosen = {Default(task)};
    chosen.insert(chosen.end(), points.begin(), points.end());
    for (const SchedulePoint& point : chosen) {
      auto kernel = FlashAttentionFamily().Generate(task, point);
      ASSERT_TRUE(kernel.ok()) << name << ": " << kernel.status();
      std::string label = name;
      for (const auto& [parameter, value] : point.parameters) {
        absl::StrAppend(&label, " ", parameter, "=", value);
      }
      kernels.push_back(*std::move(kernel));
      labels.push_back(label);
    }
  }
  testing::ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_80", "sm_90"});
}

}  // namespace
}  // namespace forge::codegen
