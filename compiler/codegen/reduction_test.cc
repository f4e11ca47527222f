#include "compiler/codegen/reduction.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/codegen_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::BoolArg;
using ::forge::codegen::testing::ExpectCompiles;
using ::forge::codegen::testing::FloatArg;
using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::IntsArg;
using ::forge::codegen::testing::OptionalTensorArg;
using ::forge::codegen::testing::StringArg;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::v1::DType;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

constexpr DType kF32 = forge::v1::DTYPE_FLOAT32;
constexpr DType kF16 = forge::v1::DTYPE_FLOAT16;
constexpr DType kBF16 = forge::v1::DTYPE_BFLOAT16;
constexpr DType kF64 = forge::v1::DTYPE_FLOAT64;
constexpr auto kReduction = forge::v1::KERNEL_FAMILY_REDUCTION;

KernelTask Softmax(DType dtype, std::vector<int64_t> shape, const char* op = "softmax") {
  return TaskBuilder()
      .Input("x", dtype, shape)
      .Node("softmax", op, "int", {TensorArg("self", "x"), IntArg("dim", -1)}, dtype, shape)
      .Output("softmax")
      .Build(kReduction);
}

// layer_norm(x, (C,), w, b, 1e-5) then gelu, as the layer-norm+GELU test model exports it.
KernelTask LayerNormGelu(DType dtype, int64_t rows, int64_t columns) {
  return TaskBuilder()
      .Input("x", dtype, {rows, columns})
      .Input("w", dtype, {columns})
      .Input("b", dtype, {columns})
      .Node("layer_norm", "layer_norm", "default",
            {TensorArg("input", "x"), IntsArg("normalized_shape", {columns}),
             OptionalTensorArg("weight", "w"), OptionalTensorArg("bias", "b"),
             FloatArg("eps", 1e-5), BoolArg("cudnn_enable", false)},
            dtype, {rows, columns})
      .Node("gelu", "gelu", "default", {TensorArg("self", "layer_norm")}, dtype, {rows, columns})
      .Output("gelu")
      .Build(kReduction);
}

// nn.LayerNorm((C, H, W)) over x of shape (N, C, H, W), then `epilogue` (none, or "gelu");
// `x_strides` as the kernel sees x (contiguous when empty).
KernelTask LayerNormTrailing(DType dtype, std::vector<int64_t> shape, int normalized_dims,
                             std::vector<int64_t> x_strides = {},
                             std::vector<int64_t> weight_shape = {}) {
  const std::vector<int64_t> normalized(shape.end() - normalized_dims, shape.end());
  if (weight_shape.empty()) weight_shape = normalized;
  return TaskBuilder()
      .Input("x", dtype, shape, x_strides)
      .Input("w", dtype, weight_shape)
      .Input("b", dtype, weight_shape)
      .Node("layer_norm", "layer_norm", "default",
            {TensorArg("input", "x"), IntsArg("normalized_shape", normalized),
             OptionalTensorArg("weight", "w"), OptionalTensorArg("bias", "b"),
             FloatArg("eps", 1e-5), BoolArg("cudnn_enable", false)},
            dtype, shape)
      .Node("gelu", "gelu", "default", {TensorArg("self", "layer_norm")}, dtype, shape)
      .Output("gelu")
      .Build(kReduction);
}

// The RMSNorm pattern of the Llama block: x * rsqrt(mean(x^2, -1, keepdim) + eps) * w.
KernelTask RmsNorm(DType dtype, int64_t rows, int64_t columns) {
  return TaskBuilder()
      .Input("x", dtype, {rows, columns})
      .Input("w", dtype, {columns})
      .Node("pow", "pow", "Tensor_Scalar", {TensorArg("self", "x"), IntArg("exponent", 2)}, dtype, {rows, columns})
      .Node("mean", "mean", "dim", {TensorArg("self", "pow"), IntsArg("dim", {-1}), BoolArg("keepdim", true)}, dtype, {rows, 1})
      .Node("add", "add", "Tensor", {TensorArg("self", "mean"), FloatArg("other", 1e-6)}, dtype, {rows, 1})
      .Node("rsqrt", "rsqrt", "default", {TensorArg("self", "add")}, dtype, {rows, 1})
      .Node("mul", "mul", "Tensor", {TensorArg("self", "x"), TensorArg("other", "rsqrt")}, dtype, {rows, columns})
      .Node("mul_1", "mul", "Tensor", {TensorArg("self", "mul"), TensorArg("other", "w")}, dtype, {rows, columns})
      .Output("mul_1")
      .Build(kReduction);
}

KernelTask RowStatistic(const char* op, const char* overload, bool keepdim, DType dtype = kF32) {
  const std::vector<int64_t> out_shape = keepdim ? std::vector<int64_t>{6, 5, 1} : std::vector<int64_t>{6, 5};
  return TaskBuilder()
      .Input("x", dtype, {6, 5, 100})
      .Node("scaled", "mul", "Tensor", {TensorArg("self", "x"), IntArg("other", 2)}, dtype, {6, 5, 100})
      .Node("r", op, overload, {TensorArg("self", "scaled"), IntsArg("dim", {-1}), BoolArg("keepdim", keepdim)}, dtype, out_shape)
      .Output("r")
      .Build(kReduction);
}

