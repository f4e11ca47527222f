#include "compiler/codegen/reduction/reduction.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/reduction/analysis.h"
#include "compiler/codegen/reduction/reduction_test_util.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::BoolArg;
using ::forge::codegen::testing::Cases;
using ::forge::codegen::testing::ClusterPoint;
using ::forge::codegen::testing::ExpectCompiles;
using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::IntsArg;
using ::forge::codegen::testing::LayerNormGelu;
using ::forge::codegen::testing::LayerNormTrailing;
using ::forge::codegen::testing::Point;
using ::forge::codegen::testing::RmsNorm;
using ::forge::codegen::testing::Softmax;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::codegen::testing::kBF16;
using ::forge::codegen::testing::kF32;
using ::forge::codegen::testing::kReduction;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

TEST(ReductionTest, DefaultSchedulesCompileWithoutSpills) {
  ReductionFamily family;
  // Defaults that need sm_90 (a row in a cluster's shared memory) compile for sm_90 only.
  std::vector<GeneratedKernel> kernels, sm90_kernels;
  std::vector<std::string> labels, sm90_labels;
  for (const auto& [label, task] : Cases()) {
    ASSERT_TRUE(family.Applies(task).ok()) << label << ": " << family.Applies(task);
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    ASSERT_TRUE(space.ok()) << label << ": " << space.status();
    const SchedulePoint point = DefaultPoint(space->front());
    ASSERT_TRUE(family.Validate(task, point).ok()) << label << ": " << family.Validate(task, point);
    absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
    ASSERT_TRUE(kernel.ok()) << label << ": " << kernel.status();
    const bool sm80 = family.SupportsArch(task, point, "sm_80").ok();
    (sm80 ? kernels : sm90_kernels).push_back(*kernel);
    (sm80 ? labels : sm90_labels).push_back(label);
  }
  EXPECT_EQ(sm90_labels, std::vector<std::string>{"softmax_f32_393216"});
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true);
  ExpectCompiles(sm90_kernels, sm90_labels, /*expect_no_spills=*/true, {"sm_90"});
}

TEST(ReductionTest, ScheduleSpaceSampleCompiles) {
  ReductionFamily family;
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const KernelTask& task : {Softmax(kF32, {64, 2048}), LayerNormGelu(kBF16, 64, 1024)}) {
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    ASSERT_TRUE(space.ok()) << space.status();
    std::vector<SchedulePoint> valid;
    for (const SchedulePoint& point : EnumeratePoints(space->front())) {
      if (family.Validate(task, point).ok()) valid.push_back(point);
    }
    // An evenly spread sample of 25 valid points per task.
    ASSERT_GE(valid.size(), 25u);
    for (size_t i = 0; i < 25; ++i) {
      const SchedulePoint& point = valid[i * valid.size() / 25];
      absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      kernels.push_back(*kernel);
      std::string label;
      for (const auto& [name, value] : point.parameters) absl::StrAppend(&label, name, "=", value, " ");
      labels.push_back(label);
    }
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/false);
}

TEST(ReductionTest, ScheduleSpaceOffersAlgorithmChoicesOnlyWhereTheyApply) {
  ReductionFamily family;
  auto names = [&](const KernelTask& task) {
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    std::vector<std::string> result;
    for (const ScheduleParameter& p : space->front().parameters) result.push_back(p.name);
    return result;
  };
  EXPECT_THAT(names(Softmax(kF32, {8, 1000})), ::testing::Contains("online_softmax"));
  EXPECT_THAT(names(Softmax(kF32, {8, 1000})), ::testing::Not(::testing::Contains("welford")));
  EXPECT_THAT(names(LayerNormGelu(kF32, 8, 768)), ::testing::Contains("welford"));
  EXPECT_THAT(names(RmsNorm(kF32, 8, 768)), ::testing::Not(::testing::Contains("online_softmax")));
}

