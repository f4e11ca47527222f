#include "compiler/codegen/gemv/gemv.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/search/prior.h"

namespace forge::codegen {
namespace {

using forge::v1::KernelTask;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::OptionalTensorArg;
using testing::TaskBuilder;
using testing::TensorArg;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
constexpr auto kBF16 = forge::v1::DTYPE_BFLOAT16;
constexpr auto kF16 = forge::v1::DTYPE_FLOAT16;
constexpr auto kF64 = forge::v1::DTYPE_FLOAT64;
constexpr auto kGemm = forge::v1::KERNEL_FAMILY_GEMM;

const GemvFamily kFamily;

SchedulePoint DefaultOf(const KernelTask& task) {
  auto spaces = kFamily.ScheduleSpace(task);
  EXPECT_TRUE(spaces.ok()) << spaces.status();
  if (!spaces.ok() || spaces->empty()) return {};
  return DefaultPoint(spaces->front());
}

// The default point of the task's gemv_mma space (empty when the template does not apply).
SchedulePoint MmaDefaultOf(const KernelTask& task) {
  auto spaces = kFamily.ScheduleSpace(task);
  EXPECT_TRUE(spaces.ok()) << spaces.status();
  if (!spaces.ok()) return {};
  for (const TemplateSpace& space : *spaces) {
    if (space.template_name == GemvFamily::kMmaTemplateName) return DefaultPoint(space);
  }
  ADD_FAILURE() << "no gemv_mma space";
  return {};
}

// The templates the task's space offers, in order.
std::vector<std::string> TemplatesOf(const KernelTask& task) {
  std::vector<std::string> names;
  auto spaces = kFamily.ScheduleSpace(task);
  EXPECT_TRUE(spaces.ok()) << spaces.status();
  if (spaces.ok()) {
    for (const TemplateSpace& space : *spaces) names.push_back(space.template_name);
  }
  return names;
}

SchedulePoint With(SchedulePoint point, const std::map<std::string, int64_t>& changes) {
  for (const auto& [name, value] : changes) point.parameters[name] = value;
  return point;
}

// What a plan of a bf16 task must say: its grid and block, and the weight's vector width and
// elements in flight per thread (2 bytes each).
struct ExpectedPlan {
  uint32_t grid, block;
  int64_t vector_width, unrolled_elements;
};

void ExpectPlan(const KernelTask& task, const SchedulePoint& point, const ExpectedPlan& expected) {
  auto plan = kFamily.Plan(task, point);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->template_name, point.template_name);
  EXPECT_EQ(plan->launch.grid[0], expected.grid);
  EXPECT_EQ(plan->launch.block[0], expected.block);
  EXPECT_EQ(plan->hints.vector_width, expected.vector_width);
  EXPECT_EQ(plan->hints.unrolled_elements, expected.unrolled_elements);
  EXPECT_EQ(plan->hints.bytes_in_flight_per_thread, 2.0 * expected.unrolled_elements);
}

KernelTask Linear(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k, bool bias = false,
                  const std::string& activation = "") {
  return testing::LinearActivationTask(dtype, m, n, k, bias, activation);
}

// mm(x[m, k], w[k, n]) -> to(float32): the epilogue casts.
KernelTask MatmulCastTask(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k) {
  return TaskBuilder()
      .Input("x", dtype, {m, k})
      .Input("w", dtype, {k, n})
      .Node("mm", "mm", "", {TensorArg("self", "x"), TensorArg("mat2", "w")}, dtype, {m, n})
      .Node("cast", "_to_copy", "", {TensorArg("self", "mm"), testing::DTypeArg("dtype", kF32)}, kF32, {m, n})
      .Output("cast")
      .Build(kGemm);
}

// The decode shape of the issue: x[m, 4096] W[14336, 4096] bf16, with the byte and flop counts
// the partitioner gives it.
KernelTask DecodeTask(int64_t m) {
  KernelTask task = Linear(kBF16, m, 14336, 4096);
  task.set_flops(2 * m * 14336 * 4096);
  task.set_min_bytes(2 * (m * 4096 + 14336 * 4096 + m * 14336));
  return task;
}

TEST(GemvTest, AppliesToSkinnyProductsOnly) {
  EXPECT_TRUE(kFamily.Applies(DecodeTask(1)).ok());
  EXPECT_TRUE(kFamily.Applies(DecodeTask(8)).ok());
  EXPECT_TRUE(kFamily.Applies(Linear(kF32, 16, 64, 64, true, "gelu")).ok());
  const absl::Status tall = kFamily.Applies(Linear(kBF16, 17, 64, 64));
  EXPECT_EQ(tall.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(tall.message()), HasSubstr("M = 17 rows per product"));
  const absl::Status float64 = kFamily.Applies(Linear(kF64, 4, 64, 64));
  EXPECT_EQ(float64.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(float64.message()), HasSubstr("gemv: "));
}

TEST(GemvTest, DeclinesAnEpilogueThatReadsTheProductElsewhere) {
  // permute(mm(x, w)): the output's element e is not the product's element e.
  const KernelTask transposed =
      TaskBuilder()
          .Input("x", kF32, {4, 32})
          .Input("w", kF32, {32, 8})
          .Node("mm", "mm", "", {TensorArg("self", "x"), TensorArg("mat2", "w")}, kF32, {4, 8})
          .Node("t", "permute", "", {TensorArg("self", "mm"), testing::IntsArg("dims", {1, 0})},
                kF32, {8, 4})
          .Node("r", "relu", "", {TensorArg("self", "t")}, kF32, {8, 4})
          .Output("r")
          .Build(kGemm);
  const absl::Status status = kFamily.Applies(transposed);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(status.message()), HasSubstr("reads the product at another element"));
}