// Channel RMS norm as exported from x * rsqrt(x.pow(2).mean(dim=1, keepdim=True) + eps) * w on
// (N, C, H, W), w of shape (C, 1, 1).
KernelTask ChannelRmsNorm(DType dtype, std::vector<int64_t> shape) {
  std::vector<int64_t> per_row = shape;
  per_row[1] = 1;
  return TaskBuilder()
      .Input("x", dtype, shape)
      .Input("w", dtype, {shape[1], 1, 1})
      .Node("pow", "pow", "Tensor_Scalar", {TensorArg("self", "x"), IntArg("exponent", 2)}, dtype, shape)
      .Node("mean", "mean", "dim", {TensorArg("self", "pow"), IntsArg("dim", {1}), BoolArg("keepdim", true)}, dtype, per_row)
      .Node("add", "add", "Tensor", {TensorArg("self", "mean"), FloatArg("other", 1e-6)}, dtype, per_row)
      .Node("rsqrt", "rsqrt", "default", {TensorArg("self", "add")}, dtype, per_row)
      .Node("mul", "mul", "Tensor", {TensorArg("self", "x"), TensorArg("other", "rsqrt")}, dtype, shape)
      .Node("mul_1", "mul", "Tensor", {TensorArg("self", "mul"), TensorArg("other", "w")}, dtype, shape)
      .Output("mul_1")
      .Build(kReduction);
}

KernelTask SoftmaxDim(DType dtype, std::vector<int64_t> shape, int64_t dim) {
  return TaskBuilder()
      .Input("x", dtype, shape)
      .Node("softmax", "_softmax", "default", {TensorArg("self", "x"), IntArg("dim", dim), BoolArg("half_to_float", false)}, dtype, shape)
      .Output("softmax")
      .Build(kReduction);
}

// `op` over dim `dim` of x * 2 (var: var.correction with `correction`).
KernelTask Statistic(const char* op, const char* overload, std::vector<int64_t> shape, int64_t dim,
                     bool keepdim, DType dtype = kF32, int64_t correction = 1) {
  std::vector<int64_t> out_shape = shape;
  if (keepdim) {
    out_shape[dim < 0 ? dim + shape.size() : dim] = 1;
  } else {
    out_shape.erase(out_shape.begin() + (dim < 0 ? dim + shape.size() : dim));
  }
  std::vector<forge::v1::Argument> arguments = {TensorArg("self", "scaled"), IntsArg("dim", {dim})};
  if (std::string(op) == "var") arguments.push_back(IntArg("correction", correction));
  arguments.push_back(BoolArg("keepdim", keepdim));
  return TaskBuilder()
      .Input("x", dtype, shape)
      .Node("scaled", "mul", "Tensor", {TensorArg("self", "x"), IntArg("other", 2)}, dtype, shape)
      .Node("r", op, overload, std::move(arguments), dtype, out_shape)
      .Output("r")
      .Build(kReduction);
}

// torch.var_mean(x, dim, correction=0, keepdim=True): outputs "vm.0" (var) and "vm.1" (mean).
KernelTask VarMean(std::vector<int64_t> shape, int64_t dim) {
  std::vector<int64_t> out_shape = shape;
  out_shape[dim] = 1;
  KernelTask task =
      TaskBuilder()
          .Input("x", kF32, shape)
          .Node("vm.0", "var_mean", "correction", {TensorArg("self", "x"), IntsArg("dim", {dim}), IntArg("correction", 0), BoolArg("keepdim", true)}, kF32, out_shape)
          .Node("mean_plus_one", "add", "Tensor", {TensorArg("self", "vm.1"), IntArg("other", 1)}, kF32, out_shape)
          .Output("vm.0")
          .Output("mean_plus_one")
          .Build(kReduction);
  forge::v1::Value* mean = task.mutable_group()->add_values();
  *mean = task.group().values(1);
  mean->set_name("vm.1");
  task.mutable_group()->mutable_nodes(0)->add_outputs("vm.1");
  return task;
}