TEST(ReductionTest, IdenticalCandidatesGiveIdenticalSource) {
  ReductionFamily family;
  const KernelTask task = LayerNormGelu(kBF16, 64, 1024);
  const SchedulePoint point = DefaultPoint(family.ScheduleSpace(task)->front());
  absl::StatusOr<GeneratedKernel> first = family.Generate(task, point);
  absl::StatusOr<GeneratedKernel> second = family.Generate(LayerNormGelu(kBF16, 64, 1024), point);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->source, second->source);
  EXPECT_EQ(first->generator_version, "reduction-9");
  SchedulePoint two_pass = point;
  two_pass.parameters["welford"] = 0;
  absl::StatusOr<GeneratedKernel> third = family.Generate(task, two_pass);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(first->source, third->source);
  EXPECT_THAT(first->source, HasSubstr("forge_welford_add(acc0_0"));
  EXPECT_THAT(third->source, ::testing::Not(HasSubstr("forge_welford_add(acc0_0")));
}


TEST(ReductionTest, LaunchCoversEveryRow) {
  ReductionFamily family;
  const KernelTask task = Softmax(kF32, {3, 7, 1000});  // 21 rows
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, Point(32, 4, 4, 1, 1));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->launch.block[0], 128u);
  EXPECT_EQ(kernel->launch.grid[0], 6u);  // ceil(21 / 4)
  EXPECT_THAT(kernel->source, HasSubstr("const bool active = row_wide < 21LL;"));
}

// Where a thread's chunks cover the row (a cluster block's part) exactly, the chunk loop has no
// bounds check, so its unrolled body is one basic block whose loads issue together.
TEST(ReductionTest, ChunkLoopsCheckBoundsOnlyWhereChunksOverrun) {
  ReductionFamily family;
  struct Case {
    KernelTask task;
    SchedulePoint point;
    std::string bounds_check;  // empty: none expected
  };
  const std::vector<Case> cases = {
      {Softmax(kF32, {8, 4096}), Point(256, 1, 4, 0, 1), ""},
      {Softmax(kF32, {8, 4100}), Point(256, 1, 4, 0, 1), "if (c0 < 4100) {"},
      {Softmax(kF32, {8, 4100}), Point(256, 1, 4, 1, 1), "if (c0 < 4100) {"},
      {Softmax(kF32, {2, 393216}), ClusterPoint(8, 1024, 4), ""},
      {Softmax(kF32, {2, 100004}), ClusterPoint(8, 1024, 4), "if (c0 < segment_end) {"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<GeneratedKernel> kernel = family.Generate(c.task, c.point);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    if (c.bounds_check.empty()) {
      EXPECT_THAT(kernel->source, ::testing::Not(HasSubstr("if (c0 <")));
    } else {
      EXPECT_THAT(kernel->source, HasSubstr(c.bounds_check));
    }
  }
}

// An online softmax adds each chunk once, after all its elements are loaded (one rescale per
// chunk, no branch per element).
TEST(ReductionTest, OnlineSoftmaxAddsWholeChunks) {
  ReductionFamily family;
  absl::StatusOr<GeneratedKernel> kernel =
      family.Generate(Softmax(kF32, {8, 4096}), Point(128, 1, 4, 0, 1));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::string& source = kernel->source;
  const size_t update = source.find("forge_softmax_add(acc0_0, ");
  ASSERT_NE(update, std::string::npos);
  EXPECT_EQ(source.find("forge_softmax_add(acc0_0, ", update + 1), std::string::npos);
  EXPECT_LT(source.rfind("vec0.v[3]", update), update);  // after the chunk's last element
  EXPECT_THAT(source, HasSubstr("const float row0_inv_sum = (float)1 / acc0_0.sum;"));
}

// Layer norm's weight and bias (broadcast against the rows) are read in the same 16-byte vectors
// as the row; a cluster's shared-memory row cache is filled by cp.async, a vector per lane, in the
// input's own type.
// A reduction over the k > 1 trailing dims with keepdim (a global average pool) is one row of
// their product when the tensors are contiguous across them; without keepdim it stays
// unsupported (its result's shape could not be told from a broadcast one).
TEST(ReductionTest, ReductionsOverTrailingDimsAreOneRowOfTheirProduct) {
  const KernelTask pooled =
      testing::Statistic("var", "correction", {4, 6, 7, 9}, 2, /*keepdim=*/true);
  KernelTask two_dims = pooled;
  forge::v1::Argument* dims = two_dims.mutable_group()->mutable_nodes(1)->mutable_arguments(1);
  ASSERT_EQ(dims->name(), "dim");
  dims->mutable_ints()->add_values(-1);
  forge::v1::TensorSpec* out = two_dims.mutable_outputs(0);
  out->set_shape(3, 1);
  out->set_strides(0, 6);
  out->set_strides(1, 1);
  out->set_strides(2, 1);
  *two_dims.mutable_group()->mutable_values(2)->mutable_tensor() = *out;
  absl::StatusOr<reduction::ReductionTask> analysis = reduction::Analyze(two_dims);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_EQ(analysis->rows, 24);
  EXPECT_EQ(analysis->columns, 63);
  ReductionFamily family;
  EXPECT_TRUE(family.Applies(two_dims).ok()) << family.Applies(two_dims);

  // Dims that are not trailing, or no keepdim: as before, one dim only.
  KernelTask middle = two_dims;
  middle.mutable_group()->mutable_nodes(1)->mutable_arguments(1)->mutable_ints()->set_values(1, 1);
  EXPECT_THAT(family.Applies(middle).message(), HasSubstr("only one dimension is supported"));
}

// logsumexp takes softmax's statistics (online or in two passes) and writes max + log(sum) per
// row.
TEST(ReductionTest, LogSumExpIsSoftmaxStatisticsPerRow) {
  ReductionFamily family;
  const KernelTask task =
      testing::Statistic("logsumexp", "default", {64, 1000}, -1, /*keepdim=*/false);
  for (int online : {0, 1}) {
    absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, Point(32, 4, 4, 0, online));
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_THAT(kernel->source, HasSubstr("const float row0_value = row0_max + row0_log_sum;"));
    EXPECT_THAT(kernel->source, HasSubstr("const float r_0 = (float)(row0_value);"));
    EXPECT_EQ(kernel->source.find("forge_softmax_add(acc0_0") != std::string::npos, online == 1);
  }
}