TEST(GemvTest, ValidateNamesTheViolatedConstraint) {
  const KernelTask odd = Linear(kBF16, 2, 64, 4097);
  const SchedulePoint base = DefaultOf(odd);
  EXPECT_EQ(base.parameters.at("vector_width"), 1);  // 4097 allows no wider vector
  EXPECT_TRUE(kFamily.Validate(odd, base).ok());
  auto message = [](const absl::Status& status) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    return std::string(status.message());
  };
  EXPECT_THAT(message(kFamily.Validate(odd, With(base, {{"vector_width", 8}}))),
              HasSubstr("vector_width 8 does not divide K (4097)"));
  const KernelTask f32 = Linear(kF32, 1, 64, 4096);
  EXPECT_THAT(message(kFamily.Validate(f32, With(DefaultOf(f32), {{"vector_width", 8}}))),
              HasSubstr("exceeds a 16-byte load"));
  EXPECT_THAT(message(kFamily.Validate(f32, With(DefaultOf(f32), {{"m_per_pass", 4}}))),
              HasSubstr("m_per_pass 4 for M = 1"));
  const KernelTask short_k = Linear(kBF16, 1, 64, 256);
  EXPECT_THAT(message(kFamily.Validate(short_k, With(DefaultOf(short_k), {{"split_k", 2}}))),
              HasSubstr("split_k 2 leaves lanes idle"));
  // W[k, n]: each lane accumulates rows x vector_width columns for every row of a pass.
  const KernelTask sixteen = MatmulCastTask(kF32, 16, 1024, 512);
  EXPECT_THAT(message(kFamily.Validate(
                  sixteen, With(DefaultOf(sixteen), {{"m_per_pass", 16}, {"rows", 2},
                                                     {"unroll", 2}, {"vector_width", 4}}))),
              HasSubstr("the kernel would spill"));
  EXPECT_EQ(kFamily.Validate(f32, With(DefaultOf(f32), {{"warps", 3}})).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GemvTest, PlansTheDecodeShape) {
  const KernelTask task = DecodeTask(8);
  const SchedulePoint point = DefaultOf(task);
  EXPECT_EQ(point.parameters.at("vector_width"), 8);
  EXPECT_EQ(point.parameters.at("m_per_pass"), 8);
  EXPECT_EQ(point.parameters.at("rows"), 4);
  // 4 warps x 4 rows = 16 outputs per block: 14336 / 16 blocks of 128 threads; 2 x 4 vectors
  // of 8 in flight.
  ExpectPlan(task, point, {14336 / 16, 128, 8, 8 * 2 * 4});
  auto split = kFamily.Plan(task, With(point, {{"split_k", 4}}));
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->launch.grid[0], 4u * 14336 / 16);
  // M = 1: two outputs per warp, one pass of one row.
  const SchedulePoint one = DefaultOf(DecodeTask(1));
  EXPECT_EQ(one.parameters.at("rows"), 2);
  EXPECT_EQ(one.parameters.at("m_per_pass"), 1);
  // M = 16: one pass of 16 rows (a second pass would read the weight again).
  EXPECT_EQ(DefaultOf(Linear(kBF16, 16, 4096, 4096)).parameters.at("m_per_pass"), 16);
}