std::vector<std::pair<std::string, KernelTask>> Cases() {
  std::vector<std::pair<std::string, KernelTask>> cases;
  cases.emplace_back("softmax_f32_1000", Softmax(kF32, {8, 1000}));
  cases.emplace_back("softmax_f64_3d", Softmax(kF64, {2, 3, 257}));
  cases.emplace_back("log_softmax_f16_4096", Softmax(kF16, {4, 4096}, "log_softmax"));
  cases.emplace_back("softmax_f32_393216", Softmax(kF32, {16, 393216}));
  cases.emplace_back("layer_norm_gelu_bf16_4096", LayerNormGelu(kBF16, 16, 4096));
  cases.emplace_back("layer_norm_gelu_f32_768", LayerNormGelu(kF32, 10, 768));
  cases.emplace_back("rms_norm_f32_4096", RmsNorm(kF32, 4, 4096));
  cases.emplace_back("rms_norm_bf16_512", RmsNorm(kBF16, 7, 512));
  cases.emplace_back("sum_keepdim", RowStatistic("sum", "dim_IntList", true));
  cases.emplace_back("sum", RowStatistic("sum", "dim_IntList", false));
  cases.emplace_back("mean", RowStatistic("mean", "dim", false, kF16));
  cases.emplace_back("amax_keepdim", RowStatistic("amax", "default", true));
  cases.emplace_back("amin", RowStatistic("amin", "default", false, kF64));
  cases.emplace_back("var_last_dim", Statistic("var", "correction", {33, 1001}, -1, false));
  cases.emplace_back("var_last_dim_unbiased0_f16",
                     Statistic("var", "correction", {7, 4096}, 1, true, kF16, 0));
  cases.emplace_back("var_mean_last_dim", VarMean({9, 300}, 1));
  cases.emplace_back("channel_rms_norm_f32", ChannelRmsNorm(kF32, {4, 64, 32, 32}));
  cases.emplace_back("channel_rms_norm_bf16", ChannelRmsNorm(kBF16, {2, 96, 7, 9}));
  cases.emplace_back("channel_rms_norm_anchor", ChannelRmsNorm(kF32, {112, 64, 512, 512}));
  cases.emplace_back("softmax_dim1_f32", SoftmaxDim(kF32, {8, 1000, 33}, 1));
  cases.emplace_back("softmax_dim0_f16", SoftmaxDim(kF16, {300, 129}, 0));
  cases.emplace_back("sum_dim1", Statistic("sum", "dim_IntList", {6, 100, 17}, 1, false));
  cases.emplace_back("mean_dim1_keepdim", Statistic("mean", "dim", {6, 4097, 5}, 1, true));
  cases.emplace_back("amax_dim0", Statistic("amax", "default", {5000, 3}, 0, false, kF64));
  cases.emplace_back("amin_dim2_bf16", Statistic("amin", "default", {3, 4, 50, 64}, 2, true, kBF16));
  cases.emplace_back("var_dim1", Statistic("var", "correction", {16, 256, 49}, 1, true));
  cases.emplace_back("var_mean_dim0", VarMean({77, 130}, 0));
  // Views inside the group: softmax over a transposed input (strided reads), a sum over dim 1 of
  // a permuted one (col_reduce), and a layer norm whose output is reshaped back.
  cases.emplace_back("softmax_of_transpose",
                     TaskBuilder()
                         .Input("x", kF32, {300, 129})
                         .Node("t", "transpose", "int", {TensorArg("self", "x"), IntArg("dim0", 0), IntArg("dim1", 1)}, kF32, {129, 300})
                         .Node("s", "softmax", "int", {TensorArg("self", "t"), IntArg("dim", -1)}, kF32, {129, 300})
                         .Output("s")
                         .Build(kReduction));
  cases.emplace_back("sum_dim1_of_permute",
                     TaskBuilder()
                         .Input("x", kBF16, {4, 7, 33})
                         .Node("p", "permute", "default", {TensorArg("self", "x"), IntsArg("dims", {0, 2, 1})}, kBF16, {4, 33, 7})
                         .Node("r", "sum", "dim_IntList", {TensorArg("self", "p"), IntsArg("dim", {1}), BoolArg("keepdim", true)}, kBF16, {4, 1, 7})
                         .Output("r")
                         .Build(kReduction));
  cases.emplace_back("layer_norm_of_view",
                     TaskBuilder()
                         .Input("x", kF32, {8, 4, 64})
                         .Node("v", "view", "default", {TensorArg("self", "x"), IntsArg("size", {32, 64})}, kF32, {32, 64})
                         .Node("ln", "layer_norm", "default", {TensorArg("input", "v"), IntsArg("normalized_shape", {64})}, kF32, {32, 64})
                         .Output("ln")
                         .Build(kReduction));
  // Softmax of a layer norm's output, and its row max as a second output.
  cases.emplace_back(
      "layer_norm_then_softmax_and_amax",
      TaskBuilder()
          .Input("x", kF32, {32, 256})
          .Node("ln", "layer_norm", "default", {TensorArg("input", "x"), IntsArg("normalized_shape", {256})}, kF32, {32, 256})
          .Node("sm", "softmax", "int", {TensorArg("self", "ln"), IntArg("dim", 1)}, kF32, {32, 256})
          .Node("mx", "amax", "default", {TensorArg("self", "ln"), IntsArg("dim", {1}), BoolArg("keepdim", true)}, kF32, {32, 1})
          .Output("sm")
          .Output("mx")
          .Build(kReduction));
  return cases;
}

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

SchedulePoint ClusterPoint(int64_t blocks, int64_t threads, int64_t width, int64_t online = 1) {
  return {"row_reduce",
          {{"threads_per_row", threads},
           {"rows_per_block", 1},
           {"vector_width", width},
           {"cache_row", 1},
           {"cluster_blocks", blocks},
           {"online_softmax", online},
           {"max_registers", 0}}};
}

// The softmax anchor's row (393216 float32, 1.5 MiB) fits no block: eight blocks of a cluster
// keep it in shared memory: the default point, whether the rows are few or many.
TEST(ReductionTest, LongRowsAreSharedByAClusterOfBlocks) {
  ReductionFamily family;
  const KernelTask task = Softmax(kF32, {16, 393216});
  absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
  ASSERT_TRUE(space.ok()) << space.status();
  const SchedulePoint point = DefaultPoint(space->front());
  EXPECT_EQ(point.parameters.at("cluster_blocks"), 8);
  EXPECT_EQ(point.parameters.at("cache_row"), 1);
  EXPECT_EQ(point.parameters.at("threads_per_row"), 512);
  EXPECT_EQ(point.parameters.at("vector_width"), 4);
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  // A cluster of 8 blocks per row, each with its 49152 columns in shared memory.
  EXPECT_EQ(kernel->launch.grid[0], 16u * 8u);
  EXPECT_EQ(kernel->launch.block[0], 512u);
  EXPECT_EQ(kernel->launch.dynamic_shared_bytes, 49152u * 4u);
  EXPECT_THAT(kernel->source, HasSubstr("__cluster_dims__(8, 1, 1)"));
  EXPECT_THAT(kernel->source, HasSubstr("forge_cluster_allreduce<8>"));
  EXPECT_THAT(kernel->source, HasSubstr("const int segment_begin = cluster_rank * 49152;"));
  EXPECT_THAT(kernel->source, HasSubstr("if (forge_cluster_blocks() != 8) __trap();"));

  // With rows enough to fill the GPU too (measured faster than streaming rows, read twice).
  absl::StatusOr<std::vector<TemplateSpace>> many_rows = family.ScheduleSpace(Softmax(kF32, {4096, 393216}));
  ASSERT_TRUE(many_rows.ok());
  EXPECT_EQ(DefaultPoint(many_rows->front()).parameters.at("cluster_blocks"), 8);
  EXPECT_EQ(DefaultPoint(many_rows->front()).parameters.at("cache_row"), 1);
  EXPECT_EQ(DefaultPoint(many_rows->front()).parameters.at("threads_per_row"), 512);

  // Short rows never see the parameter.
  absl::StatusOr<std::vector<TemplateSpace>> short_space =
      family.ScheduleSpace(Softmax(kF32, {64, 4096}));
  ASSERT_TRUE(short_space.ok());
  for (const ScheduleParameter& parameter : short_space->front().parameters) {
    EXPECT_NE(parameter.name, "cluster_blocks");
  }
}

