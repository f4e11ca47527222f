#include "compiler/codegen/scan/scan.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/scan/analysis.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::DTypeArg;
using ::forge::codegen::testing::EvenSample;
using ::forge::codegen::testing::ExpectCompiles;
using ::forge::codegen::testing::FloatArg;
using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::codegen::testing::ValidPoints;
using ::forge::v1::DType;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

constexpr DType kF32 = forge::v1::DTYPE_FLOAT32;
constexpr DType kBF16 = forge::v1::DTYPE_BFLOAT16;
constexpr DType kF16 = forge::v1::DTYPE_FLOAT16;
constexpr DType kF64 = forge::v1::DTYPE_FLOAT64;
constexpr DType kI32 = forge::v1::DTYPE_INT32;
constexpr DType kI64 = forge::v1::DTYPE_INT64;
constexpr auto kScan = forge::v1::KERNEL_FAMILY_SCAN;

// `op` (cumsum, cumprod, cummax, cummin, logcumsumexp) of x along `dim`; cummax / cummin also
// output their indices.
KernelTask ScanOf(const std::string& op, DType dtype, const std::vector<int64_t>& shape,
                  int64_t dim, DType out_dtype = forge::v1::DTYPE_UNSPECIFIED) {
  if (out_dtype == forge::v1::DTYPE_UNSPECIFIED) out_dtype = dtype;
  TaskBuilder builder;
  builder.Input("x", dtype, shape)
      .Node("y", op, "default", {TensorArg("self", "x"), IntArg("dim", dim)}, out_dtype, shape)
      .Output("y");
  KernelTask task = builder.Build(kScan);
  if (op == "cummax" || op == "cummin") {
    forge::v1::Value* indices = task.mutable_group()->add_values();
    *indices = task.group().values(1);
    indices->set_name("y_indices");
    indices->mutable_tensor()->set_dtype(kI64);
    task.mutable_group()->mutable_nodes(0)->add_outputs("y_indices");
    forge::v1::GraphOutput* output = task.mutable_group()->add_outputs();
    output->set_kind(forge::v1::OUTPUT_KIND_USER_OUTPUT);
    output->set_value_name("y_indices");
    *task.add_outputs() = indices->tensor();
  }
  return task;
}

std::string Label(const SchedulePoint& point) {
  std::string label = point.template_name;
  for (const auto& [name, value] : point.parameters) absl::StrAppend(&label, " ", name, "=", value);
  return label;
}

GeneratedKernel GenerateDefault(const KernelTask& task, const std::string& label) {
  ScanFamily family;
  EXPECT_TRUE(family.Applies(task).ok()) << label << ": " << family.Applies(task);
  absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
  EXPECT_TRUE(space.ok()) << label << ": " << space.status();
  const SchedulePoint point = DefaultPoint(space->front());
  EXPECT_TRUE(family.Validate(task, point).ok()) << label << ": " << family.Validate(task, point);
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  EXPECT_TRUE(kernel.ok()) << label << ": " << kernel.status();
  return kernel.ok() ? *kernel : GeneratedKernel{};
}

// Every op, in every floating dtype, over the last dim (row_scan) and an inner one (col_scan).
TEST(ScanTest, EveryOpDtypeAndLayoutGeneratesAndCompiles) {
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const std::string op : {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"}) {
    for (DType dtype : {kF32, kBF16, kF16, kF64}) {
      for (const auto& [shape, dim] : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
               {{37, 1000}, -1}, {{4, 33, 17}, 1}}) {
        const std::string label = absl::StrCat(op, " ", forge::v1::DType_Name(dtype), " dim ", dim,
                                               " of rank ", shape.size());
        kernels.push_back(GenerateDefault(ScanOf(op, dtype, shape, dim), label));
        labels.push_back(label);
        EXPECT_THAT(kernels.back().template_name, dim == -1 ? "row_scan" : "col_scan") << label;
      }
    }
  }
  // Integers: cumsum and cumprod of int32 give int64; cumsum's dtype argument widens float32.
  kernels.push_back(GenerateDefault(ScanOf("cumsum", kI32, {8, 300}, 1, kI64), "cumsum int32"));
  labels.push_back("cumsum int32");
  kernels.push_back(GenerateDefault(ScanOf("cumprod", kI64, {300, 8}, 0), "cumprod int64 dim 0"));
  labels.push_back("cumprod int64 dim 0");
  kernels.push_back(GenerateDefault(ScanOf("cumsum", kF32, {5000}, 0, kF64), "cumsum to f64"));
  labels.push_back("cumsum to f64");
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_90"});
}

