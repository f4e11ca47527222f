#include "worker/emulated/emulated_backend.h"

#include <memory>
#include <string>

#include "common/arch/arch.h"
#include "compiler/codegen/aten_fallback/aten_fallback.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/reduction/reduction.h"
#include "compiler/cost/learned/testing/synthetic_dataset.h"
#include "compiler/cost/plan_prediction.h"
#include "gtest/gtest.h"

namespace forge::emulated {
namespace {

constexpr int64_t kElements = 1 << 24;

// float32[kElements] -> relu -> float32[kElements], as the partitioner describes it.
forge::v1::KernelTask ReluTask() {
  forge::v1::KernelTask task;
  task.set_family(forge::v1::KERNEL_FAMILY_POINTWISE);
  for (auto* spec : {task.add_inputs(), task.add_outputs()}) {
    spec->set_dtype(forge::v1::DTYPE_FLOAT32);
    spec->add_shape(kElements);
    spec->add_strides(1);
  }
  forge::v1::Node* node = task.mutable_group()->add_nodes();
  node->set_name("relu");
  node->set_op("aten::relu");
  task.set_flops(kElements);
  task.set_min_bytes(2 * 4 * kElements);
  return task;
}

// A hand-written kernel with the generators' ABI; `guard` goes before it (e.g. an #error). Its
// cost hints are the pointwise family's for the same layout: a float4 per thread.
codegen::GeneratedKernel ReluKernel(const std::string& guard = "") {
  codegen::GeneratedKernel kernel;
  kernel.kernel_name = "relu_kernel";
  kernel.template_name = "pointwise_flat";
  kernel.parameters = {{"elements_per_thread", 1}, {"threads_per_block", 256}, {"vector_width", 4}};
  kernel.hints.vector_width = 4;
  kernel.hints.unrolled_elements = 4;
  kernel.hints.bytes_in_flight_per_thread = 4 * sizeof(float);
  kernel.source = guard + R"(
extern "C" __global__ void relu_kernel(const float4* in, float4* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float4 v = in[i];
  out[i] = make_float4(fmaxf(v.x, 0.f), fmaxf(v.y, 0.f), fmaxf(v.z, 0.f), fmaxf(v.w, 0.f));
}
)";
  kernel.launch.grid = {kElements / 4 / 256, 1, 1};
  kernel.launch.block = {256, 1, 1};
  return kernel;
}

class EmulatedBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<compile::CompilePool>> pool =
        compile::CompilePool::Create({.threads = 2});
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *std::move(pool);
    backend_ = std::make_unique<EmulatedBackend>(pool_.get());
  }

  std::unique_ptr<compile::CompilePool> pool_;
  std::unique_ptr<EmulatedBackend> backend_;
};

TEST_F(EmulatedBackendTest, GeneratedKernelGetsAPredictedMeasurement) {
  absl::StatusOr<EmulatedResult> outcome =
      backend_->Predict(ReluTask(), ReluKernel(), "H200", "digest-1");
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_TRUE(outcome->result.has_measurement()) << outcome->explanation;
  const forge::v1::Measurement& m = outcome->result.measurement();
  EXPECT_EQ(m.kind(), forge::v1::MEASUREMENT_KIND_PREDICTED);
  EXPECT_EQ(m.candidate_digest(), "digest-1");
  EXPECT_EQ(m.device_name(), "H200 (predicted)");
  EXPECT_GT(m.median_us(), m.roofline_floor_us());
  EXPECT_GT(m.percent_of_floor(), 0);
  EXPECT_LE(m.percent_of_floor(), 100);
  EXPECT_EQ(m.reps(), 0);
  EXPECT_TRUE(m.metrics().resources_available());
  EXPECT_FALSE(m.metrics().counters_available());
  EXPECT_GT(m.metrics().registers_per_thread(), 0);
  EXPECT_EQ(m.metrics().spill_store_bytes(), 0);
  EXPECT_NE(outcome->explanation.find("memory-bound"), std::string::npos) << outcome->explanation;
}