// Without cache_row the blocks of a cluster still split the row and combine through distributed
// shared memory, but each block reads its segment again from global memory in the later passes:
// with a cluster's rows few enough to be in flight at once, those reads can come from L2 while
// the blocks keep several per SM (the cached point holds one 192 KiB block per SM).
TEST(ReductionTest, ClusterWithoutTheRowCacheRereadsItsSegment) {
  ReductionFamily family;
  const KernelTask task = Softmax(kF32, {4096, 393216});
  SchedulePoint point = ClusterPoint(8, 512, 4);
  point.parameters["cache_row"] = 0;
  ASSERT_TRUE(family.Validate(task, point).ok()) << family.Validate(task, point);
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->launch.grid[0], 4096u * 8u);
  EXPECT_EQ(kernel->launch.dynamic_shared_bytes, 0u);
  EXPECT_THAT(kernel->source, HasSubstr("__cluster_dims__(8, 1, 1)"));
  EXPECT_THAT(kernel->source, HasSubstr("forge_cluster_allreduce<8>"));
  EXPECT_THAT(kernel->source, ::testing::Not(HasSubstr("cached0")));
  ExpectCompiles({*kernel}, {"softmax cluster 8 without cache"}, /*expect_no_spills=*/true,
                 {"sm_90"});
}

// A cached cluster is persistent: as many clusters as can be resident take rows from a counter
// until none is left, and copy the next row into shared memory while writing this one's outputs.
TEST(ReductionTest, CachedClustersTakeRowsUntilNoneIsLeft) {
  ReductionFamily family;
  absl::StatusOr<GeneratedKernel> kernel =
      family.Generate(Softmax(kF32, {4096, 393216}), ClusterPoint(8, 1024, 4));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  // One 192 KiB block per SM: twice the 132 SMs of an H100-class GPU, in clusters of 8, plus one.
  EXPECT_EQ(kernel->launch.grid[0], 34u * 8u);
  const std::string& source = kernel->source;
  EXPECT_THAT(source, HasSubstr("forge_row_slot[0] = atomicAdd(&forge_rows_taken, 1u);"));
  EXPECT_THAT(source, HasSubstr("for (int iteration = 0; row < 4096LL; ++iteration) {"));
  // Chunk j of the next row is copied in once chunk j's outputs are stored.
  const size_t store = source.find("*reinterpret_cast<ForgeVec<float, 4>*>(out0 + ");
  const size_t refill = source.find("if (next_row < 4096LL) forge_fill_row_chunk(next_row, j);");
  ASSERT_NE(store, std::string::npos);
  ASSERT_NE(refill, std::string::npos);
  EXPECT_LT(store, refill);
  // The first pass waits for chunk j's copies alone, the later chunks' still in flight.
  EXPECT_THAT(source, HasSubstr("forge_cp_async_wait_pending(11 - j);"));
  // The last cluster to finish resets the counters for the next launch.
  EXPECT_THAT(source, HasSubstr("atomicAdd(&forge_clusters_done, 1u) == gridDim.x / 8 - 1"));

  // Without the cache, a cluster per row as before.
  SchedulePoint uncached = ClusterPoint(8, 1024, 4);
  uncached.parameters["cache_row"] = 0;
  absl::StatusOr<GeneratedKernel> streaming =
      family.Generate(Softmax(kF32, {4096, 393216}), uncached);
  ASSERT_TRUE(streaming.ok()) << streaming.status();
  EXPECT_EQ(streaming->launch.grid[0], 4096u * 8u);
  EXPECT_THAT(streaming->source, ::testing::Not(HasSubstr("forge_rows_taken")));
}