TEST(ReductionTest, BroadcastInputsAndTheSharedRowCacheUseVectors) {
  ReductionFamily family;
  SchedulePoint layer_norm_point = Point(128, 1, 8, 1, 1);
  layer_norm_point.parameters.erase("online_softmax");
  layer_norm_point.parameters["welford"] = 0;
  absl::StatusOr<GeneratedKernel> layer_norm =
      family.Generate(LayerNormGelu(kBF16, 16, 4096), layer_norm_point);
  ASSERT_TRUE(layer_norm.ok()) << layer_norm.status();
  EXPECT_THAT(layer_norm->source,
              HasSubstr("const ForgeVec<ForgeBFloat16, 8> vec1 = *reinterpret_cast<const "
                        "ForgeVec<ForgeBFloat16, 8>*>(in1 + c0);"));
  EXPECT_THAT(layer_norm->source, HasSubstr("ForgeVec<ForgeBFloat16, 8> vec2"));
  EXPECT_THAT(layer_norm->source, ::testing::Not(HasSubstr("in1[")));

  absl::StatusOr<GeneratedKernel> cluster =
      family.Generate(Softmax(kBF16, {2, 393216}), ClusterPoint(8, 1024, 8));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ(cluster->launch.dynamic_shared_bytes, 49152u * 2u);
  EXPECT_THAT(cluster->source,
              HasSubstr("forge_cp_async<16>(&cached0[j * 1024 + lane], in0 + o0 * 393216 + c0);"));
  // Each chunk is read once its own copies have landed.
  EXPECT_THAT(cluster->source, HasSubstr("forge_cp_async_wait_pending(5 - j);"));
  EXPECT_THAT(cluster->source,
              HasSubstr("const ForgeVec<ForgeBFloat16, 8> cvec0 = cached0[j * 1024 + lane];"));
  ExpectCompiles({*layer_norm, *cluster}, {"layer_norm_gelu vector 8", "softmax bf16 cluster"},
                 /*expect_no_spills=*/true, {"sm_90"});
}