TEST(ScanTest, DefaultsFollowTheRowLength) {
  ScanFamily family;
  // The suite's cumsum: float32 rows of 4096, a row per 256 threads of 4 x 4 elements.
  absl::StatusOr<std::vector<TemplateSpace>> space =
      family.ScheduleSpace(ScanOf("cumsum", kF32, {32768, 4096}, 1));
  ASSERT_TRUE(space.ok()) << space.status();
  EXPECT_EQ(DefaultPoint(space->front()).parameters,
            (std::map<std::string, int64_t>{{"threads_per_row", 256},
                                            {"rows_per_block", 1},
                                            {"vector_width", 4},
                                            {"elements_per_thread", 4}}));
  // Short rows: a warp per row, 8 rows per block; an odd length: no vectors.
  space = family.ScheduleSpace(ScanOf("cummax", kBF16, {1000, 33}, 1));
  ASSERT_TRUE(space.ok()) << space.status();
  EXPECT_EQ(DefaultPoint(space->front()).parameters,
            (std::map<std::string, int64_t>{{"threads_per_row", 32},
                                            {"rows_per_block", 8},
                                            {"vector_width", 1},
                                            {"elements_per_thread", 2}}));
}

// The default is the rule's point for every row length, never the declared fallback: vectors
// wherever the length allows them.
TEST(ScanTest, DefaultsAreValidForEveryRowLength) {
  ScanFamily family;
  for (int64_t length : {4, 12, 100, 1000, 3000, 4092, 4100, 12000, 16380, 65536, 1 << 20}) {
    const KernelTask task = ScanOf("cumsum", kF32, {8, length}, 1);
    absl::StatusOr<std::vector<TemplateSpace>> spaces = family.ScheduleSpace(task);
    ASSERT_TRUE(spaces.ok()) << spaces.status();
    for (const TemplateSpace& space : *spaces) {
      const SchedulePoint point = DefaultPoint(space);
      EXPECT_TRUE(family.Validate(task, point).ok()) << length << ": " << Label(point);
      EXPECT_EQ(point.parameters.at("vector_width"), 4) << length << ": " << Label(point);
    }
  }
}