TEST(ReductionTest, ClusterPointsNeedSm90) {
  ReductionFamily family;
  const KernelTask task = Softmax(kF32, {16, 393216});
  const SchedulePoint point = ClusterPoint(8, 1024, 4);
  ASSERT_TRUE(family.Validate(task, point).ok()) << family.Validate(task, point);
  EXPECT_TRUE(family.SupportsArch(task, point, "sm_90").ok());
  EXPECT_TRUE(family.SupportsArch(task, point, "sm_90a").ok());
  EXPECT_TRUE(family.SupportsArch(task, point, "sm_100").ok());
  const absl::Status sm80 = family.SupportsArch(task, point, "sm_80");
  EXPECT_EQ(sm80.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(sm80.message(), HasSubstr("thread block clusters"));
  EXPECT_EQ(family.SupportsArch(task, point, "gfx90a").code(),
            absl::StatusCode::kInvalidArgument);
  SchedulePoint single = point;
  single.parameters["cluster_blocks"] = 1;
  single.parameters["cache_row"] = 0;
  EXPECT_TRUE(family.SupportsArch(task, single, "sm_80").ok());
  // Compiled for sm_80 anyway, the source says why it cannot be.
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  ASSERT_TRUE(kernel.ok());
  forge::compile::CompileResult result =
      ::forge::codegen::testing::Pool().Submit(::forge::codegen::testing::RequestFor(*kernel, "sm_80")).get();
  EXPECT_FALSE(result.ok());
  EXPECT_THAT(result.log, HasSubstr("needs thread block clusters"));
}

TEST(ReductionTest, ClusterValidateRejectsInvalidPoints) {
  ReductionFamily family;
  const KernelTask task = Softmax(kF32, {16, 393216});
  auto rejects = [&](const SchedulePoint& point, const std::string& why) {
    const absl::Status status = family.Validate(task, point);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << why;
    EXPECT_THAT(status.message(), HasSubstr(why));
  };
  SchedulePoint two_rows = ClusterPoint(8, 512, 4);
  two_rows.parameters["rows_per_block"] = 2;
  rejects(two_rows, "needs rows_per_block 1");
  // 4 blocks would keep 98304 float32 (384 KiB) each.
  rejects(ClusterPoint(4, 1024, 4), "bytes of the row to keep in shared memory");
  // The row-wide constraints hold as before.
  rejects(ClusterPoint(8, 1024, 8, 1), "vector_width 8 of 4-byte elements");
  // A 70001-column row: vector_width 1, each of 8 blocks 8751 columns, the last 8744.
  const KernelTask odd = Softmax(kF32, {4, 70001});
  EXPECT_TRUE(family.Validate(odd, ClusterPoint(8, 256, 1)).ok());
  EXPECT_FALSE(family.Validate(odd, ClusterPoint(8, 256, 2)).ok());
  // cp.async copies the cached row in vectors of at least 4 bytes, along a unit-stride row.
  const KernelTask half = Softmax(kF16, {4, 70001});
  EXPECT_THAT(family.Validate(half, ClusterPoint(8, 256, 1)).message(),
              HasSubstr("of at least 4 bytes per vector"));
  SchedulePoint uncached = ClusterPoint(8, 256, 1);
  uncached.parameters["cache_row"] = 0;
  EXPECT_TRUE(family.Validate(half, uncached).ok());
  const KernelTask transposed = TaskBuilder()
                                    .Input("x", kF32, {4, 100000}, {1, 4})
                                    .Node("softmax", "softmax", "int",
                                          {TensorArg("self", "x"), IntArg("dim", -1)}, kF32,
                                          {4, 100000})
                                    .Output("softmax")
                                    .Build(kReduction);
  EXPECT_THAT(family.Validate(transposed, ClusterPoint(8, 256, 1)).message(),
              HasSubstr("unit stride along the row"));
}

// Every reduction kind in a cluster: moments (layer norm, Welford and two-pass), two-pass
// softmax, log_softmax, sums with a row output, and mixed dtypes, bf16 rows of odd length.
TEST(ReductionTest, ClusterScheduleSpaceSampleCompilesForSm90) {
  ReductionFamily family;
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const KernelTask& task :
       {Softmax(kF32, {4, 393216}), Softmax(kBF16, {3, 128256}, "log_softmax"),
        Softmax(kF16, {2, 100003}), LayerNormGelu(kBF16, 2, 131072),
        RmsNorm(kF32, 2, 262144)}) {
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    ASSERT_TRUE(space.ok()) << space.status();
    std::vector<SchedulePoint> valid;
    for (const SchedulePoint& point : EnumeratePoints(space->front())) {
      if (point.parameters.contains("cluster_blocks") &&
          point.parameters.at("cluster_blocks") > 1 && family.Validate(task, point).ok()) {
        valid.push_back(point);
      }
    }
    ASSERT_GE(valid.size(), 6u) << task.DebugString();
    for (size_t i = 0; i < 6; ++i) {
      const SchedulePoint& point = valid[i * valid.size() / 6];
      absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      kernels.push_back(*kernel);
      std::string label = absl::StrCat(task.group().nodes(0).op(), " ");
      for (const auto& [name, value] : point.parameters) absl::StrAppend(&label, name, "=", value, " ");
      labels.push_back(label);
    }
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_90"});
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

TEST(ReductionTest, ColumnScheduleSpaceSampleCompiles) {
  ReductionFamily family;
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const KernelTask& task : {ChannelRmsNorm(kBF16, {4, 64, 16, 16}),
                                 SoftmaxDim(kF32, {8, 1000, 33}, 1),
                                 Statistic("var", "correction", {16, 256, 49}, 1, true)}) {
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    ASSERT_TRUE(space.ok()) << space.status();
    ASSERT_EQ(space->front().template_name, "col_reduce");
    std::vector<SchedulePoint> valid;
    for (const SchedulePoint& point : EnumeratePoints(space->front())) {
      if (family.Validate(task, point).ok()) valid.push_back(point);
    }
    // An evenly spread sample of 20 valid points per task.
    ASSERT_GE(valid.size(), 20u);
    for (size_t i = 0; i < 20; ++i) {
      const SchedulePoint& point = valid[i * valid.size() / 20];
      absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      kernels.push_back(*kernel);
      std::string label = "col_reduce ";
      for (const auto& [name, value] : point.parameters) absl::StrAppend(&label, name, "=", value, " ");
      labels.push_back(label);
    }
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/false);
}

SchedulePoint ColumnPoint(int64_t block, int64_t split, int64_t cache) {
  return {"col_reduce", {{"threads_per_block", block}, {"reduce_threads", split}, {"cache_row", cache}}};
}

TEST(ReductionTest, ColumnTemplateLaunchAndLayout) {
  ReductionFamily family;
  const KernelTask task = ChannelRmsNorm(kF32, {3, 64, 5, 7});  // 105 rows of 64
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, ColumnPoint(128, 4, 1));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->template_name, "col_reduce");
  EXPECT_EQ(kernel->launch.block[0], 128u);
  EXPECT_EQ(kernel->launch.grid[0], 4u);  // ceil(105 / 32)
  EXPECT_THAT(kernel->source, HasSubstr("const int row_in_block = threadIdx.x % 32;"));
  EXPECT_THAT(kernel->source, HasSubstr("forge_col_allreduce<4, 32>"));
  // The default point of the anchor shape keeps the 64 channels in registers, one thread a row.
  const KernelTask anchor = ChannelRmsNorm(kF32, {112, 64, 512, 512});
  const SchedulePoint point = DefaultPoint(family.ScheduleSpace(anchor)->front());
  EXPECT_EQ(point.parameters.at("reduce_threads"), 1);
  EXPECT_EQ(point.parameters.at("cache_row"), 1);
  // Few rows: the default splits the reduced dim to fill the GPU.
  const SchedulePoint few = DefaultPoint(family.ScheduleSpace(SoftmaxDim(kF32, {4, 100000, 2}, 1))->front());
  EXPECT_GT(few.parameters.at("reduce_threads"), 1);
}

