// Feature extraction: one named column per figure, ptxas' figures only when known, the hints and
// the analytic prediction in the row, clear errors for incomplete candidates.
#include "compiler/cost/learned/features.h"

#include <cmath>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::cost {
namespace {

using ::testing::HasSubstr;

forge::v1::KernelTask Task() {
  forge::v1::KernelTask task;
  task.set_digest("t");
  task.set_family(forge::v1::KERNEL_FAMILY_REDUCTION);
  forge::v1::TensorSpec* input = task.add_inputs();
  input->set_dtype(forge::v1::DTYPE_BFLOAT16);
  input->add_shape(4096);
  input->add_shape(4096);
  *task.add_outputs() = *input;
  task.set_flops(4096 * 4096 * 8);
  task.set_min_bytes(2 * 4096 * 4096 * 2);
  return task;
}

codegen::LaunchPlan Plan() {
  codegen::LaunchPlan plan;
  plan.launch.grid = {2048, 1, 1};
  plan.launch.block = {256, 1, 1};
  plan.hints.vector_width = 8;
  plan.hints.unrolled_elements = 16;
  plan.hints.row_rereads = 1;
  plan.hints.row_bytes = 8192;
  plan.hints.row_input_bytes = 4096.0 * 8192;
  plan.hints.rows_per_block = 2;
  return plan;
}

float Column(const std::vector<float>& row, const std::string& name) {
  const std::vector<std::string>& names = FeatureNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return row[i];
  }
  ADD_FAILURE() << "no feature " << name;
  return 0;
}

class FeaturesTest : public ::testing::Test {
 protected:
  GpuArch gpu_ = *FindGpu("H200");
  forge::v1::KernelTask task_ = Task();
  codegen::LaunchPlan plan_ = Plan();
  CandidateDescription Candidate() {
    return {.gpu = &gpu_, .task = &task_, .plan = &plan_, .analytic_seconds = 100e-6};
  }
};

TEST_F(FeaturesTest, NamesAreUniqueAndTheRowHasOneValueEach) {
  const std::vector<std::string>& names = FeatureNames();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  const absl::StatusOr<std::vector<float>> row = ExtractFeatures(Candidate());
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(row->size(), names.size());
  EXPECT_EQ(FeatureSchemaDigest().size(), 16u);
}

TEST_F(FeaturesTest, ArchTaskHintsAndAnalyticPredictionAreColumns) {
  const std::vector<float> row = *ExtractFeatures(Candidate());
  EXPECT_EQ(Column(row, "gpu_sm_count"), gpu_.sm_count);
  EXPECT_EQ(Column(row, "task_family"), forge::v1::KERNEL_FAMILY_REDUCTION);
  EXPECT_EQ(Column(row, "task_largest_dtype_bytes"), 2);
  EXPECT_EQ(Column(row, "hint_vector_width"), 8);
  EXPECT_EQ(Column(row, "hint_unrolled_elements"), 16);
  EXPECT_EQ(Column(row, "hint_row_rereads"), 1);
  EXPECT_EQ(Column(row, "launch_threads_per_block"), 256);
  EXPECT_EQ(Column(row, "launch_log2_blocks"), 11);
  EXPECT_FLOAT_EQ(Column(row, "analytic_log2_us"), std::log2(100.0f));
  // 2 * 4096 * 4096 * 2 bytes at the table's bandwidth.
  const double floor_us = 2.0 * 4096 * 4096 * 2 / gpu_.dram_bytes_per_second * 1e6;
  EXPECT_NEAR(Column(row, "analytic_over_floor"), 100 / floor_us, 1e-3);
}

TEST_F(FeaturesTest, PtxasFiguresAreMissingUnlessKnown) {
  std::vector<float> row = *ExtractFeatures(Candidate());
  EXPECT_TRUE(std::isnan(Column(row, "ptxas_registers")));
  EXPECT_TRUE(std::isnan(Column(row, "ptxas_spill_bytes_per_thread")));
  // Occupancy is still known: the block alone limits it (8 blocks of 256 threads per SM).
  EXPECT_EQ(Column(row, "occupancy_blocks_per_sm"), 8);

  CandidateDescription with_resources = Candidate();
  with_resources.resources =
      KernelResources{.registers_per_thread = 128, .spill_store_bytes = 8, .spill_load_bytes = 8};
  row = *ExtractFeatures(with_resources);
  EXPECT_EQ(Column(row, "ptxas_registers"), 128);
  EXPECT_EQ(Column(row, "ptxas_spill_bytes_per_thread"), 16);
  // 128 registers x 256 threads: 2 blocks per SM of 64 Ki registers.
  EXPECT_EQ(Column(row, "occupancy_blocks_per_sm"), 2);
  EXPECT_EQ(Column(row, "occupancy_limiter"), static_cast<float>(OccupancyLimiter::kRegisters));
  EXPECT_GT(Column(row, "bytes_log2_spilled"), 0);
}

TEST_F(FeaturesTest, RowRereadsMissL2WhenTheResidentRowsExceedIt) {
  // 132 SMs x 8 blocks x 2 rows x 8 KiB = 16.5 MiB: fits the H200's 60 MiB L2.
  std::vector<float> row = *ExtractFeatures(Candidate());
  EXPECT_EQ(Column(row, "bytes_reread_l2_miss_fraction"), 0);
  plan_.hints.row_bytes = 1 << 20;
  row = *ExtractFeatures(Candidate());
  EXPECT_GT(Column(row, "bytes_reread_l2_miss_fraction"), 0.9);
}

TEST_F(FeaturesTest, GemmTilesGiveWaves) {
  plan_.hints.executor = codegen::Executor::kHostLaunched;
  plan_.hints.gemm_math = codegen::GemmMath::kTensorCore16Bit;
  plan_.hints.gemm_tile_m = 128;
  plan_.hints.gemm_tile_n = 256;
  plan_.hints.gemm_ctas = 198;
  const std::vector<float> row = *ExtractFeatures(Candidate());
  EXPECT_FLOAT_EQ(Column(row, "waves"), 1.5f);
  EXPECT_FLOAT_EQ(Column(row, "wave_efficiency"), 0.75f);
  EXPECT_EQ(Column(row, "hint_gemm_tile_n"), 256);
}

TEST_F(FeaturesTest, IncompleteCandidatesAreErrors) {
  CandidateDescription candidate = Candidate();
  candidate.analytic_seconds = 0;
  EXPECT_THAT(ExtractFeatures(candidate).status().message(), HasSubstr("analytic prediction"));
  candidate = Candidate();
  candidate.plan = nullptr;
  EXPECT_THAT(ExtractFeatures(candidate).status().message(), HasSubstr("GPU, task and plan"));
}

}  // namespace
}  // namespace forge::cost