// Layer norm over several trailing dims is layer norm over one dim of their product when every
// tensor is contiguous across them: nn.LayerNorm((4, 8, 8)) on (2, 4, 8, 8) is 2 rows of 256.
TEST(ReductionTest, LayerNormOverTrailingDimsIsOneRowOfTheirProduct) {
  ReductionFamily family;
  const KernelTask task = LayerNormTrailing(kF32, {2, 4, 8, 8}, 3);
  ASSERT_TRUE(family.Applies(task).ok()) << family.Applies(task);
  absl::StatusOr<std::vector<TemplateSpace>> spaces = family.ScheduleSpace(task);
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, DefaultPoint(spaces->front()));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr(": 2 rows of 256 (dim 1, 1 inner)"));
  EXPECT_EQ(kernel->launch.block[0] * kernel->launch.grid[0] >= 2, true);
  // The anchor's shape: 16 rows of 4 M elements, long enough for a cluster per row.
  const KernelTask anchor = LayerNormTrailing(kF32, {16, 64, 256, 256}, 3);
  absl::StatusOr<std::vector<TemplateSpace>> anchor_spaces = family.ScheduleSpace(anchor);
  ASSERT_TRUE(anchor_spaces.ok()) << anchor_spaces.status();
  const SchedulePoint anchor_point = DefaultPoint(anchor_spaces->front());
  EXPECT_GT(anchor_point.parameters.at("cluster_blocks"), 1);
  absl::StatusOr<GeneratedKernel> anchor_kernel = family.Generate(anchor, anchor_point);
  ASSERT_TRUE(anchor_kernel.ok()) << anchor_kernel.status();
  EXPECT_THAT(anchor_kernel->source, HasSubstr(": 16 rows of 4194304 (dim 1, 1 inner)"));
  // bfloat16, a (1, C, H, W) weight, and a row that is not a multiple of 8.
  const KernelTask odd = LayerNormTrailing(kBF16, {3, 5, 7, 9}, 3, {}, {1, 5, 7, 9});
  absl::StatusOr<std::vector<TemplateSpace>> odd_spaces = family.ScheduleSpace(odd);
  ASSERT_TRUE(odd_spaces.ok()) << odd_spaces.status();
  absl::StatusOr<GeneratedKernel> odd_kernel =
      family.Generate(odd, DefaultPoint(odd_spaces->front()));
  ASSERT_TRUE(odd_kernel.ok()) << odd_kernel.status();
  ExpectCompiles({*kernel, *odd_kernel}, {"layer_norm (4, 8, 8)", "layer_norm (5, 7, 9) bf16"},
                 /*expect_no_spills=*/true);
  ExpectCompiles({*anchor_kernel}, {"layer_norm (64, 256, 256)"}, /*expect_no_spills=*/true,
                 {"sm_90"});

  // Not contiguous across the normalized dims (x permuted from (N, H, W, C)): not one row.
  const KernelTask permuted = LayerNormTrailing(kF32, {2, 4, 8, 8}, 3, {256, 1, 32, 4});
  EXPECT_THAT(family.Applies(permuted).message(), HasSubstr("normalizes more than the last"));
  // A weight that broadcasts within the normalized dims cannot be merged with them either.
  const KernelTask partial = LayerNormTrailing(kF32, {2, 4, 8, 8}, 3, {}, {8});
  EXPECT_FALSE(family.Applies(partial).ok());
}