TEST(ReductionTest, ColumnValidateRejectsInvalidPoints) {
  ReductionFamily family;
  const KernelTask task = Statistic("sum", "dim_IntList", {6, 100, 17}, 1, false);  // 102 rows of 100
  EXPECT_TRUE(family.Validate(task, ColumnPoint(64, 8, 0)).ok());
  EXPECT_EQ(family.Validate(task, ColumnPoint(512, 1, 0)).message(),
            "threads_per_block 512 / reduce_threads 1 = 512 rows per block leaves half the block "
            "idle for 102 rows");
  EXPECT_EQ(family.Validate(Statistic("sum", "dim_IntList", {6, 10, 17}, 1, false),
                            ColumnPoint(64, 32, 0)).message(),
            "reduce_threads 32 leaves half of them idle for 10 reduced elements");
  EXPECT_EQ(family.Validate(task, ColumnPoint(64, 1, 1)).message(),
            "cache_row keeps 100 elements of each of 1 row-sized inputs per thread; more than 64 "
            "registers");
  EXPECT_THAT(family.Validate(task, SchedulePoint{"row_reduce", {}}).message(),
              HasSubstr("template 'row_reduce' is not 'col_reduce'"));
}

TEST(ReductionTest, ColumnSourceIsDeterministicAndVarCorrectionShows) {
  ReductionFamily family;
  const KernelTask task = Statistic("var", "correction", {16, 256, 49}, 1, true);
  const SchedulePoint point = DefaultPoint(family.ScheduleSpace(task)->front());
  absl::StatusOr<GeneratedKernel> first = family.Generate(task, point);
  absl::StatusOr<GeneratedKernel> second =
      family.Generate(Statistic("var", "correction", {16, 256, 49}, 1, true), point);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->source, second->source);
  EXPECT_THAT(first->source, HasSubstr("acc0_0.m2 / ((float)255)"));
  absl::StatusOr<GeneratedKernel> biased =
      family.Generate(Statistic("var", "correction", {16, 256, 49}, 1, true, kF32, 0), point);
  ASSERT_TRUE(biased.ok());
  EXPECT_THAT(biased->source, HasSubstr("acc0_0.m2 / ((float)256)"));
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
  EXPECT_EQ(first->generator_version, "reduction-7");
  SchedulePoint two_pass = point;
  two_pass.parameters["welford"] = 0;
  absl::StatusOr<GeneratedKernel> third = family.Generate(task, two_pass);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(first->source, third->source);
  EXPECT_THAT(first->source, HasSubstr("forge_welford_add(acc0_0"));
  EXPECT_THAT(third->source, ::testing::Not(HasSubstr("forge_welford_add(acc0_0")));
}

