// transpose_reduce: norms and softmax over a dim that is strided in memory while the rows are
// consecutive (a permuted NCHW tensor).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "compiler/codegen/reduction/reduction.h"
#include "compiler/codegen/reduction/reduction_test_util.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::kBF16;
using ::forge::codegen::testing::kF16;
using ::forge::codegen::testing::kF32;
using ::forge::codegen::testing::kF64;
using ::forge::codegen::testing::kReduction;
using ::forge::codegen::testing::ExpectCompiles;
using ::forge::codegen::testing::LayerNormTrailing;
using ::forge::codegen::testing::BoolArg;
using ::forge::codegen::testing::FloatArg;
using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::IntsArg;
using ::forge::codegen::testing::OptionalTensorArg;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::v1::DType;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

// ConvNeXt's: x (N, C, H, W) contiguous, permute(0, 2, 3, 1), layer_norm over C with affine.
KernelTask PermutedLayerNorm(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w) {
  return TaskBuilder()
      .Input("x", dtype, {n, c, h, w})
      .Input("w", dtype, {c})
      .Input("b", dtype, {c})
      .Node("p", "permute", "default", {TensorArg("self", "x"), IntsArg("dims", {0, 2, 3, 1})},
            dtype, {n, h, w, c})
      .Node("ln", "layer_norm", "default",
            {TensorArg("input", "p"), IntsArg("normalized_shape", {c}),
             OptionalTensorArg("weight", "w"), OptionalTensorArg("bias", "b"),
             FloatArg("eps", 1e-6), BoolArg("cudnn_enable", false)},
            dtype, {n, h, w, c})
      .Output("ln")
      .Build(kReduction);
}

// RMS norm over the channels of x.transpose(1, 2): (N, L, C) read from (N, C, L).
KernelTask TransposedRmsNorm(DType dtype, int64_t n, int64_t c, int64_t l) {
  const std::vector<int64_t> shape = {n, l, c}, row = {n, l, 1};
  return TaskBuilder()
      .Input("x", dtype, {n, c, l})
      .Input("g", dtype, {c})
      .Node("t", "transpose", "int", {TensorArg("self", "x"), IntArg("dim0", 1), IntArg("dim1", 2)},
            dtype, shape)
      .Node("pow", "pow", "Tensor_Scalar", {TensorArg("self", "t"), IntArg("exponent", 2)}, dtype,
            shape)
      .Node("mean", "mean", "dim",
            {TensorArg("self", "pow"), IntsArg("dim", {-1}), BoolArg("keepdim", true)}, dtype, row)
      .Node("add", "add", "Tensor", {TensorArg("self", "mean"), FloatArg("other", 1e-6)}, dtype,
            row)
      .Node("rsqrt", "rsqrt", "default", {TensorArg("self", "add")}, dtype, row)
      .Node("mul", "mul", "Tensor", {TensorArg("self", "t"), TensorArg("other", "rsqrt")}, dtype,
            shape)
      .Node("mul_1", "mul", "Tensor", {TensorArg("self", "mul"), TensorArg("other", "g")}, dtype,
            shape)
      .Output("mul_1")
      .Build(kReduction);
}

// softmax / log_softmax over the last dim of x.permute(0, 2, 1): (N, L, C) read from (N, C, L).
KernelTask PermutedSoftmax(DType dtype, const char* op, int64_t n, int64_t c, int64_t l) {
  return TaskBuilder()
      .Input("x", dtype, {n, c, l})
      .Node("p", "permute", "default", {TensorArg("self", "x"), IntsArg("dims", {0, 2, 1})}, dtype,
            {n, l, c})
      .Node("s", op, "int", {TensorArg("self", "p"), IntArg("dim", -1)}, dtype, {n, l, c})
      .Output("s")
      .Build(kReduction);
}