TEST(ScanTest, PlanLaunchesARowPerThreadGroupAndHintsOneRead) {
  ScanFamily family;
  const KernelTask task = ScanOf("cumsum", kF32, {32768, 4096}, 1);
  const SchedulePoint point{"row_scan",
                            {{"threads_per_row", 128},
                             {"rows_per_block", 2},
                             {"vector_width", 4},
                             {"elements_per_thread", 2}}};
  absl::StatusOr<LaunchPlan> plan = family.Plan(task, point);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kernel_name, "forge_scan");
  EXPECT_EQ(plan->launch.grid, (std::array<uint32_t, 3>{16384, 1, 1}));
  EXPECT_EQ(plan->launch.block, (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_EQ(plan->hints.vector_width, 4);
  EXPECT_EQ(plan->hints.unrolled_elements, 8);
  EXPECT_EQ(plan->hints.bytes_in_flight_per_thread, 32);
  EXPECT_EQ(plan->hints.row_rereads, 0);
  EXPECT_EQ(plan->generator_version, "scan-1");

  const KernelTask columns = ScanOf("cumsum", kF32, {64, 1000, 96}, 1);
  plan = family.Plan(columns, {"col_scan", {{"threads_per_block", 256}, {"unroll", 4}}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->launch.grid, (std::array<uint32_t, 3>{24, 1, 1}));  // 6144 rows / 256
  EXPECT_EQ(plan->launch.block, (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_EQ(plan->hints.unrolled_elements, 4);
}

// Few long rows: chained_scan first (its tiles fill the GPU), row_scan second; many long rows the
// other way round.
TEST(ScanTest, LongRowsAreOfferedTheChainedScan) {
  ScanFamily family;
  const KernelTask few = ScanOf("cumsum", kF32, {4, 1 << 20}, 1);
  absl::StatusOr<std::vector<TemplateSpace>> spaces = family.ScheduleSpace(few);
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  ASSERT_EQ(spaces->size(), 2u);
  EXPECT_EQ((*spaces)[0].template_name, "chained_scan");
  EXPECT_EQ((*spaces)[1].template_name, "row_scan");
  const SchedulePoint point = DefaultPoint((*spaces)[0]);
  EXPECT_EQ(point.parameters, (std::map<std::string, int64_t>{{"threads_per_block", 256},
                                                              {"vector_width", 4},
                                                              {"elements_per_thread", 4},
                                                              {"tiles_per_lane", 8}}));
  absl::StatusOr<LaunchPlan> plan = family.Plan(few, point);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->launch.grid, (std::array<uint32_t, 3>{4 * 256, 1, 1}));  // 256 tiles a row
  EXPECT_EQ(plan->launch.block, (std::array<uint32_t, 3>{256, 1, 1}));
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(few, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("constexpr long long kTilesPerRow = 256LL;"));
  EXPECT_THAT(kernel->source, HasSubstr("constexpr long long kGroupsPerRow = 1LL;"));
  EXPECT_THAT(kernel->source, HasSubstr("constexpr int kTilesPerLane = 8;"));

  spaces = family.ScheduleSpace(ScanOf("cumsum", kF32, {1024, 32768}, 1));
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  ASSERT_EQ(spaces->size(), 2u);
  EXPECT_EQ((*spaces)[0].template_name, "row_scan");
  EXPECT_EQ((*spaces)[1].template_name, "chained_scan");

  // A tile that holds the whole row is row_scan's job.
  EXPECT_THAT(
      family
          .Validate(
              ScanOf("cumsum", kF32, {4, 16384}, 1),
              {"chained_scan",
               {{"threads_per_block", 1024},
                {"vector_width", 4},
                {"elements_per_thread", 4},
                {"tiles_per_lane", 1}}})
          .message(),
      HasSubstr("needs two tiles or more"));
  // 16 tiles a row fill one group of 32 lanes' single tiles: more tiles per lane change nothing.
  EXPECT_THAT(family
                  .Validate(ScanOf("cumsum", kF32, {4, 65536}, 1),
                            {"chained_scan",
                             {{"threads_per_block", 256},
                              {"vector_width", 4},
                              {"elements_per_thread", 4},
                              {"tiles_per_lane", 2}}})
                  .message(),
              HasSubstr("groups of half as many already hold the 16 tiles"));
}

TEST(ScanTest, ChainedScanOfEveryOpCompiles) {
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const std::string op : {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"}) {
    for (DType dtype : {kF32, kBF16, kF64}) {
      const std::string label = absl::StrCat(op, " ", forge::v1::DType_Name(dtype), " 1 x 1000003");
      kernels.push_back(GenerateDefault(ScanOf(op, dtype, {1, 1000003}, 1), label));
      labels.push_back(label);
      EXPECT_EQ(kernels.back().template_name, "chained_scan") << label;
    }
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_90"});
}

TEST(ScanTest, GenerationIsDeterministic) {
  ScanFamily family;
  const KernelTask task = ScanOf("logcumsumexp", kBF16, {64, 4096}, -1);
  const SchedulePoint point = DefaultPoint(family.ScheduleSpace(task)->front());
  absl::StatusOr<GeneratedKernel> first = family.Generate(task, point);
  absl::StatusOr<GeneratedKernel> second = family.Generate(task, point);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->source, second->source);
  // The combination order is the schedule's: no atomics, nothing that depends on timing.
  EXPECT_THAT(first->source, ::testing::Not(HasSubstr("atomic")));
}

TEST(ScanTest, FusesThePrologueAndEpilogue) {
  // cumsum(x * 2) / 4096 in bf16, and exp(logcumsumexp(x)) over an inner dim.
  TaskBuilder builder;
  builder.Input("x", kBF16, {64, 4096})
      .Node("scaled", "mul", "Scalar", {TensorArg("self", "x"), FloatArg("other", 2.0)}, kBF16,
            {64, 4096})
      .Node("sums", "cumsum", "default", {TensorArg("self", "scaled"), IntArg("dim", 1)}, kBF16,
            {64, 4096})
      .Node("mean", "div", "Scalar", {TensorArg("self", "sums"), FloatArg("other", 4096.0)}, kBF16,
            {64, 4096})
      .Output("mean");
  const KernelTask cumsum_mean = builder.Build(kScan);
  TaskBuilder lse;
  lse.Input("x", kF32, {8, 300, 17})
      .Node("l", "logcumsumexp", "default", {TensorArg("self", "x"), IntArg("dim", 1)}, kF32,
            {8, 300, 17})
      .Node("e", "exp", "default", {TensorArg("self", "l")}, kF32, {8, 300, 17})
      .Output("e");
  const KernelTask exp_lse = lse.Build(kScan);
  const GeneratedKernel first = GenerateDefault(cumsum_mean, "cumsum mean");
  const GeneratedKernel second = GenerateDefault(exp_lse, "exp logcumsumexp");
  // The prologue's multiply is in the load function, the division in the store function, and the
  // bf16 rows move as 16-byte vectors.
  EXPECT_THAT(first.source, HasSubstr("ForgeVec<ForgeBFloat16, 8>"));
  EXPECT_THAT(first.source, HasSubstr("using ForgeScanCarry = ForgeKahanCarry<float>;"));
  EXPECT_THAT(second.source, HasSubstr("using ForgeScanOp = ForgeScanLogAddExp<float>;"));
  EXPECT_EQ(second.template_name, "col_scan");
  ExpectCompiles({first, second}, {"cumsum mean", "exp logcumsumexp"}, /*expect_no_spills=*/true,
                 {"sm_90"});
}

TEST(ScanTest, AppliesNamesWhatItCannotDo) {
  ScanFamily family;
  // No scan.
  TaskBuilder relu;
  relu.Input("x", kF32, {4, 8})
      .Node("y", "relu", "default", {TensorArg("self", "x")}, kF32, {4, 8});
  EXPECT_THAT(family.Applies(relu.Output("y").Build(kScan)).message(), HasSubstr("has no scan"));
  // Two scans.
  TaskBuilder two;
  two.Input("x", kF32, {4, 8})
      .Node("a", "cumsum", "default", {TensorArg("self", "x"), IntArg("dim", 1)}, kF32, {4, 8})
      .Node("b", "cumsum", "default", {TensorArg("self", "a"), IntArg("dim", 0)}, kF32, {4, 8})
      .Output("b");
  EXPECT_THAT(family.Applies(two.Build(kScan)).message(), HasSubstr("is a second scan"));
  // A reduction in the group.
  TaskBuilder reduced;
  reduced.Input("x", kF32, {4, 8})
      .Node("a", "cumsum", "default", {TensorArg("self", "x"), IntArg("dim", 1)}, kF32, {4, 8})
      .Node("s", "amax", "default", {TensorArg("self", "a")}, kF32, {})
      .Output("s");
  EXPECT_THAT(family.Applies(reduced.Build(kScan)).message(),
              HasSubstr("neither a scan, elementwise nor a view"));
  // cummax of integers; a scan with no dim.
  EXPECT_THAT(family.Applies(ScanOf("cummax", kI32, {4, 8}, 1)).message(),
              HasSubstr("it takes floating tensors"));
  TaskBuilder no_dim;
  no_dim.Input("x", kF32, {4, 8})
      .Node("a", "cumsum", "default", {TensorArg("self", "x")}, kF32, {4, 8})
      .Output("a");
  EXPECT_EQ(family.Applies(no_dim.Build(kScan)).code(), absl::StatusCode::kInvalidArgument);
  // An epilogue that reads the scan at another element (a transpose of the result).
  TaskBuilder transposed;
  transposed.Input("x", kF32, {8, 8})
      .Node("a", "cumsum", "default", {TensorArg("self", "x"), IntArg("dim", 1)}, kF32, {8, 8})
      .Node("t", "t", "default", {TensorArg("self", "a")}, kF32, {8, 8})
      .Node("y", "neg", "default", {TensorArg("self", "t")}, kF32, {8, 8})
      .Output("y");
  const absl::Status status = family.Applies(transposed.Build(kScan));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(status.message(), HasSubstr("another element than the one it writes"));
}

TEST(ScanTest, ValidateNamesTheViolatedConstraint) {
  ScanFamily family;
  const KernelTask task = ScanOf("cumsum", kF32, {100, 1000}, 1);
  auto row = [](int64_t threads, int64_t rows, int64_t width, int64_t chunks) {
    return SchedulePoint{"row_scan",
                         {{"threads_per_row", threads},
                          {"rows_per_block", rows},
                          {"vector_width", width},
                          {"elements_per_thread", chunks}}};
  };
  EXPECT_TRUE(family.Validate(task, row(64, 2, 4, 4)).ok());
  EXPECT_THAT(family.Validate(task, row(1024, 2, 1, 1)).message(), HasSubstr("exceeds 1024"));
  EXPECT_THAT(family.Validate(task, row(1024, 1, 4, 1)).message(), HasSubstr("idle"));
  EXPECT_THAT(family.Validate(ScanOf("cumsum", kBF16, {100, 1000}, 1), row(32, 1, 8, 8)).message(),
              HasSubstr("exceeds 32"));
  EXPECT_THAT(family.Validate(ScanOf("cumsum", kF32, {100, 999}, 1), row(32, 1, 2, 1)).message(),
              HasSubstr("does not divide"));
  EXPECT_THAT(family.Validate(ScanOf("cumsum", kF64, {100, 1000}, 1), row(32, 1, 4, 1)).message(),
              HasSubstr("16-byte"));
  EXPECT_THAT(family.Validate(task, row(32, 1, 4, 16)).message(), HasSubstr("is not one of"));
  EXPECT_THAT(
      family.Validate(task, {"col_scan", {{"threads_per_block", 128}, {"unroll", 1}}}).message(),
      HasSubstr("is not one of the task's: row_scan"));
  const KernelTask columns = ScanOf("cumsum", kF32, {2, 3, 5}, 1);  // 10 rows of 3
  EXPECT_THAT(
      family.Validate(columns, {"col_scan", {{"threads_per_block", 64}, {"unroll", 1}}}).message(),
      HasSubstr("leaves half the block idle"));
  EXPECT_THAT(
      family.Validate(columns, {"col_scan", {{"threads_per_block", 32}, {"unroll", 8}}}).message(),
      HasSubstr("exceeds the scanned length"));
}

// An even sample of each template's valid points compiles (the search may propose any).
TEST(ScanTest, ScheduleSpaceSampleCompiles) {
  ScanFamily family;
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const KernelTask& task :
       {ScanOf("cummin", kF32, {64, 4096}, 1), ScanOf("cumsum", kF16, {16, 512, 64}, 1),
        ScanOf("logcumsumexp", kF32, {2, 100000}, 1)}) {
    const std::vector<SchedulePoint> valid = ValidPoints(family, task);
    ASSERT_GE(valid.size(), 12u);
    for (const SchedulePoint& point : EvenSample(valid, 12)) {
      absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      kernels.push_back(*kernel);
      labels.push_back(Label(point));
    }
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/false, {"sm_90"});
}

}  // namespace
}  // namespace forge::codegen