SchedulePoint Point(int64_t threads, int64_t rows, int64_t width, int64_t cache, int64_t online) {
  return {"row_reduce",
          {{"threads_per_row", threads}, {"rows_per_block", rows}, {"vector_width", width},
           {"cache_row", cache}, {"online_softmax", online}, {"max_registers", 0}}};
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
  SchedulePoint big_blocks = Point(1024, 1, 4, 0, 1);
  big_blocks.parameters["max_registers"] = 64;
  EXPECT_THAT(family.Validate(Softmax(kF32, {64, 65536}), big_blocks).message(),
              HasSubstr("fewer than two blocks per SM"));
  big_blocks.parameters["max_registers"] = 0;
  EXPECT_TRUE(family.Validate(Softmax(kF32, {64, 65536}), big_blocks).ok());
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

// F.cross_entropy(logits, target, ...) as forge.export emits it: one aten::cross_entropy_loss
// node; `arguments` are those after self and target that differ from their defaults.
KernelTask CrossEntropy(DType dtype, int64_t rows, int64_t classes,
                        std::vector<forge::v1::Argument> arguments = {},
                        std::vector<int64_t> logits_strides = {}) {
  std::vector<forge::v1::Argument> all = {TensorArg("self", "x"), TensorArg("target", "t")};
  all.insert(all.end(), arguments.begin(), arguments.end());
  return TaskBuilder()
      .Input("x", dtype, {rows, classes}, std::move(logits_strides))
      .Input("t", forge::v1::DTYPE_INT64, {rows})
      .Node("cross_entropy_loss", "cross_entropy_loss", "default", std::move(all), dtype, {})
      .Output("cross_entropy_loss")
      .Build(kReduction);
}

SchedulePoint CrossEntropyPoint(int64_t threads, int64_t rows, int64_t width) {
  return {"cross_entropy",
          {{"threads_per_row", threads}, {"rows_per_block", rows}, {"vector_width", width}}};
}

std::string Label(const std::string& prefix, const SchedulePoint& point) {
  std::string label = prefix;
  for (const auto& [name, value] : point.parameters) absl::StrAppend(&label, " ", name, "=", value);
  return label;
}

TEST(CrossEntropyTest, DefaultSchedulesCompileWithoutSpills) {
  ReductionFamily family;
  const std::vector<std::pair<std::string, KernelTask>> cases = {
      {"anchor_f32_32768x4096", CrossEntropy(kF32, 32768, 4096)},
      {"bf16_odd_1001", CrossEntropy(kBF16, 77, 1001)},
      {"f16_sum", CrossEntropy(kF16, 64, 512, {IntArg("reduction", 2)})},
      {"f64_ignore_index", CrossEntropy(kF64, 9, 33, {IntArg("ignore_index", 3)})},
      {"one_class", CrossEntropy(kF32, 5, 1)},
      {"transposed_logits", CrossEntropy(kF32, 100, 7, {}, {1, 100})},
      {"vocabulary_bf16", CrossEntropy(kBF16, 16, 50257)}};
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const auto& [label, task] : cases) {
    ASSERT_TRUE(family.Applies(task).ok()) << label << ": " << family.Applies(task);
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    ASSERT_TRUE(space.ok()) << label << ": " << space.status();
    ASSERT_EQ(space->front().template_name, "cross_entropy");
    const SchedulePoint point = DefaultPoint(space->front());
    ASSERT_TRUE(family.Validate(task, point).ok()) << label << ": " << family.Validate(task, point);
    absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
    ASSERT_TRUE(kernel.ok()) << label << ": " << kernel.status();
    kernels.push_back(*kernel);
    labels.push_back(Label(label, point));
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true);
}

TEST(CrossEntropyTest, ScheduleSpaceSampleCompiles) {
  ReductionFamily family;
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const KernelTask& task :
       {CrossEntropy(kF32, 64, 2048), CrossEntropy(kBF16, 33, 1000, {IntArg("reduction", 2)})}) {
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    ASSERT_TRUE(space.ok()) << space.status();
    std::vector<SchedulePoint> valid;
    for (const SchedulePoint& point : EnumeratePoints(space->front())) {
      if (family.Validate(task, point).ok()) valid.push_back(point);
    }
    // An evenly spread sample of 12 valid points per task.
    ASSERT_GE(valid.size(), 12u);
    for (size_t i = 0; i < 12; ++i) {
      const SchedulePoint& point = valid[i * valid.size() / 12];
      absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      kernels.push_back(*kernel);
      labels.push_back(Label("cross_entropy", point));
    }
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/false);
}

TEST(CrossEntropyTest, LaunchAndSource) {
  ReductionFamily family;
  const KernelTask anchor = CrossEntropy(kF32, 32768, 4096);
  const SchedulePoint point = DefaultPoint(family.ScheduleSpace(anchor)->front());
  EXPECT_EQ(point.parameters, (std::map<std::string, int64_t>{
                                  {"threads_per_row", 32}, {"rows_per_block", 8},
                                  {"vector_width", 4}}));
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(anchor, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->kernel_name, "forge_cross_entropy");
  EXPECT_EQ(kernel->template_name, "cross_entropy");
  EXPECT_EQ(kernel->launch.block[0], 256u);
  EXPECT_EQ(kernel->launch.grid[0], 4096u);  // capped: blocks stride over the 32768 rows
  EXPECT_THAT(kernel->source, HasSubstr("constexpr long long kIgnoreIndex = -100LL;"));
  EXPECT_THAT(kernel->source, HasSubstr("constexpr bool kMean = true;"));
  // Few rows: one block per row group.
  absl::StatusOr<GeneratedKernel> small =
      family.Generate(CrossEntropy(kF32, 21, 64, {IntArg("reduction", 2), IntArg("ignore_index", 0)}),
                      CrossEntropyPoint(32, 4, 2));
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->launch.grid[0], 6u);  // ceil(21 / 4)
  EXPECT_EQ(small->launch.block[0], 128u);
  EXPECT_THAT(small->source, HasSubstr("constexpr bool kMean = false;"));
  EXPECT_THAT(small->source, HasSubstr("constexpr long long kIgnoreIndex = 0LL;"));
  EXPECT_THAT(small->source, HasSubstr("constexpr int kGridBlocks = 6;"));
}

TEST(CrossEntropyTest, SourceIsDeterministicAndSumsInBlockOrder) {
  ReductionFamily family;
  const SchedulePoint point = CrossEntropyPoint(128, 2, 8);
  absl::StatusOr<GeneratedKernel> first = family.Generate(CrossEntropy(kBF16, 300, 1024), point);
  absl::StatusOr<GeneratedKernel> second = family.Generate(CrossEntropy(kBF16, 300, 1024), point);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->source, second->source);
  EXPECT_EQ(first->generator_version, "reduction-7");
  // The one atomic is the integer counter of finished blocks; partials are added in a fixed order.
  const std::string& source = first->source;
  size_t atomics = 0;
  for (size_t at = source.find("atomic"); at != std::string::npos; at = source.find("atomic", at + 1)) {
    ++atomics;
  }
  EXPECT_EQ(atomics, 1u);
  EXPECT_THAT(source, HasSubstr("atomicAdd(&forge_ce_blocks_done, 1u)"));
  EXPECT_THAT(source, HasSubstr("for (int b = threadIdx.x; b < kGridBlocks; b += kBlockThreads)"));
}