// A point of a layer norm task (welford).
SchedulePoint TransposePoint(int64_t tile_rows, int64_t threads) {
  return {"transpose_reduce",
          {{"tile_rows", tile_rows}, {"threads_per_block", threads}, {"welford", 1}}};
}

TEST(TransposeReduceTest, IsTheDefaultForRowsReadAcrossMemory) {
  ReductionFamily family;
  // ConvNeXt-T's stage 2 shape, bf16: a tile of 32 positions x 192 channels, 256 threads.
  const KernelTask task = PermutedLayerNorm(kBF16, 32, 192, 56, 56);
  absl::StatusOr<std::vector<TemplateSpace>> spaces = family.ScheduleSpace(task);
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  ASSERT_EQ(spaces->size(), 2u);
  EXPECT_EQ((*spaces)[0].template_name, "transpose_reduce");
  EXPECT_EQ((*spaces)[1].template_name, "row_reduce");  // still searched
  const SchedulePoint point = DefaultPoint((*spaces)[0]);
  EXPECT_EQ(point.parameters,
            (std::map<std::string, int64_t>{
                {"tile_rows", 32}, {"threads_per_block", 256}, {"welford", 0}}));
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->launch.grid[0], 32u * 56 * 56 / 32);
  EXPECT_EQ(kernel->launch.block[0], 256u);
  // 32 rows of 192 floats, each row padded to an odd number of words (193).
  EXPECT_EQ(kernel->launch.dynamic_shared_bytes, 32u * 193 * 4);
  // Lanes on consecutive rows fill the tile; 8 threads a row combine in a fixed order; the
  // outputs (contiguous NHWC) are written along the rows from the tile.
  EXPECT_THAT(kernel->source, HasSubstr("const int row_in_block = threadIdx.x % 32;"));
  EXPECT_THAT(kernel->source, HasSubstr("forge_col_allreduce<8, 32>"));
  EXPECT_THAT(kernel->source, HasSubstr("tile0[row_in_block * 193 + c0] = "));
  EXPECT_THAT(kernel->source, HasSubstr("const int row_in_block = i / 192;"));
  // Two passes over the tile (mean, then squared deviations from it), no Welford division per
  // element; the fill loop unrolled so that a thread's 24 loads are in flight together.
  EXPECT_THAT(kernel->source, HasSubstr("acc0_1 += p1_1 * p1_1;"));
  EXPECT_THAT(kernel->source, HasSubstr("#pragma unroll\n  for (int j = 0; j < 24; ++j)"));
  EXPECT_THAT(kernel->source, HasSubstr("stored along the rows"));

  // A layer norm over the contiguous last dim keeps row_reduce alone.
  spaces = family.ScheduleSpace(LayerNormTrailing(kBF16, {4096, 192}, 1));
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  ASSERT_EQ(spaces->size(), 1u);
  EXPECT_EQ(spaces->front().template_name, "row_reduce");
  // x permuted into the kernel argument's strides (NCHW memory seen as NHWC): also transposed.
  spaces = family.ScheduleSpace(LayerNormTrailing(kF32, {2, 9, 11, 40}, 1, {3960, 11, 1, 99}));
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  EXPECT_EQ(spaces->front().template_name, "transpose_reduce");
}