TEST(GemvTest, EmitIsDeterministicAndUsesAClusterToSplitK) {
  const KernelTask task = DecodeTask(1);
  const SchedulePoint point = With(DefaultOf(task), {{"split_k", 2}});
  auto first = kFamily.Generate(task, point);
  auto second = kFamily.Generate(task, point);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->source, second->source);
  EXPECT_THAT(first->source, HasSubstr("__cluster_dims__(2, 1, 1)"));
  EXPECT_THAT(first->source, HasSubstr("#define FORGE_GEMV_B_T 1"));
  EXPECT_THAT(first->source, Not(HasSubstr("atomic")));
  auto single = kFamily.Generate(task, DefaultOf(task));
  ASSERT_TRUE(single.ok());
  EXPECT_THAT(single->source, Not(HasSubstr("__cluster_dims__")));
  EXPECT_EQ(kFamily.SupportsArch(task, point, "sm_80").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(kFamily.SupportsArch(task, point, "sm_90").ok());
  EXPECT_TRUE(kFamily.SupportsArch(task, DefaultOf(task), "sm_80").ok());
}

TEST(GemvTest, EpilogueAddsTheBiasAndAppliesTheActivation) {
  auto kernel = kFamily.Generate(Linear(kF16, 3, 96, 64, true, "silu"),
                                 DefaultOf(Linear(kF16, 3, 96, 64, true, "silu")));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  // The bias (input 2) is read at the output's column, broadcast over the rows.
  EXPECT_THAT(kernel->source, HasSubstr("in2["));
  EXPECT_THAT(kernel->source, HasSubstr("= acc + "));
  EXPECT_THAT(kernel->source, HasSubstr("out0[e] = forge_float_to_half("));
}

TEST(GemvTest, MmaTemplateTakesHalfTypesWithWholeVectorsOfTheWeight) {
  EXPECT_THAT(TemplatesOf(DecodeTask(1)), ElementsAre("gemv", "gemv_mma"));
  EXPECT_THAT(TemplatesOf(Linear(kF16, 13, 100, 136, true, "gelu")),
              ElementsAre("gemv", "gemv_mma"));
  EXPECT_THAT(TemplatesOf(MatmulCastTask(kBF16, 4, 1024, 77)), ElementsAre("gemv", "gemv_mma"));
  const KernelTask f32 = Linear(kF32, 8, 64, 64);
  const KernelTask odd_n = MatmulCastTask(kBF16, 4, 1001, 512);
  const KernelTask odd_k = Linear(kBF16, 2, 64, 4100);
  EXPECT_THAT(TemplatesOf(f32), ElementsAre("gemv"));
  EXPECT_THAT(TemplatesOf(odd_n), ElementsAre("gemv"));
  EXPECT_THAT(TemplatesOf(odd_k), ElementsAre("gemv"));
  // An mma point for a task the template cannot run is declined with the reason.
  const SchedulePoint point = MmaDefaultOf(DecodeTask(8));
  const std::pair<const KernelTask*, const char*> declined[] = {
      {&f32, "multiplies float16 or bfloat16 on tensor cores, not float32"},
      {&odd_n, "N (1001), B's leading dimension (1001) and batch stride"},
      {&odd_k, "K (4100), B's leading dimension (4100) and batch stride"}};
  for (const auto& [task, reason] : declined) {
    const absl::Status status = kFamily.Validate(*task, point);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(reason));
  }
}

