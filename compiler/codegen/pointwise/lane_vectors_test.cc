// Vector loads through views in pointwise_flat (lane_vectors.h): RoPE's transposed heads and
// broadcast tables, aligned slices; scalar loads where the lanes' reads are not one aligned
// vector.
#include "compiler/codegen/pointwise/lane_vectors.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "compiler/codegen/pointwise/pointwise.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::ExpectCompiles;
using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::codegen::testing::TensorsArg;
using ::forge::v1::DType;
using ::forge::v1::KernelTask;

constexpr auto kPointwise = forge::v1::KERNEL_FAMILY_POINTWISE;
constexpr DType kBF16 = forge::v1::DTYPE_BFLOAT16;
constexpr DType kF32 = forge::v1::DTYPE_FLOAT32;

// Mistral's RoPE on q of (B, S, H, D) read as (B, H, S, D): t * cos + cat(-t2, t1) * sin, with
// cos and sin of (S, D); `rotate` false: t * cos alone.
KernelTask Rope(DType dtype, int64_t b, int64_t s, int64_t h, int64_t d, bool rotate = true) {
  const std::vector<int64_t> heads = {b, h, s, d}, half = {b, h, s, d / 2};
  TaskBuilder builder;
  builder.Input("x", dtype, {b, s, h, d})
      .Input("cos", dtype, {s, d})
      .Input("sin", dtype, {s, d})
      .Node("t", "transpose", "int", {TensorArg("self", "x"), IntArg("dim0", 1), IntArg("dim1", 2)},
            dtype, heads)
      .Node("left", "mul", "Tensor", {TensorArg("self", "t"), TensorArg("other", "cos")}, dtype,
            heads);
  if (!rotate) return builder.Output("left").Build(kPointwise);
  return builder
      .Node("t1", "slice", "Tensor",
            {TensorArg("self", "t"), IntArg("dim", 3), IntArg("start", 0), IntArg("end", d / 2)},
            dtype, half)
      .Node("t2", "slice", "Tensor",
            {TensorArg("self", "t"), IntArg("dim", 3), IntArg("start", d / 2), IntArg("end", d)},
            dtype, half)
      .Node("neg", "neg", "default", {TensorArg("self", "t2")}, dtype, half)
      .Node("rot", "cat", "default", {TensorsArg("tensors", {"neg", "t1"}), IntArg("dim", -1)},
            dtype, heads)
      .Node("right", "mul", "Tensor", {TensorArg("self", "rot"), TensorArg("other", "sin")}, dtype,
            heads)
      .Node("sum", "add", "Tensor", {TensorArg("self", "left"), TensorArg("other", "right")},
            dtype, heads)
      .Output("sum")
      .Build(kPointwise);
}

// x[:, start:start + 64] * 2 of x (64, 80).
KernelTask SliceScale(int64_t start) {
  return TaskBuilder()
      .Input("x", kF32, {64, 80})
      .Node("s", "slice", "Tensor",
            {TensorArg("self", "x"), IntArg("dim", 1), IntArg("start", start),
             IntArg("end", start + 64)},
            kF32, {64, 64})
      .Node("y", "mul", "Tensor", {TensorArg("self", "s"), IntArg("other", 2)}, kF32, {64, 64})
      .Output("y")
      .Build(kPointwise);
}

GeneratedKernel Default(const KernelTask& task) {
  PointwiseFamily family;
  absl::StatusOr<std::vector<TemplateSpace>> spaces = family.ScheduleSpace(task);
  EXPECT_TRUE(spaces.ok()) << spaces.status();
  if (!spaces.ok()) return {};
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, DefaultPoint(spaces->back()));
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel.ok() ? *kernel : GeneratedKernel{};
}

int Count(const std::string& text, const std::string& what) {
  int count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

TEST(LaneVectorsTest, RopeReadsThroughTheTransposeAndTheTablesAsVectors) {
  // D 128 and 64: 8 bf16 lanes a chunk, each read one 16-byte vector; no scalar load left.
  for (int64_t d : {128, 64}) {
    const GeneratedKernel kernel = Default(Rope(kBF16, 1, 33, 4, d, /*rotate=*/false));
    EXPECT_EQ(Count(kernel.source, "x 8 elements"), 1);
    for (const char* input : {"in0", "in1", "in2"}) {
      if (std::string(input) == "in2") continue;  // sin is not read without the rotation
      EXPECT_EQ(Count(kernel.source,
                      absl::StrCat("reinterpret_cast<const ForgeVec<ForgeBFloat16, 8>*>(", input)),
                1)
          << input << " D " << d;
      EXPECT_EQ(Count(kernel.source, absl::StrCat(input, "[")), 0) << input << " D " << d;
    }
  }
  // With the rotation: t * cos and the tables stay vectors; the cat's halves (an EmitChoice
  // alternative each) read x element by element.
  const GeneratedKernel rope = Default(Rope(kBF16, 1, 33, 4, 128));
  EXPECT_EQ(Count(rope.source, "reinterpret_cast<const ForgeVec<ForgeBFloat16, 8>*>(in0"), 1);
  EXPECT_EQ(Count(rope.source, "reinterpret_cast<const ForgeVec<ForgeBFloat16, 8>*>(in1"), 1);
  EXPECT_EQ(Count(rope.source, "reinterpret_cast<const ForgeVec<ForgeBFloat16, 8>*>(in2"), 1);
  ExpectCompiles({Default(Rope(kBF16, 1, 33, 4, 128, false)), rope,
                  Default(Rope(kF32, 2, 5, 3, 64))},
                 {"rope t*cos bf16 D128", "rope bf16 D128", "rope f32 D64"},
                 /*expect_no_spills=*/true, {"sm_90"});
}

TEST(LaneVectorsTest, OnlyAlignedUnitStrideReadsAreVectors) {
  // A slice starting at 8 (a multiple of the 4 float lanes) is a vector; at 3 it is not.
  GeneratedKernel kernel = Default(SliceScale(8));
  EXPECT_EQ(Count(kernel.source, "reinterpret_cast<const ForgeVec<float, 4>*>(in0"), 1);
  EXPECT_EQ(Count(kernel.source, "in0["), 0);
  kernel = Default(SliceScale(3));
  EXPECT_EQ(Count(kernel.source, "reinterpret_cast<const ForgeVec<float, 4>*>(in0"), 0);
  EXPECT_EQ(Count(kernel.source, "in0["), 4);
  // x.t(): the lanes' elements are a column apart.
  kernel = Default(TaskBuilder()
                       .Input("x", kF32, {64, 32})
                       .Node("t", "t", "default", {TensorArg("self", "x")}, kF32, {32, 64})
                       .Node("y", "mul", "Tensor", {TensorArg("self", "t"), IntArg("other", 2)},
                             kF32, {32, 64})
                       .Output("y")
                       .Build(kPointwise));
  EXPECT_EQ(Count(kernel.source, "reinterpret_cast<const ForgeVec<float, 4>*>(in0"), 0);
  EXPECT_EQ(Count(kernel.source, "in0["), 4);
}

TEST(LaneVectorsTest, KeysNeedADividingWidthAndOneLaneDim) {
  EXPECT_FALSE(pointwise::ChunkLanes::Of({{4, 66}}, 4).has_value());  // a chunk could span rows
  EXPECT_FALSE(pointwise::ChunkLanes::Of({{4, 64}}, 1).has_value());
  ASSERT_TRUE(pointwise::ChunkLanes::Of({{4, 64, 1}}, 4).has_value());  // trailing size-1 dim
}

}  // namespace
}  // namespace forge::codegen