// The source refuses to compile for anything but sm_80: it compiles for the A100 and fails, at
// the compile stage, for the H200 (sm_90).
TEST_F(EmulatedBackendTest, CompilesForTheTargetGpusArchitecture) {
  const codegen::GeneratedKernel kernel = ReluKernel(
      "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 800\n#error not sm_80\n#endif\n");
  absl::StatusOr<EmulatedResult> a100 = backend_->Predict(ReluTask(), kernel, "A100", "d");
  ASSERT_TRUE(a100.ok()) << a100.status();
  EXPECT_TRUE(a100->result.has_measurement()) << a100->explanation;

  absl::StatusOr<EmulatedResult> h200 = backend_->Predict(ReluTask(), kernel, "H200", "d");
  ASSERT_TRUE(h200.ok()) << h200.status();
  ASSERT_TRUE(h200->result.has_failure());
  EXPECT_EQ(h200->result.failure().stage(), forge::v1::FAILURE_STAGE_COMPILE);
  EXPECT_EQ(h200->result.failure().reason(), forge::v1::FAILURE_REASON_COMPILE_ERROR);
  EXPECT_NE(h200->result.failure().log().find("not sm_80"), std::string::npos);
}

TEST_F(EmulatedBackendTest, KernelThatFitsNoSmFailsAtCompileStage) {
  codegen::GeneratedKernel kernel = ReluKernel();
  kernel.launch.dynamic_shared_bytes = 300 * 1024;
  absl::StatusOr<EmulatedResult> outcome = backend_->Predict(ReluTask(), kernel, "B200", "d");
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_TRUE(outcome->result.has_failure());
  EXPECT_EQ(outcome->result.failure().stage(), forge::v1::FAILURE_STAGE_COMPILE);
  EXPECT_EQ(outcome->result.failure().reason(), forge::v1::FAILURE_REASON_RESOURCE_LIMIT);
}

TEST_F(EmulatedBackendTest, AtenFallbackIsPredictedFromTheRoofline) {
  const forge::v1::KernelTask task = ReluTask();
  // What the ATen fallback family generates: no source, the group runs node by node (one node:
  // one launch).
  codegen::GeneratedKernel kernel;
  kernel.template_name = codegen::AtenFallbackFamily::kTemplateName;
  kernel.hints.executor = codegen::Executor::kAten;
  kernel.hints.kernel_launches = 1;
  ASSERT_TRUE(codegen::IsAtenFallback(kernel));

  absl::StatusOr<EmulatedResult> outcome = backend_->Predict(task, kernel, "rtx4090", "d");
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_TRUE(outcome->result.has_measurement());
  const forge::v1::Measurement& m = outcome->result.measurement();
  EXPECT_EQ(m.kind(), forge::v1::MEASUREMENT_KIND_PREDICTED);
  EXPECT_FALSE(m.metrics().resources_available());
  EXPECT_FALSE(m.metrics().counters_available());
  EXPECT_GT(m.median_us(), m.roofline_floor_us());
  EXPECT_EQ(pool_->stats().requests, 0);  // nothing to compile
}

TEST_F(EmulatedBackendTest, HostLaunchedCandidateIsPredictedWithoutNvcc) {
  const forge::v1::KernelTask task = ReluTask();
  // A host-launched candidate: a whole translation unit for nvcc, which the emulated backend must
  // not build (this one would not compile at all).
  codegen::GeneratedKernel kernel;
  kernel.template_name = "some_cutlass_configuration";
  kernel.source = "not CUDA: compiling this would fail";
  kernel.hints.executor = codegen::Executor::kHostLaunched;
  kernel.compile_output = codegen::CompileOutput::kNvccSharedObject;
  kernel.runtime_args = {1, 2, 3};

  absl::StatusOr<EmulatedResult> outcome = backend_->Predict(task, kernel, "H200", "d");
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_TRUE(outcome->result.has_measurement()) << outcome->result.DebugString();
  const forge::v1::Measurement& m = outcome->result.measurement();
  EXPECT_EQ(m.kind(), forge::v1::MEASUREMENT_KIND_PREDICTED);
  EXPECT_FALSE(m.metrics().resources_available());
  EXPECT_GT(m.median_us(), 0);
  EXPECT_EQ(pool_->stats().requests, 0);
}