TEST(GemvTest, MmaValidateNamesTheViolatedConstraint) {
  auto message = [](const absl::Status& status) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    return std::string(status.message());
  };
  // N = 24: two 16-row tiles cover it, four are idle ones.
  const KernelTask narrow = Linear(kBF16, 8, 24, 256);
  const SchedulePoint base = MmaDefaultOf(narrow);
  EXPECT_TRUE(kFamily.Validate(narrow, base).ok());
  EXPECT_TRUE(kFamily.Validate(narrow, With(base, {{"tiles", 2}})).ok());
  EXPECT_THAT(message(kFamily.Validate(narrow, With(base, {{"tiles", 4}}))),
              HasSubstr("tiles 4 of 16 outputs for N = 24"));
  // K = 256: 8 chunks of 32; 8 ranks of one chunk leave 3 of 4 warps idle.
  EXPECT_THAT(message(kFamily.Validate(narrow, With(base, {{"split_k", 8}, {"unroll", 1}}))),
              HasSubstr("leaves warps idle: K = 256 gives each block 1 steps of 32"));
  const KernelTask decode = DecodeTask(8);
  EXPECT_THAT(message(kFamily.Validate(decode, With(MmaDefaultOf(decode),
                                                    {{"tiles", 4}, {"unroll", 8}}))),
              HasSubstr("the kernel would spill"));
  // W[k, n]: 64-column tiles, steps of 16 along K; 32 accumulators per tile.
  const KernelTask kn = MatmulCastTask(kBF16, 8, 96, 64);
  const SchedulePoint kn_base = MmaDefaultOf(kn);
  EXPECT_TRUE(kFamily.Validate(kn, kn_base).ok());
  EXPECT_THAT(message(kFamily.Validate(kn, With(kn_base, {{"tiles", 4}}))),
              HasSubstr("tiles 4 of 64 outputs for N = 96"));
  EXPECT_THAT(message(kFamily.Validate(kn, With(kn_base, {{"split_k", 4}, {"warps", 2}}))),
              HasSubstr("gives each block 1 steps of 16"));
  EXPECT_THAT(message(kFamily.Validate(kn, With(kn_base, {{"tiles", 2}, {"unroll", 4},
                                                          {"warps", 1}}))),
              HasSubstr("the kernel would spill"));
  // The FFMA template's parameter is no part of the mma space.
  EXPECT_THAT(message(kFamily.Validate(narrow, With(base, {{"rows", 2}}))), HasSubstr("rows"));
}