// max_registers asks __launch_bounds__ for the blocks per SM that keep a thread under the cap:
// the layer norm + GELU anchor's 64-thread rows, 64 elements cached per thread, get 10 blocks and
// at most 96 registers (ptxas took 128 on its own, 8 blocks).
TEST(ReductionTest, MaxRegistersCapsWhatPtxasAllocates) {
  ReductionFamily family;
  const KernelTask task = LayerNormGelu(kBF16, 16384, 4096);
  SchedulePoint point = Point(64, 1, 8, 1, 1);
  point.parameters.erase("online_softmax");
  point.parameters["welford"] = 0;
  point.parameters["max_registers"] = 96;
  absl::StatusOr<GeneratedKernel> capped = family.Generate(task, point);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_THAT(capped->source, HasSubstr("__launch_bounds__(64, 10) forge_row_reduce("));
  EXPECT_THAT(capped->source, HasSubstr("at most 96 registers per thread"));
  const forge::compile::CompileResult result =
      testing::Pool().Submit(testing::RequestFor(*capped, "sm_90")).get();
  ASSERT_TRUE(result.ok()) << result.log;
  const forge::compile::PtxasFunctionReport* report = result.ptxas.Find(capped->kernel_name);
  ASSERT_NE(report, nullptr) << result.log;
  EXPECT_LE(report->registers, 96);
  EXPECT_EQ(report->spill_store_bytes, 0) << result.log;

  // Too few for the cached row, or no cap beyond what one block per SM already allows.
  point.parameters["max_registers"] = 64;
  EXPECT_THAT(family.Validate(task, point).message(),
              HasSubstr("max_registers 64 is too few for the 64 cached row elements"));
  // (512 rows of 64 Ki: few long rows, offered clusters too; this point is a block a row.)
  SchedulePoint big_blocks = Point(1024, 1, 4, 0, 1);
  big_blocks.parameters["cluster_blocks"] = 1;
  big_blocks.parameters["max_registers"] = 64;
  EXPECT_THAT(family.Validate(Softmax(kF32, {512, 65536}), big_blocks).message(),
              HasSubstr("fewer than two blocks per SM"));
  big_blocks.parameters["max_registers"] = 0;
  EXPECT_TRUE(family.Validate(Softmax(kF32, {512, 65536}), big_blocks).ok());
}

TEST(ReductionTest, ValidateRejectsInvalidPoints) {
  ReductionFamily family;
  const KernelTask odd = Softmax(kF32, {64, 1001});
  EXPECT_TRUE(family.Validate(odd, Point(128, 1, 1, 0, 1)).ok());
  EXPECT_THAT(family.Validate(odd, Point(128, 1, 4, 0, 1)).message(),
              HasSubstr("vector_width 4 does not divide the row length 1001"));
  const KernelTask wide = Softmax(kF32, {64, 4096});
  EXPECT_THAT(family.Validate(wide, Point(1024, 2, 4, 0, 1)).message(),
              HasSubstr("threads_per_row 1024 x rows_per_block 2 exceeds 1024 threads per block"));
  EXPECT_THAT(family.Validate(wide, Point(128, 1, 8, 0, 1)).message(),
              HasSubstr("vector_width 8 of 4-byte elements exceeds a 16-byte vector access"));
  EXPECT_THAT(family.Validate(wide, Point(32, 1, 4, 1, 1)).message(),
              HasSubstr("cache_row keeps 128 elements"));
  EXPECT_THAT(family.Validate(Softmax(kF32, {64, 100}), Point(512, 1, 1, 0, 1)).message(),
              HasSubstr("threads_per_row 512 leaves half the row's threads idle"));
  EXPECT_THAT(family.Validate(Softmax(kF32, {2, 4096}), Point(128, 8, 4, 0, 1)).message(),
              HasSubstr("rows_per_block 8 leaves half the block idle for 2 rows"));
  SchedulePoint with_welford = Point(128, 1, 4, 0, 1);
  with_welford.parameters["welford"] = 1;
  EXPECT_THAT(family.Validate(wide, with_welford).message(), HasSubstr("has no parameter 'welford'"));
}