// With a learned model: the analytic prediction without a usable one, the learned one (and its
// version in the explanation) with one; the synthetic rule makes scalar launches slower, the
// relu kernel here is a vector one, so only the source of the number is checked.
TEST_F(EmulatedBackendTest, LearnedModelRefinesThePredictionWhenItHasOne) {
  cost::CostPredictor learned;
  const EmulatedBackend with_learned(pool_.get(), &learned);
  const absl::StatusOr<EmulatedResult> analytic =
      with_learned.Predict(ReluTask(), ReluKernel(), "H200", "d");
  ASSERT_TRUE(analytic.ok()) << analytic.status();
  const double analytic_us = analytic->result.measurement().median_us();
  EXPECT_EQ(analytic_us, backend_->Predict(ReluTask(), ReluKernel(), "H200", "d")
                             ->result.measurement()
                             .median_us());
  EXPECT_EQ(analytic->explanation.find("learned"), std::string::npos);
  EXPECT_EQ(cost::PredictedBy(analytic->prediction), "analytic");
  EXPECT_EQ(analytic->prediction.source, cost::PredictionSource::kAnalytic);

  const absl::StatusOr<std::vector<cost::testing::SyntheticCandidate>> candidates =
      cost::testing::SyntheticPointwise(*FindGpu("H200"), 8);
  ASSERT_TRUE(candidates.ok()) << candidates.status();
  learned.SetModel(cost::VersionedModel{
      .version = 4,
      .model = *cost::LearnedModel::Train(cost::testing::RowsOf(*candidates), {.rounds = 50})});
  const absl::StatusOr<EmulatedResult> refined =
      with_learned.Predict(ReluTask(), ReluKernel(), "H200", "d");
  ASSERT_TRUE(refined.ok()) << refined.status();
  EXPECT_EQ(refined->result.measurement().kind(), forge::v1::MEASUREMENT_KIND_PREDICTED);
  EXPECT_NE(refined->explanation.find("learned model v4"), std::string::npos)
      << refined->explanation;
  EXPECT_GT(refined->result.measurement().median_us(), 0);
  EXPECT_EQ(cost::PredictedBy(refined->prediction), "learned v4");
  EXPECT_EQ(refined->prediction.model_version, 4);
  EXPECT_EQ(refined->prediction.analytic_seconds * 1e6, analytic_us);
}

TEST_F(EmulatedBackendTest, UnknownGpuIsAnError) {
  EXPECT_TRUE(absl::IsNotFound(
      backend_->Predict(ReluTask(), ReluKernel(), "Voodoo 2", "d").status()));
}

}  // namespace
// A row is what the kernel reduces: layer norm over (64, 256, 256) has rows of 4 M elements, not
// of the last dim's 256. Sixteen such rows (16 MB each) do not fit in L2, so the streaming point's
// second pass over them is DRAM traffic.
TEST(EstimateKernelWorkTest, LayerNormOverTrailingDimsRereadsItsLongRows) {
  using codegen::testing::FloatArg;
  using codegen::testing::IntsArg;
  using codegen::testing::OptionalTensorArg;
  using codegen::testing::TensorArg;
  const std::vector<int64_t> shape = {16, 64, 256, 256};
  const std::vector<int64_t> normalized = {64, 256, 256};
  forge::v1::KernelTask task =
      codegen::testing::TaskBuilder()
          .Input("x", forge::v1::DTYPE_FLOAT32, shape)
          .Input("w", forge::v1::DTYPE_FLOAT32, normalized)
          .Input("b", forge::v1::DTYPE_FLOAT32, normalized)
          .Node("layer_norm", "layer_norm", "default",
                {TensorArg("input", "x"), IntsArg("normalized_shape", normalized),
                 OptionalTensorArg("weight", "w"), OptionalTensorArg("bias", "b"),
                 FloatArg("eps", 1e-5)},
                forge::v1::DTYPE_FLOAT32, shape)
          .Output("layer_norm")
          .Build(forge::v1::KERNEL_FAMILY_REDUCTION);
  const double row_input_bytes = 16.0 * 64 * 256 * 256 * 4;
  task.set_min_bytes(static_cast<int64_t>(2 * row_input_bytes + 2 * 64 * 256 * 256 * 4));
  const codegen::SchedulePoint point = {"row_reduce",
                                        {{"threads_per_row", 512},
                                         {"rows_per_block", 1},
                                         {"vector_width", 4},
                                         {"cache_row", 0},
                                         {"cluster_blocks", 8},
                                         {"welford", 1},
                                         {"max_registers", 0}}};
  absl::StatusOr<codegen::GeneratedKernel> kernel =
      codegen::ReductionFamily().Generate(task, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  // The plan's row is the flattened one: 4 M float32 elements of x (its only row-sized input).
  EXPECT_EQ(kernel->hints.row_bytes, 64.0 * 256 * 256 * 4);
  EXPECT_EQ(kernel->hints.row_rereads, 1);
  absl::StatusOr<GpuArch> h200 = FindGpu("H200");
  ASSERT_TRUE(h200.ok()) << h200.status();
  const cost::KernelWork work = cost::EstimateKernelWork(
      *h200, task, *kernel, {.registers_per_thread = 40}, {.blocks_per_sm = 1});
  // Welford: one statistics pass, then the pass that writes the output reads the row again.
  EXPECT_GT(work.bytes_moved, static_cast<double>(task.min_bytes()) + 0.9 * row_input_bytes);
}

}  // namespace forge::emulated