TEST(GemvTest, MmaPlansAndEmitsTheDecodeShape) {
  for (int64_t m : {1, 8}) {
    const KernelTask task = DecodeTask(m);
    const SchedulePoint point = MmaDefaultOf(task);
    const std::map<std::string, int64_t> expected = {
        {"l2_prefetch", 0}, {"split_k", 1}, {"tiles", 1}, {"unroll", 4}, {"warps", 4}};
    EXPECT_EQ(point.parameters, expected);
    // 16 rows of W per block, its 4 warps splitting K; per lane 4 steps x rows g and g + 8, 16
    // bytes each.
    ExpectPlan(task, point, {14336 / 16, 128, 8, 8 * 4 * 2});
    auto split = kFamily.Generate(task, With(point, {{"split_k", 4}}));
    ASSERT_TRUE(split.ok()) << split.status();
    EXPECT_EQ(split->launch.grid[0], 4u * 14336 / 16);
    EXPECT_THAT(split->source, HasSubstr("__cluster_dims__(4, 1, 1)"));
    EXPECT_THAT(split->source, HasSubstr("#define FORGE_GEMV_MMA_BF16 1"));
    EXPECT_THAT(split->source, HasSubstr("#define FORGE_GEMV_N_TILES 1"));
    EXPECT_THAT(split->source, HasSubstr("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
    EXPECT_THAT(split->source, Not(HasSubstr("atomic")));
  }
  // M = 13 in float16: two n-tiles of 8 rows of A.
  const KernelTask thirteen = Linear(kF16, 13, 100, 136, true, "gelu");
  auto kernel = kFamily.Generate(thirteen, MmaDefaultOf(thirteen));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("#define FORGE_GEMV_MMA_BF16 0"));
  EXPECT_THAT(kernel->source, HasSubstr("#define FORGE_GEMV_N_TILES 2"));
  EXPECT_EQ(kernel->launch.grid[0], 7u);  // ceil(100 / 16)
  // mma.sync needs sm_80; clusters sm_90.
  const SchedulePoint point = MmaDefaultOf(thirteen);
  EXPECT_TRUE(kFamily.SupportsArch(thirteen, point, "sm_80").ok());
  const absl::Status turing = kFamily.SupportsArch(thirteen, point, "sm_75");
  EXPECT_EQ(turing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(turing.message()), HasSubstr("gemv_mma needs sm_80"));
  EXPECT_EQ(kFamily.SupportsArch(thirteen, With(point, {{"split_k", 2}}), "sm_80").code(),
            absl::StatusCode::kFailedPrecondition);
  // W[k, n]: 64 columns per tile, A's pairs read as words when aligned.
  const KernelTask kn = MatmulCastTask(kBF16, 4, 1024, 512);
  auto columns = kFamily.Generate(kn, MmaDefaultOf(kn));
  ASSERT_TRUE(columns.ok()) << columns.status();
  EXPECT_EQ(columns->launch.grid[0], 1024u / 64);
  EXPECT_THAT(columns->source, HasSubstr("#define FORGE_GEMV_B_T 0"));
  EXPECT_THAT(columns->source, HasSubstr("#define FORGE_GEMV_X_VECTOR 1"));
  EXPECT_THAT(columns->source, HasSubstr("__byte_perm"));
}

// Every valid combination of the parameters that shape the mma kernel's registers (tiles, unroll,
// and M's n-tiles through the tasks), with split_k, warps and l2_prefetch cycled through their
// values, compiles for sm_90 (and sm_80 without a cluster) without spills: both weight layouts, the
// decode shape, odd K and N, M = 1, 2, 3, 4, 5, 13 and 16, batches and a broadcast batch.
TEST(GemvTest, MmaSourcesCompileWithNvrtc) {
  const std::vector<std::pair<std::string, KernelTask>> tasks = {
      {"decode bf16 M=1", DecodeTask(1)},
      {"decode bf16 M=8", DecodeTask(8)},
      {"linear f16 bias gelu M=13 odd N", Linear(kF16, 13, 100, 136, true, "gelu")},
      {"linear bf16 M=3 K=1032", Linear(kBF16, 3, 1000, 1032, true, "relu")},
      {"bmm bf16 W^T M=2", testing::MatmulTask(kBF16, 3, 3, 2, 128, 256, true, "tanh")},
      {"bmm f16 broadcast W^T M=16",
       testing::MatmulTask(kF16, 4, 1, 16, 72, 200, true, "sigmoid")},
      {"mm bf16 [k, n] cast M=4", MatmulCastTask(kBF16, 4, 1024, 512)},
      {"mm f16 [k, n] scale residual M=16", testing::ScaleResidualTask(kF16, 16, 256, 512, 0.5)},
      {"bmm bf16 [k, n] odd K M=5", testing::MatmulTask(kBF16, 2, 2, 5, 72, 77, false, "relu")},
  };
  const int64_t splits[] = {1, 2, 4, 8}, warps[] = {4, 1, 8, 2};
  std::vector<GeneratedKernel> kernels90, kernels80;
  std::vector<std::string> labels90, labels80;
  int cycle = 0;
  for (const auto& [label, task] : tasks) {
    const SchedulePoint base = MmaDefaultOf(task);
    int points = 0;
    for (int64_t tiles : {1, 2, 4}) {
      for (int64_t unroll : {1, 2, 4, 8}) {
        // The first of the cycled (split_k, warps) choices that is valid for this task.
        std::optional<SchedulePoint> point;
        for (int attempt = 0; attempt < 16 && !point; ++attempt, ++cycle) {
          SchedulePoint candidate = With(base, {{"tiles", tiles},
                                                {"unroll", unroll},
                                                {"split_k", splits[cycle % 4]},
                                                {"warps", warps[(cycle / 4) % 4]},
                                                {"l2_prefetch", cycle % 2}});
          if (kFamily.Validate(task, candidate).ok()) point = std::move(candidate);
        }
        if (!point) continue;
        auto kernel = kFamily.Generate(task, *point);
        ASSERT_TRUE(kernel.ok()) << label << ": " << kernel.status();
        std::string name = label;
        for (const auto& [parameter, value] : point->parameters) {
          absl::StrAppend(&name, " ", parameter, "=", value);
        }
        if (kFamily.SupportsArch(task, *point, "sm_80").ok()) {
          kernels80.push_back(*kernel);
          labels80.push_back(name);
        }
        kernels90.push_back(*std::move(kernel));
        labels90.push_back(std::move(name));
        ++points;
      }
    }
    EXPECT_GE(points, 3) << label;
  }
  testing::ExpectCompiles(kernels90, labels90, /*expect_no_spills=*/true, {"sm_90"});
  testing::ExpectCompiles(kernels80, labels80, /*expect_no_spills=*/true, {"sm_80"});
}

// The tasks the compile test covers: each dtype, both weight layouts, odd sizes, a batch, a
// broadcast batch, transposed A, and epilogues (bias + activation, scale + residual, a cast).
std::vector<std::pair<std::string, KernelTask>> CompileTasks() {
  return {
      {"decode bf16 M=1", DecodeTask(1)},
      {"decode bf16 M=8", DecodeTask(8)},
      {"linear f16 bias gelu M=5", Linear(kF16, 5, 200, 136, true, "gelu")},
      {"linear f32 odd K and N", Linear(kF32, 3, 97, 1001, true, "relu")},
      {"mm bf16 [k, n] cast", MatmulCastTask(kBF16, 4, 1024, 512)},
      {"mm f32 [k, n] odd", MatmulCastTask(kF32, 7, 333, 77)},
      {"mm f16 scale residual", testing::ScaleResidualTask(kF16, 16, 256, 512, 0.5)},
      {"bmm bf16 W^T", testing::MatmulTask(kBF16, 3, 3, 2, 128, 256, true, "tanh")},
      {"bmm f32 broadcast", testing::MatmulTask(kF32, 4, 1, 1, 64, 96)},
  };
}

TEST(GemvTest, EmittedSourcesCompileWithNvrtc) {
  std::vector<GeneratedKernel> kernels90, kernels80;
  std::vector<std::string> labels90, labels80;
  for (const auto& [label, task] : CompileTasks()) {
    ASSERT_TRUE(kFamily.Applies(task).ok()) << label << ": " << kFamily.Applies(task);
    const std::vector<SchedulePoint> valid = testing::ValidPoints(kFamily, task);
    ASSERT_FALSE(valid.empty()) << label;
    std::vector<SchedulePoint> points = testing::EvenSample(valid, 6);
    points.push_back(DefaultOf(task));
    // The register budget's edge: 8 outputs per warp of 8 rows each, 64 accumulators; 8 loads
    // in flight per row.
    const std::map<std::string, int64_t> edges[] = {
        {{"rows", 8}, {"unroll", 1}}, {{"rows", 8}, {"unroll", 2}}, {{"unroll", 8}}};
    for (const auto& edge : edges) {
      const SchedulePoint wide = With(DefaultOf(task), edge);
      if (kFamily.Validate(task, wide).ok()) points.push_back(wide);
    }
    for (const SchedulePoint& point : points) {
      auto kernel = kFamily.Generate(task, point);
      ASSERT_TRUE(kernel.ok()) << label << ": " << kernel.status();
      std::string name = label;
      for (const auto& [parameter, value] : point.parameters) {
        absl::StrAppend(&name, " ", parameter, "=", value);
      }
      if (kFamily.SupportsArch(task, point, "sm_80").ok()) {
        kernels80.push_back(*kernel);
        labels80.push_back(name);
      }
      kernels90.push_back(*std::move(kernel));
      labels90.push_back(std::move(name));
    }
  }
  testing::ExpectCompiles(kernels90, labels90, /*expect_no_spills=*/true, {"sm_90"});
  testing::ExpectCompiles(kernels80, labels80, /*expect_no_spills=*/true, {"sm_80"});
}

TEST(GemvTest, PriorPredictsTheDecodeShapeNearTheBandwidthFloor) {
  auto prior = search::CostModelPrior::ForGpu("H200");
  ASSERT_TRUE(prior.ok()) << prior.status();
  for (int64_t m : {1, 8}) {
    const KernelTask task = DecodeTask(m);
    auto plan = kFamily.Plan(task, DefaultOf(task));
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto seconds = prior->PredictSeconds(task, *plan);
    ASSERT_TRUE(seconds.ok()) << seconds.status();
    const double floor = static_cast<double>(task.min_bytes()) / (prior->gpu().dram_bytes_per_second);
    EXPECT_GE(*seconds, floor) << "M=" << m;
    EXPECT_LE(*seconds, 2 * floor) << "M=" << m;
    // The mma template's default keeps as much in flight: near the floor too, so the search
    // measures both templates.
    auto mma = kFamily.Plan(task, MmaDefaultOf(task));
    ASSERT_TRUE(mma.ok()) << mma.status();
    auto mma_seconds = prior->PredictSeconds(task, *mma);
    ASSERT_TRUE(mma_seconds.ok()) << mma_seconds.status();
    EXPECT_GE(*mma_seconds, floor) << "M=" << m;
    EXPECT_LE(*mma_seconds, 2 * floor) << "M=" << m;
    // One scalar load per thread keeps too little in flight: predicted slower.
    auto scalar = kFamily.Plan(task, With(DefaultOf(task), {{"vector_width", 1}, {"unroll", 1},
                                                            {"rows", 1}}));
    ASSERT_TRUE(scalar.ok()) << scalar.status();
    auto scalar_seconds = prior->PredictSeconds(task, *scalar);
    ASSERT_TRUE(scalar_seconds.ok()) << scalar_seconds.status();
    EXPECT_GT(*scalar_seconds, *seconds) << "M=" << m;
  }
}

}  // namespace
}  // namespace forge::codegen
