// gemm_library candidates (cuBLASLt, and cuBLASLt then a generated pointwise epilogue) through
// the real judge on the GPU, against float64 references computed here, and one of them timed; and
// the descriptions of cuBLASLt's algorithms that the runtime finds the measured one by.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/codegen/gemm_library/gemm_library.h"
#include "worker/gpu/device.h"
#include "worker/judge/judge.h"
#include "runtime/extension/cublaslt_matmul.h"
#include "worker/library/cublaslt_gemm.h"
#include "worker/timer/timer.h"

namespace forge {
namespace {

using codegen::GemmLibraryCandidate;
using codegen::LibraryEpilogue;
using codegen::SchedulePoint;
using codegen::testing::OptionalTensorArg;
using codegen::testing::StringArg;
using codegen::testing::TaskBuilder;
using codegen::testing::TensorArg;
using forge::v1::KernelTask;
using judge::HostTensor;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
constexpr auto kBF16 = forge::v1::DTYPE_BFLOAT16;

// Elementwise tail of a reference: (row-major output index, product value, inputs) -> output.
using Tail = std::function<double(int64_t, double, absl::Span<const std::vector<double>>)>;

// out[b, i, j] = tail(sum_k a[b, i, k] * b'[b, k, j]), in float64. b' is input 1 transposed when
// `weight` (linear's [n, k]), else input 1 as [batch, k, n].
judge::ReferenceFn ProductReference(int64_t batch, int64_t m, int64_t n, int64_t k, bool weight,
                                    Tail tail) {
  return [=](const KernelTask&, absl::Span<const HostTensor> inputs)
             -> absl::StatusOr<std::vector<std::vector<double>>> {
    std::vector<std::vector<double>> values;
    for (const HostTensor& input : inputs) values.push_back(input.ToDoubles());
    const std::vector<double>& a = values[0];
    const std::vector<double>& b = values[1];
    std::vector<double> out(batch * m * n);
    // Strides of b' = input 1 as [batch, k, n].
    const int64_t k_stride = weight ? 1 : n;
    const int64_t n_stride = weight ? k : 1;
    const int64_t batch_stride = weight ? 0 : k * n;
    for (int64_t p = 0; p < batch; ++p) {
      for (int64_t i = 0; i < m; ++i) {
        const double* left = &a[(p * m + i) * k];
        for (int64_t j = 0; j < n; ++j) {
          const double* right = &b[p * batch_stride + j * n_stride];
          double sum = 0;
          for (int64_t kk = 0; kk < k; ++kk) sum += left[kk] * right[kk * k_stride];
          const int64_t index = (p * m + i) * n + j;
          out[index] = tail(index, sum, values);
        }
      }
    }
    return std::vector<std::vector<double>>{out};
  };
}

double GeluTanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

// x[m, k] -> linear(x, w[n, k], bias[n]) -> `activation` (with `approximate` when given).
KernelTask LinearTask(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k,
                      const std::string& activation = "", const std::string& approximate = "") {
  TaskBuilder builder;
  builder.Input("x", dtype, {m, k}).Input("w", dtype, {n, k}).Input("bias", dtype, {n});
  builder.Node("linear", "linear", "",
               {TensorArg("input", "x"), TensorArg("weight", "w"), OptionalTensorArg("bias", "bias")},
               dtype, {m, n});
  if (activation.empty()) return builder.Output("linear").Build(forge::v1::KERNEL_FAMILY_GEMM);
  std::vector<forge::v1::Argument> arguments = {TensorArg("self", "linear")};
  if (!approximate.empty()) arguments.push_back(StringArg("approximate", approximate));
  builder.Node("act", activation, "", arguments, dtype, {m, n});
  return builder.Output("act").Build(forge::v1::KERNEL_FAMILY_GEMM);
}

class GemmLibraryGpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!gpu::DriverStatus().ok()) return;
    auto device = gpu::Device::Open(0);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = device->release();
    auto gemm = library::CublasLtGemm::Create(*device_);
    ASSERT_TRUE(gemm.ok()) << gemm.status();
    gemm_ = gemm->release();
  }

  void SetUp() override {
    FORGE_SKIP_WITHOUT_GPU();
    ASSERT_NE(device_, nullptr);
    ASSERT_TRUE(device_->MakeCurrent().ok());
  }

  // Judges the candidate of `task` at (`template_name`, algo) and expects it to pass.
  static std::unique_ptr<judge::JudgedCandidate> ExpectAccepted(
      const KernelTask& task, const std::string& template_name, const judge::ReferenceFn& reference,
      LibraryEpilogue expected_epilogue, int64_t algo = 0) {
    auto candidate = codegen::DescribeGemmLibrary(task, SchedulePoint{template_name, {{"algo", algo}}});
    EXPECT_TRUE(candidate.ok()) << candidate.status();
    if (!candidate.ok()) return nullptr;
    EXPECT_EQ(candidate->gemm.epilogue, expected_epilogue);
    std::string cubin;
    if (candidate->epilogue) {
      compile::CompileResult compiled = codegen::testing::Pool().Compile(
          codegen::testing::RequestFor(*candidate->epilogue, device_->properties().arch()));
      EXPECT_TRUE(compiled.ok()) << compiled.status << "\n" << compiled.log;
      cubin = compiled.cubin;
    }
    auto launch = library::LoadGemmLibraryCandidate(*device_, *gemm_, *candidate, cubin);
    EXPECT_TRUE(launch.ok()) << launch.status();
    if (!launch.ok()) return nullptr;
    auto judged = judge::Judge(*device_, task, *std::move(launch), reference);
    EXPECT_TRUE(judged.ok()) << judged.status();
    if (!judged.ok()) return nullptr;
    const judge::JudgeVerdict& verdict = (*judged)->verdict();
    EXPECT_TRUE(verdict.passed()) << template_name << " algo " << algo << ": " << verdict.detail;
    std::cout << template_name << " algo " << algo << " " << codegen::DescribeCall(candidate->gemm)
              << ": max abs error " << verdict.evidence.max_abs_error() << ", rel norm error "
              << verdict.evidence.rel_norm_error() << "\n";
    return *std::move(judged);
  }

  static inline gpu::Device* device_ = nullptr;
  static inline library::CublasLtGemm* gemm_ = nullptr;
};