TEST(ReductionTest, RejectsWhatItCannotGenerate) {
  ReductionFamily family;
  absl::Status two_dims_reduced = family.Applies(
      TaskBuilder()
          .Input("x", kF32, {8, 16, 4})
          .Node("s", "sum", "dim_IntList", {TensorArg("self", "x"), IntsArg("dim", {0, 2})}, kF32, {16})
          .Output("s")
          .Build(kReduction));
  EXPECT_EQ(two_dims_reduced.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(two_dims_reduced.message(),
              HasSubstr("reduces dims [0, 2] of a rank-3 tensor; only one dimension is supported"));

  absl::Status other_axes = family.Applies(
      TaskBuilder()
          .Input("x", kF32, {8, 16})
          .Node("a", "amax", "default", {TensorArg("self", "x"), IntsArg("dim", {1}), BoolArg("keepdim", true)}, kF32, {8, 1})
          .Node("b", "amax", "default", {TensorArg("self", "x"), IntsArg("dim", {0}), BoolArg("keepdim", true)}, kF32, {1, 16})
          .Output("a")
          .Output("b")
          .Build(kReduction));
  EXPECT_THAT(other_axes.message(), HasSubstr("reduces dim 0 but the first reduction reduces dim 1"));

  absl::Status view = family.Applies(
      TaskBuilder()
          .Input("x", kF32, {8, 16})
          .Node("t", "t", "default", {TensorArg("self", "x")}, kF32, {16, 8})
          .Node("s", "softmax", "int", {TensorArg("self", "t"), IntArg("dim", -1)}, kF32, {16, 8})
          .Output("s")
          .Build(kReduction));
  EXPECT_TRUE(view.ok()) << view;
  // A transpose of a softmax's result reads other rows' elements: not one row's statistics.
  absl::Status across_rows = family.Applies(
      TaskBuilder()
          .Input("x", kF32, {16, 16})
          .Node("s", "softmax", "int", {TensorArg("self", "x"), IntArg("dim", -1)}, kF32, {16, 16})
          .Node("t", "t", "default", {TensorArg("self", "s")}, kF32, {16, 16})
          .Output("t")
          .Build(kReduction));
  EXPECT_THAT(across_rows.message(), HasSubstr("is read at another row's element"));

  absl::Status no_reduction = family.Applies(
      TaskBuilder()
          .Input("x", kF32, {8})
          .Node("n", "neg", "default", {TensorArg("self", "x")}, kF32, {8})
          .Output("n")
          .Build(kReduction));
  EXPECT_THAT(no_reduction.message(), HasSubstr("has no reduction"));

  // Two dims, but not contiguous across them: not one row of their product.
  absl::Status two_dims = family.Applies(
      TaskBuilder()
          .Input("x", kF32, {8, 16, 4}, {64, 1, 16})
          .Node("ln", "layer_norm", "default", {TensorArg("input", "x"), IntsArg("normalized_shape", {16, 4})}, kF32, {8, 16, 4})
          .Output("ln")
          .Build(kReduction));
  EXPECT_THAT(two_dims.message(), HasSubstr("normalizes more than the last dimension"));

  absl::Status integer = family.Applies(
      TaskBuilder()
          .Input("x", forge::v1::DTYPE_INT64, {8, 16})
          .Node("s", "sum", "dim_IntList", {TensorArg("self", "x"), IntsArg("dim", {-1})}, forge::v1::DTYPE_INT64, {8})
          .Output("s")
          .Build(kReduction));
  EXPECT_THAT(integer.message(), HasSubstr("reduces a non-floating tensor"));
}

// A plan's cost hints come from its layout: where the row is cached, what a thread's loop unrolls,
// and how many passes read an uncached row again (a two-pass softmax's second statistics pass,
// and the pass that writes the row-shaped output).
TEST(ReductionTest, CostHintsFollowTheLayout) {
  ReductionFamily family;
  const KernelTask rows = Softmax(kF32, {8, 1000});
  const auto plan = [&](const KernelTask& task, const SchedulePoint& point) {
    absl::StatusOr<LaunchPlan> planned = family.Plan(task, point);
    EXPECT_TRUE(planned.ok()) << planned.status();
    return planned.value_or(LaunchPlan());
  };
  const LaunchPlan cached = plan(rows, Point(32, 1, 4, /*cache=*/1, /*online=*/1));
  EXPECT_EQ(cached.hints.row_cache, RowCache::kRegisters);
  EXPECT_EQ(cached.hints.row_rereads, 0);
  EXPECT_EQ(cached.hints.unrolled_elements, 4);
  EXPECT_EQ(plan(rows, Point(32, 1, 4, 0, 1)).hints.row_rereads, 1);
  const LaunchPlan two_pass = plan(rows, Point(32, 1, 4, 0, 0));
  EXPECT_EQ(two_pass.hints.row_cache, RowCache::kNone);
  EXPECT_EQ(two_pass.hints.row_rereads, 2);
  EXPECT_EQ(two_pass.hints.row_bytes, 1000.0 * 4);
  const LaunchPlan cluster = plan(Softmax(kF32, {16, 393216}), ClusterPoint(8, 512, 4));
  EXPECT_EQ(cluster.hints.row_cache, RowCache::kSharedMemory);
  EXPECT_EQ(cluster.hints.unrolled_elements, 4 * ReductionFamily::kClusterChunkUnroll);
}

}  // namespace
}  // namespace forge::codegen