TEST(TransposeReduceTest, ValidateSaysWhatDoesNotFit) {
  ReductionFamily family;
  auto reason = [&](const KernelTask& task, const SchedulePoint& point) {
    return std::string(family.Validate(task, point).message());
  };
  EXPECT_TRUE(family.Validate(PermutedLayerNorm(kF32, 2, 64, 7, 9), TransposePoint(32, 128)).ok());
  // Not read across memory: the row templates read it coalesced already.
  EXPECT_THAT(reason(LayerNormTrailing(kF32, {64, 256}, 1), TransposePoint(32, 256)),
              HasSubstr("no row-shaped value is read with a unit stride across rows"));
  // 512 threads over 16 rows: 32 threads a row for 12 channels.
  EXPECT_THAT(reason(PermutedLayerNorm(kF32, 2, 12, 8, 8), TransposePoint(16, 512)),
              HasSubstr("32 threads per row leaves half of them idle for 12 reduced elements"));
  // 5 rows in a tile of 64.
  EXPECT_THAT(reason(PermutedLayerNorm(kF32, 1, 64, 1, 5), TransposePoint(64, 256)),
              HasSubstr("tile_rows 64 leaves half the tile empty for 5 rows"));
  // 64 rows of 1024 float64 channels: 512 KB of tile.
  EXPECT_THAT(reason(PermutedLayerNorm(kF64, 2, 1024, 8, 8), TransposePoint(64, 256)),
              HasSubstr("bytes in shared memory; more than 163840"));
  EXPECT_THAT(reason(PermutedLayerNorm(kF32, 2, 64, 8, 8),
                     {"transpose_reduce",
                      {{"tile_rows", 48}, {"threads_per_block", 256}, {"welford", 1}}}),
              HasSubstr("tile_rows"));
}

// Every kind (layer norm with affine, RMS norm, softmax, log_softmax), dtype, both output orders
// and odd sizes compile for sm_90 without spills at the default and at other points.
TEST(TransposeReduceTest, VariantsCompile) {
  ReductionFamily family;
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  const std::vector<std::pair<std::string, KernelTask>> tasks = {
      {"layer_norm bf16 convnext", PermutedLayerNorm(kBF16, 32, 192, 56, 56)},
      {"layer_norm f32 odd", PermutedLayerNorm(kF32, 3, 37, 5, 7)},
      {"layer_norm f16", PermutedLayerNorm(kF16, 2, 96, 14, 14)},
      {"layer_norm f64", PermutedLayerNorm(kF64, 2, 33, 4, 9)},
      {"rms_norm bf16 transpose", TransposedRmsNorm(kBF16, 2, 128, 240)},
      {"softmax f32 odd", PermutedSoftmax(kF32, "softmax", 3, 50, 99)},
      {"log_softmax f16", PermutedSoftmax(kF16, "log_softmax", 2, 256, 64)},
  };
  for (const auto& [label, task] : tasks) {
    absl::StatusOr<std::vector<TemplateSpace>> spaces = family.ScheduleSpace(task);
    ASSERT_TRUE(spaces.ok()) << label << ": " << spaces.status();
    ASSERT_EQ(spaces->front().template_name, "transpose_reduce") << label;
    int added = 0;
    for (const SchedulePoint& point : EnumeratePoints(spaces->front())) {
      if (!family.Validate(task, point).ok()) continue;
      if (added++ % 3 != 0 && point.parameters != DefaultPoint(spaces->front()).parameters) {
        continue;
      }
      absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
      ASSERT_TRUE(kernel.ok()) << label << ": " << kernel.status();
      kernels.push_back(*kernel);
      std::string name = label + " ";
      for (const auto& [parameter, value] : point.parameters) {
        absl::StrAppend(&name, parameter, "=", value, " ");
      }
      labels.push_back(name);
    }
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_90"});
}

// The tile keeps the strided reads: RMS norm's x (read by pow and by the final mul) comes from
// the tile, the weight from memory; an output permuted like the input is written across rows.
TEST(TransposeReduceTest, TileHoldsTheStridedValues) {
  ReductionFamily family;
  const KernelTask task = TransposedRmsNorm(kF32, 2, 128, 240);
  const SchedulePoint point = DefaultPoint(family.ScheduleSpace(task)->front());
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  // x is loaded from memory once, to fill the tile.
  size_t loads = 0;
  for (size_t at = kernel->source.find("in0["); at != std::string::npos;
       at = kernel->source.find("in0[", at + 1)) {
    ++loads;
  }
  EXPECT_EQ(loads, 1u);
  EXPECT_THAT(kernel->source, HasSubstr("in1["));
}

}  // namespace
}  // namespace forge::codegen