Tail PlusBias(int64_t n, double (*activation)(double) = nullptr) {
  return [n, activation](int64_t index, double product, absl::Span<const std::vector<double>> in) {
    const double biased = product + in[2][index % n];
    return activation ? activation(biased) : biased;
  };
}

double Relu(double x) { return std::max(x, 0.0); }

TEST_F(GemmLibraryGpuTest, LinearFloat32IsAcceptedAndTimed) {
  const KernelTask task = LinearTask(kF32, 512, 768, 1024);
  auto judged = ExpectAccepted(task, "cublaslt", ProductReference(1, 512, 768, 1024, true, PlusBias(768)),
                               LibraryEpilogue::kBias);
  ASSERT_NE(judged, nullptr);
  ASSERT_TRUE(judged->verdict().passed());
  auto timer = timer::Timer::Create(*device_);
  ASSERT_TRUE(timer.ok()) << timer.status();
  timer::TimerOptions options;
  options.before_each_rep = [&](gpu::Stream& stream) { return judged->PoisonOutputs(stream); };
  auto timing = (*timer)->Time([&](gpu::Stream& stream) { return judged->Launch(stream); }, options);
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_GT(timing->summary.median, 0);
  std::cout << "linear float32 512x1024 @ 1024x768 + bias: median " << timing->summary.median
            << " us over " << timing->rep_us.size() << " reps\n";
  auto rechecked = judged->RecheckTimedOutputs();
  ASSERT_TRUE(rechecked.ok()) << rechecked.status();
  EXPECT_TRUE(rechecked->passed()) << rechecked->detail;
}

TEST_F(GemmLibraryGpuTest, LinearReluBfloat16) {
  ExpectAccepted(LinearTask(kBF16, 256, 384, 512, "relu"), "cublaslt",
                 ProductReference(1, 256, 384, 512, true, PlusBias(384, Relu)),
                 LibraryEpilogue::kReluBias);
}

TEST_F(GemmLibraryGpuTest, LinearGeluTanhBfloat16) {
  ExpectAccepted(LinearTask(kBF16, 256, 384, 512, "gelu", "tanh"), "cublaslt",
                 ProductReference(1, 256, 384, 512, true, PlusBias(384, GeluTanh)),
                 LibraryEpilogue::kGeluBias);
}