TEST(CrossEntropyTest, ValidateRejectsInvalidPoints) {
  ReductionFamily family;
  const KernelTask task = CrossEntropy(kF32, 64, 1001);
  EXPECT_TRUE(family.Validate(task, CrossEntropyPoint(128, 1, 1)).ok());
  EXPECT_EQ(family.Validate(task, CrossEntropyPoint(128, 1, 4)).message(),
            "vector_width 4 does not divide the row length 1001");
  const KernelTask wide = CrossEntropy(kF32, 64, 4096);
  EXPECT_EQ(family.Validate(wide, CrossEntropyPoint(1024, 2, 4)).message(),
            "threads_per_row 1024 x rows_per_block 2 exceeds 1024 threads per block");
  EXPECT_EQ(family.Validate(wide, CrossEntropyPoint(128, 1, 8)).message(),
            "vector_width 8 of 4-byte elements exceeds a 16-byte vector access");
  EXPECT_TRUE(family.Validate(CrossEntropy(kBF16, 64, 4096), CrossEntropyPoint(128, 1, 8)).ok());
  EXPECT_EQ(family.Validate(CrossEntropy(kF32, 64, 100), CrossEntropyPoint(512, 1, 1)).message(),
            "threads_per_row 512 leaves half the row's threads idle for 100 columns of "
            "vector_width 1");
  EXPECT_EQ(family.Validate(CrossEntropy(kF32, 2, 4096), CrossEntropyPoint(128, 8, 4)).message(),
            "rows_per_block 8 leaves half the block idle for 2 rows");
  EXPECT_EQ(family.Validate(CrossEntropy(kF32, 100, 8, {}, {1, 100}), CrossEntropyPoint(32, 1, 2))
                .message(),
            "vector_width 2 needs logits rows of unit stride that start at multiples of 2 elements");
  EXPECT_THAT(family.Validate(wide, Point(128, 1, 4, 0, 1)).message(),
              HasSubstr("template 'row_reduce' is not 'cross_entropy'"));
}

TEST(CrossEntropyTest, RejectsUnsupportedVariants) {
  ReductionFamily family;
  auto rejection = [&](const KernelTask& task) {
    const absl::Status status = family.Applies(task);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
    return std::string(status.message());
  };
  const std::string node = "cross_entropy: aten::cross_entropy_loss.default (node cross_entropy_loss)";
  EXPECT_EQ(rejection(CrossEntropy(kF32, 8, 10, {IntArg("reduction", 0)})),
            node + " has reduction 0; only mean (1) and sum (2) are supported");
  EXPECT_EQ(rejection(CrossEntropy(kF32, 8, 10, {FloatArg("label_smoothing", 0.1)})),
            node + " has label_smoothing 0.1; only 0 is supported");
  EXPECT_EQ(rejection(TaskBuilder()
                          .Input("x", kF32, {8, 10})
                          .Input("t", forge::v1::DTYPE_INT64, {8})
                          .Input("w", kF32, {10})
                          .Node("cross_entropy_loss", "cross_entropy_loss", "default",
                                {TensorArg("self", "x"), TensorArg("target", "t"),
                                 OptionalTensorArg("weight", "w")},
                                kF32, {})
                          .Output("cross_entropy_loss")
                          .Build(kReduction)),
            node + " has class weights; only weight=None is supported");
  // Class-probability targets: float, of the logits' shape.
  EXPECT_EQ(rejection(TaskBuilder()
                          .Input("x", kF32, {8, 10})
                          .Input("t", kF32, {8, 10})
                          .Node("cross_entropy_loss", "cross_entropy_loss", "default",
                                {TensorArg("self", "x"), TensorArg("target", "t")}, kF32, {})
                          .Output("cross_entropy_loss")
                          .Build(kReduction)),
            node + " has a target that is not int64 of shape [8]; only class-index targets are "
                   "supported");
  EXPECT_EQ(rejection(TaskBuilder()
                          .Input("x", kF32, {8, 10, 3})
                          .Input("t", forge::v1::DTYPE_INT64, {8, 3})
                          .Node("cross_entropy_loss", "cross_entropy_loss", "default",
                                {TensorArg("self", "x"), TensorArg("target", "t")}, kF32, {})
                          .Output("cross_entropy_loss")
                          .Build(kReduction)),
            node + " has logits of rank 3; only (N, C) logits are supported");
  EXPECT_EQ(rejection(TaskBuilder()
                          .Input("x", kF32, {8, 10})
                          .Input("t", forge::v1::DTYPE_INT64, {8})
                          .Node("cross_entropy_loss", "cross_entropy_loss", "default",
                                {TensorArg("self", "x"), TensorArg("target", "t")}, kF32, {})
                          .Node("scaled", "mul", "Tensor",
                                {TensorArg("self", "cross_entropy_loss"), FloatArg("other", 2.0)},
                                kF32, {})
                          .Output("scaled")
                          .Build(kReduction)),
            node + " shares its task with 1 other node(s); the cross_entropy template computes "
                   "the loss alone");
}

}  // namespace
}  // namespace forge::codegen