TEST_F(GemmLibraryGpuTest, LinearResidualFloat32ThroughThePointwiseEpilogueAtEveryAlgorithm) {
  constexpr int64_t kM = 4 * 64, kN = 192, kK = 256;
  const KernelTask task =
      TaskBuilder()
          .Input("x", kF32, {4, 64, kK})
          .Input("w", kF32, {kN, kK})
          .Input("bias", kF32, {kN})
          .Input("residual", kF32, {4, 64, kN})
          .Node("linear", "linear", "",
                {TensorArg("input", "x"), TensorArg("weight", "w"), OptionalTensorArg("bias", "bias")},
                kF32, {4, 64, kN})
          .Node("sum", "add", "Tensor", {TensorArg("self", "linear"), TensorArg("other", "residual")},
                kF32, {4, 64, kN})
          .Output("sum")
          .Build(forge::v1::KERNEL_FAMILY_GEMM);
  const judge::ReferenceFn reference = ProductReference(
      1, kM, kN, kK, true,
      [](int64_t index, double product, absl::Span<const std::vector<double>> in) {
        return product + in[2][index % kN] + in[3][index];
      });
  auto candidate = codegen::DescribeGemmLibrary(task, {"cublaslt_then_pointwise", {{"algo", 0}}});
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  auto count = gemm_->AlgorithmCount(candidate->gemm);
  ASSERT_TRUE(count.ok()) << count.status();
  ASSERT_GE(*count, 1);
  for (int algo = 0; algo < *count; ++algo) {
    ExpectAccepted(task, "cublaslt_then_pointwise", reference, LibraryEpilogue::kBias, algo);
  }
}

TEST_F(GemmLibraryGpuTest, BmmBfloat16) {
  const KernelTask task =
      TaskBuilder()
          .Input("a", kBF16, {8, 128, 64})
          .Input("b", kBF16, {8, 64, 96})
          .Node("bmm", "bmm", "", {TensorArg("self", "a"), TensorArg("mat2", "b")}, kBF16,
                {8, 128, 96})
          .Output("bmm")
          .Build(forge::v1::KERNEL_FAMILY_GEMM);
  ExpectAccepted(task, "cublaslt",
                 ProductReference(8, 128, 96, 64, false,
                                  [](int64_t, double product, auto) { return product; }),
                 LibraryEpilogue::kNone);
}

// A cuBLASLt handle for the test's own plans.
struct LtHandle {
  LtHandle() { created = {cublasLtCreate(&handle), "cublasLtCreate"}; }
  ~LtHandle() {
    if (created.ok()) cublasLtDestroy(handle);
  }
  cublasLtHandle_t handle = nullptr;
  forge_cublaslt::Status created;
};

TEST_F(GemmLibraryGpuTest, EachAlgorithmHasOneStableDescriptionThatFindsItsIndex) {
  constexpr int64_t kM = 256, kN = 384, kK = 512;
  const KernelTask task = LinearTask(kBF16, kM, kN, kK, "relu");
  auto call = codegen::DescribeGemmLibrary(task, {"cublaslt", {{"algo", 0}}});
  ASSERT_TRUE(call.ok()) << call.status();
  // The call as cublaslt_gemm.cc hands it to the shared header: x [m, k], the weight [n, k]
  // transposed, on operands aligned like fresh allocations (the heuristic reads only that).
  const forge_cublaslt::Matmul matmul{CUDA_R_16BF, 1, kM, kN, kK, {false, kK, 0}, {true, kK, 0},
                                      forge_cublaslt::Epilogue::kReluBias};
  void* const aligned = reinterpret_cast<void*>(uintptr_t{256});
  const forge_cublaslt::Operands operands{aligned, aligned, aligned, aligned};
  LtHandle handles[2];
  std::unique_ptr<forge_cublaslt::MatmulPlan> plans[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(handles[i].created.ok()) << handles[i].created.message();
    const forge_cublaslt::Status made =
        forge_cublaslt::MatmulPlan::Create(handles[i].handle, matmul, operands, &plans[i]);
    ASSERT_TRUE(made.ok()) << made.message();
  }
  ASSERT_GE(plans[0]->algorithm_count(), 1);
  ASSERT_EQ(plans[0]->algorithm_count(), plans[1]->algorithm_count());
  for (int algo = 0; algo < plans[0]->algorithm_count(); ++algo) {
    const std::string& description = plans[0]->algorithm_description(algo);
    std::cout << "algo " << algo << ": " << description << "\n";
    EXPECT_EQ(plans[1]->algorithm_description(algo), description) << "algo " << algo;
    EXPECT_EQ(plans[1]->FindAlgorithm(description, algo), algo);
    // No other result shares it: the description alone finds the index.
    EXPECT_EQ(plans[1]->FindAlgorithm(description, -1), algo) << description;
    call->gemm.algo = algo;
    auto recorded = gemm_->AlgorithmDescription(call->gemm);
    ASSERT_TRUE(recorded.ok()) << recorded.status();
    EXPECT_EQ(*recorded, description) << "the worker's description of algo " << algo;
  }
  EXPECT_EQ(plans[1]->FindAlgorithm("id -1 tile 0", 0), -1);
}

TEST_F(GemmLibraryGpuTest, OddSizesFloat32) {
  ExpectAccepted(LinearTask(kF32, 1000, 999, 257), "cublaslt",
                 ProductReference(1, 1000, 999, 257, true, PlusBias(999)), LibraryEpilogue::kBias);
}

}  // namespace
}  // namespace forge
