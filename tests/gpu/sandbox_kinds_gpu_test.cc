// Every kind of candidate through the real sandbox and forge-sandbox-child on a GPU: gemm_library
// calls through cuBLASLt (with a native epilogue, and with a generated epilogue kernel), an algo
// index past cuBLASLt's heuristic list, and the ATen fallback (the task's eager baseline) of a
// softmax task and of a linear+gelu task, and of an op this LibTorch lacks. Candidates are what the families generate for tasks the
// partitioner makes of small exported-style models, compiled as the worker daemon does (exactly
// when the kernel has a name). The GPU tests skip without a GPU; the first test checks the models,
// tasks and points on the CPU (partitioner, families, the production float64 reference), so that
// a mistake in them shows here, not first on the GPU machine.
// The child is $FORGE_SANDBOX_CHILD, else the one built here.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "aten/aten.h"
#include "compiler/codegen/aten_fallback/aten_fallback.h"
#include "compiler/codegen/gemm_library/gemm_library.h"
#include "compiler/graph/partition.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"
#include "worker/compile/compile_pool.h"
#include "worker/gpu/device.h"
#include "worker/judge/inputs.h"
#include "worker/library/cublaslt_gemm.h"
#include "worker/sandbox/sandbox.h"

namespace forge::sandbox {
namespace {

using ::testing::HasSubstr;

constexpr char kLinearSchema[] = "aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor";
constexpr char kGeluSchema[] = R"(aten::gelu(Tensor self, *, str approximate=\"none\") -> Tensor)";
constexpr char kSoftmaxSchema[] =
    "aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor";
constexpr char kAddmmSchema[] =
    "aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor";

// x[m, k] -> nn.Linear(k, n) in float32 -> F.gelu (erf form) when `gelu`, as forge.export writes
// it (weights are parameters; no blobs needed by the partitioner).
std::string LinearGraph(int64_t m, int64_t n, int64_t k, bool gelu) {
  std::string text = absl::Substitute(R"pb(
    values { name: "w" tensor { dtype: DTYPE_FLOAT32 shape: [ $1, $2 ] strides: [ $2, 1 ] } }
    values { name: "b" tensor { dtype: DTYPE_FLOAT32 shape: [ $1 ] strides: [ 1 ] } }
    values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [ $0, $2 ] strides: [ $2, 1 ] } }
    values { name: "linear" tensor { dtype: DTYPE_FLOAT32 shape: [ $0, $1 ] strides: [ $1, 1 ] } }
    inputs { kind: INPUT_KIND_PARAMETER value_name: "w" target: "fc.weight" }
    inputs { kind: INPUT_KIND_PARAMETER value_name: "b" target: "fc.bias" }
    inputs { kind: INPUT_KIND_USER_INPUT value_name: "x" target: "x" }
    nodes {
      name: "linear" op: "aten::linear" overload: "default" schema: "$3"
      arguments { name: "input" tensor: "x" }
      arguments { name: "weight" tensor: "w" }
      arguments { name: "bias" optional_tensor { value_name: "b" } }
      outputs: "linear"
    })pb",
                                      m, n, k, kLinearSchema);
  if (!gelu) return text + R"pb(outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "linear" })pb";
  return text + absl::Substitute(R"pb(
    values { name: "gelu" tensor { dtype: DTYPE_FLOAT32 shape: [ $0, $1 ] strides: [ $1, 1 ] } }
    nodes {
      name: "gelu" op: "aten::gelu" overload: "default" schema: "$2"
      arguments { name: "self" tensor: "linear" }
      outputs: "gelu"
    }
    outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "gelu" })pb",
                                 m, n, kGeluSchema);
}

// softmax(x, dim=-1) of float32 x[rows, columns], as torch.export records nn.Softmax.
std::string SoftmaxGraph(int64_t rows, int64_t columns) {
  return absl::Substitute(R"pb(
    values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [ $0, $1 ] strides: [ $1, 1 ] } }
    values { name: "y" tensor { dtype: DTYPE_FLOAT32 shape: [ $0, $1 ] strides: [ $1, 1 ] } }
    inputs { kind: INPUT_KIND_USER_INPUT value_name: "x" target: "x" }
    nodes {
      name: "softmax" op: "aten::_softmax" overload: "default" schema: "$2"
      arguments { name: "self" tensor: "x" }
      arguments { name: "dim" int_value: -1 }
      arguments { name: "half_to_float" bool_value: false }
      outputs: "y"
    }
    outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "y" })pb",
                          rows, columns, kSoftmaxSchema);
}

// torch.addmm(bias[128], x[64, 96], w[96, 128]) in float16: on the H200 cuBLASLt's heuristic
// offers 4 algorithms for it, fewer than the family's 8 algo values.
std::string AddmmHalfGraph() {
  return absl::Substitute(R"pb(
    values { name: "bias" tensor { dtype: DTYPE_FLOAT16 shape: [ 128 ] strides: [ 1 ] } }
    values { name: "x" tensor { dtype: DTYPE_FLOAT16 shape: [ 64, 96 ] strides: [ 96, 1 ] } }
    values { name: "w" tensor { dtype: DTYPE_FLOAT16 shape: [ 96, 128 ] strides: [ 128, 1 ] } }
    values { name: "y" tensor { dtype: DTYPE_FLOAT16 shape: [ 64, 128 ] strides: [ 128, 1 ] } }
    inputs { kind: INPUT_KIND_USER_INPUT value_name: "bias" target: "bias" }
    inputs { kind: INPUT_KIND_USER_INPUT value_name: "x" target: "x" }
    inputs { kind: INPUT_KIND_USER_INPUT value_name: "w" target: "w" }
    nodes {
      name: "addmm" op: "aten::addmm" overload: "default" schema: "$0"
      arguments { name: "self" tensor: "bias" }
      arguments { name: "mat1" tensor: "x" }
      arguments { name: "mat2" tensor: "w" }
      outputs: "y"
    }
    outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "y" })pb",
                          kAddmmSchema);
}

// The one task the partitioner makes of `graph_text`.
forge::v1::KernelTask OnlyTask(const std::string& graph_text) {
  forge::v1::Graph graph;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(graph_text, &graph)) << graph_text;
  absl::StatusOr<graph::PartitionResult> partition = graph::Partition(graph);
  EXPECT_TRUE(partition.ok()) << partition.status();
  if (!partition.ok()) return {};
  EXPECT_EQ(partition->tasks.size(), 1u);
  return partition->tasks.empty() ? forge::v1::KernelTask() : partition->tasks.front();
}

forge::v1::KernelTask LinearTask() { return OnlyTask(LinearGraph(256, 512, 384, false)); }
forge::v1::KernelTask LinearGeluTask() { return OnlyTask(LinearGraph(200, 256, 384, true)); }
forge::v1::KernelTask SoftmaxTask() { return OnlyTask(SoftmaxGraph(512, 1000)); }
forge::v1::KernelTask AddmmHalfTask() { return OnlyTask(AddmmHalfGraph()); }

codegen::SchedulePoint LibraryPoint(const char* template_name, int64_t algo) {
  return codegen::SchedulePoint{template_name, {{"algo", algo}}};
}

const codegen::SchedulePoint kAtenPoint{codegen::AtenFallbackFamily::kTemplateName, {}};

TEST(SandboxKindsTasksTest, TheModelsGiveTasksTheFamiliesAndTheReferenceAccept) {
  const codegen::GemmLibraryFamily gemm_library;
  const codegen::AtenFallbackFamily aten_fallback;
  const judge::ReferenceFn reference = aten::Float64Reference();
  struct Case {
    std::string name;
    forge::v1::KernelTask task;
    forge::v1::KernelFamily family;
    std::vector<codegen::SchedulePoint> library_points;
  };
  const std::vector<Case> cases = {
      {"linear", LinearTask(), forge::v1::KERNEL_FAMILY_GEMM,
       {LibraryPoint(codegen::GemmLibraryFamily::kCublasLtTemplate, 0)}},
      {"linear+gelu", LinearGeluTask(), forge::v1::KERNEL_FAMILY_GEMM,
       {LibraryPoint(codegen::GemmLibraryFamily::kCublasLtThenPointwiseTemplate, 0)}},
      {"softmax", SoftmaxTask(), forge::v1::KERNEL_FAMILY_REDUCTION, {}},
      {"addmm f16", AddmmHalfTask(), forge::v1::KERNEL_FAMILY_GEMM,
       {LibraryPoint(codegen::GemmLibraryFamily::kCublasLtTemplate, 0),
        LibraryPoint(codegen::GemmLibraryFamily::kCublasLtTemplate,
                     codegen::GemmLibraryFamily::kHeuristicAlgorithms - 1)}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.task.family(), c.family);
    for (const codegen::SchedulePoint& point : c.library_points) {
      absl::StatusOr<codegen::GeneratedKernel> kernel = gemm_library.Generate(c.task, point);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      EXPECT_EQ(kernel->template_name, point.template_name);
      // The daemon compiles exactly the kernels with a name: here the generated epilogue.
      EXPECT_EQ(kernel->kernel_name.empty(),
                point.template_name == codegen::GemmLibraryFamily::kCublasLtTemplate);
    }
    absl::StatusOr<codegen::GeneratedKernel> fallback = aten_fallback.Generate(c.task, kAtenPoint);
    ASSERT_TRUE(fallback.ok()) << fallback.status();
    EXPECT_TRUE(codegen::IsAtenFallback(*fallback));

    const std::vector<judge::InputDomain> domains = judge::InferInputDomains(c.task);
    std::vector<judge::HostTensor> inputs;
    for (int i = 0; i < c.task.inputs_size(); ++i) {
      absl::StatusOr<judge::HostTensor> input =
          judge::DrawInput(c.task.inputs(i), domains[i], /*draw=*/0, i, /*seed=*/7);
      ASSERT_TRUE(input.ok()) << input.status();
      inputs.push_back(*std::move(input));
    }
    absl::StatusOr<std::vector<std::vector<double>>> outputs = reference(c.task, inputs);
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    ASSERT_EQ(outputs->size(), 1u);
    EXPECT_EQ(static_cast<int64_t>(outputs->front().size()),
              judge::ElementCount(c.task.outputs(0)));
  }
}

std::string ChildPath() {
  const char* path = std::getenv("FORGE_SANDBOX_CHILD");
  return path != nullptr ? path : FORGE_SANDBOX_CHILD;
}

class SandboxKindsGpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!gpu::DriverStatus().ok()) return;
    SandboxOptions options;
    options.child_path = ChildPath();
    auto sandbox = Sandbox::Create(options);
    ASSERT_TRUE(sandbox.ok()) << sandbox.status();
    sandbox_ = sandbox->release();
    ASSERT_TRUE(sandbox_->stats().device_status.ok()) << sandbox_->stats().device_status;
    auto pool = compile::CompilePool::Create({.threads = 1});
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = pool->release();
  }

  static void TearDownTestSuite() {
    delete sandbox_;
    sandbox_ = nullptr;
    delete pool_;
    pool_ = nullptr;
  }

  void SetUp() override {
    FORGE_SKIP_WITHOUT_GPU();
    ASSERT_NE(sandbox_, nullptr);
    ASSERT_NE(pool_, nullptr);
    before_ = sandbox_->stats();
  }

  // No candidate of these tests may cost the child.
  void TearDown() override {
    if (sandbox_ == nullptr) return;
    const SandboxStats after = sandbox_->stats();
    EXPECT_EQ(after.child_pid, before_.child_pid);
    EXPECT_EQ(after.crashes, before_.crashes);
    EXPECT_EQ(after.timeouts, before_.timeouts);
  }

  // The candidate of `family` at `point` for `task`, as the daemon hands it over: the family's
  // kernel and, when the kernel has a name, its NVRTC compile for the child's GPU.
  static SandboxCandidate CandidateFor(const codegen::KernelFamily& family,
                                       const forge::v1::KernelTask& task,
                                       const codegen::SchedulePoint& point) {
    SandboxCandidate candidate;
    candidate.digest = absl::StrCat(family.name(), "-", point.template_name);
    for (const auto& [name, value] : point.parameters) {
      absl::StrAppend(&candidate.digest, "-", name, value);
    }
    candidate.task = task;
    absl::StatusOr<codegen::GeneratedKernel> kernel = family.Generate(task, point);
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    if (!kernel.ok()) return candidate;
    candidate.kernel = *std::move(kernel);
    if (!candidate.kernel.kernel_name.empty()) {
      compile::CompileRequest request;
      request.source = candidate.kernel.source;
      request.name_expressions = {candidate.kernel.kernel_name};
      request.arch = sandbox_->stats().device_arch;
      compile::CompileResult compiled = pool_->Compile(request);
      EXPECT_TRUE(compiled.ok()) << compiled.status << "\n" << compiled.log;
      candidate.cubin = compiled.cubin;
    }
    return candidate;
  }

  static SandboxCandidate GemmLibraryCandidate(const forge::v1::KernelTask& task,
                                               const char* template_name, int64_t algo) {
    return CandidateFor(codegen::GemmLibraryFamily(), task, LibraryPoint(template_name, algo));
  }

  static SandboxCandidate AtenFallbackCandidate(const forge::v1::KernelTask& task) {
    return CandidateFor(codegen::AtenFallbackFamily(), task, kAtenPoint);
  }

  static void ExpectJudgedAndPassed(const SandboxCandidate& candidate) {
    absl::StatusOr<SandboxOutcome> judged = sandbox_->Judge(candidate);
    ASSERT_TRUE(judged.ok()) << judged.status();
    EXPECT_TRUE(judged->passed()) << judged->failure->ShortDebugString();
    ASSERT_TRUE(judged->verdict.has_value());
    EXPECT_GE(judged->verdict->evidence.draws(), 3);
    EXPECT_FALSE(judged->timing.has_value());
  }

  // Times the candidate (judging it first where the child has not) and checks the timing is
  // sane and the timed runs' outputs passed the re-check.
  static void ExpectTimedAndPassed(const SandboxCandidate& candidate) {
    absl::StatusOr<SandboxOutcome> timed = sandbox_->Time(candidate);
    ASSERT_TRUE(timed.ok()) << timed.status();
    EXPECT_TRUE(timed->passed()) << timed->failure->ShortDebugString();
    ASSERT_TRUE(timed->verdict.has_value());
    EXPECT_TRUE(timed->verdict->passed());
    ASSERT_TRUE(timed->timing.has_value());
    const timer::Timing& timing = *timed->timing;
    EXPECT_GE(timing.rep_us.size(), 20u);
    EXPECT_GT(timing.summary.median, 0);
    EXPECT_GT(timing.summary.min, 0);
    if (timing.kernel_status.ok()) {
      EXPECT_GE(timing.kernels_per_rep, 1);
      ASSERT_TRUE(timing.kernel_summary.has_value());
      EXPECT_GT(timing.kernel_summary->median, 0);
    }
    std::cout << candidate.digest << " of " << candidate.task.group().nodes(0).op() << ": median "
              << timing.summary.median << " us over " << timing.rep_us.size() << " reps, "
              << timing.kernels_per_rep << " kernels per rep ("
              << (timing.kernel_status.ok() ? "CUPTI" : timing.kernel_status.ToString()) << ")\n";
  }

  static inline Sandbox* sandbox_ = nullptr;
  static inline compile::CompilePool* pool_ = nullptr;
  SandboxStats before_;
};

TEST_F(SandboxKindsGpuTest, CublasLtCandidatePassesTheJudgeAndIsTimed) {
  const SandboxCandidate candidate =
      GemmLibraryCandidate(LinearTask(), codegen::GemmLibraryFamily::kCublasLtTemplate, 0);
  EXPECT_TRUE(candidate.cubin.empty());
  ExpectJudgedAndPassed(candidate);
  ExpectTimedAndPassed(candidate);
}

TEST_F(SandboxKindsGpuTest, CublasLtThenPointwiseCandidatePassesWithItsEpilogueCubin) {
  const SandboxCandidate candidate = GemmLibraryCandidate(
      LinearGeluTask(), codegen::GemmLibraryFamily::kCublasLtThenPointwiseTemplate, 0);
  EXPECT_FALSE(candidate.cubin.empty());
  ExpectTimedAndPassed(candidate);  // the child judges it first
}

TEST_F(SandboxKindsGpuTest, CublasLtThenPointwiseWithoutItsCubinIsAnError) {
  SandboxCandidate candidate = GemmLibraryCandidate(
      LinearGeluTask(), codegen::GemmLibraryFamily::kCublasLtThenPointwiseTemplate, 0);
  candidate.cubin.clear();
  absl::StatusOr<SandboxOutcome> judged = sandbox_->Judge(candidate);
  EXPECT_TRUE(absl::IsInvalidArgument(judged.status())) << judged.status();
  EXPECT_THAT(judged.status().message(), HasSubstr("without the cubin of its epilogue kernel"));
}

TEST_F(SandboxKindsGpuTest, AlgoPastCublasLtsHeuristicListIsAnUnsupportedFailureNotACrash) {
  const forge::v1::KernelTask task = AddmmHalfTask();
  // How many algorithms cuBLASLt offers for the call, asked in this process on the same GPU.
  auto device = gpu::Device::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  auto gemm = library::CublasLtGemm::Create(**device);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  auto library = codegen::DescribeGemmLibrary(
      task, LibraryPoint(codegen::GemmLibraryFamily::kCublasLtTemplate, 0));
  ASSERT_TRUE(library.ok()) << library.status();
  absl::StatusOr<int> algorithms = (*gemm)->AlgorithmCount(library->gemm);
  ASSERT_TRUE(algorithms.ok()) << algorithms.status();
  if (*algorithms >= codegen::GemmLibraryFamily::kHeuristicAlgorithms) {
    GTEST_SKIP() << "cuBLASLt offers all " << *algorithms << " algorithms for "
                 << codegen::DescribeCall(library->gemm) << " on this GPU";
  }

  const SandboxCandidate unsupported =
      GemmLibraryCandidate(task, codegen::GemmLibraryFamily::kCublasLtTemplate, *algorithms);
  absl::StatusOr<SandboxOutcome> judged = sandbox_->Judge(unsupported);
  absl::StatusOr<SandboxOutcome> timed = sandbox_->Time(unsupported);
  for (const absl::StatusOr<SandboxOutcome>* outcome : {&judged, &timed}) {
    ASSERT_TRUE(outcome->ok()) << outcome->status();
    ASSERT_TRUE((*outcome)->failure.has_value());
    const forge::v1::Failure& failure = *(*outcome)->failure;
    std::cout << "unsupported algo: " << failure.ShortDebugString() << "\n";
    EXPECT_EQ(failure.reason(), forge::v1::FAILURE_REASON_UNSUPPORTED);
    EXPECT_EQ(failure.stage(), forge::v1::FAILURE_STAGE_JUDGE);
    EXPECT_EQ(failure.candidate_digest(), unsupported.digest);
    EXPECT_THAT(failure.detail(), HasSubstr(absl::StrCat("cuBLASLt offers ", *algorithms,
                                                         " algorithms")));
    EXPECT_THAT(failure.detail(), HasSubstr(absl::StrCat("algo ", *algorithms, " is past the end")));
    EXPECT_FALSE((*outcome)->verdict.has_value());
    EXPECT_FALSE((*outcome)->timing.has_value());
  }
  // The same call at the heuristic's first choice still runs in the same child.
  const SandboxCandidate supported =
      GemmLibraryCandidate(task, codegen::GemmLibraryFamily::kCublasLtTemplate, 0);
  ExpectJudgedAndPassed(supported);
}

TEST_F(SandboxKindsGpuTest, AtenFallbackOfSoftmaxPassesAndIsTimed) {
  const SandboxCandidate candidate = AtenFallbackCandidate(SoftmaxTask());
  EXPECT_TRUE(candidate.cubin.empty());
  ExpectTimedAndPassed(candidate);  // the child judges it first
}

TEST_F(SandboxKindsGpuTest, AtenFallbackOfLinearGeluPassesTheJudgeAndIsTimed) {
  const SandboxCandidate candidate = AtenFallbackCandidate(LinearGeluTask());
  ExpectJudgedAndPassed(candidate);
  ExpectTimedAndPassed(candidate);  // times the judged candidate without judging again
  // And once more: the timed launch reruns the same resident inputs.
  ExpectTimedAndPassed(candidate);
}

TEST_F(SandboxKindsGpuTest, AtenFallbackOfAnOpThisLibTorchLacksIsAnUnsupportedFailure) {
  forge::v1::KernelTask task = SoftmaxTask();
  task.mutable_group()->mutable_nodes(0)->set_op("aten::forge_no_such_op");
  const SandboxCandidate candidate = AtenFallbackCandidate(task);
  absl::StatusOr<SandboxOutcome> judged = sandbox_->Judge(candidate);
  ASSERT_TRUE(judged.ok()) << judged.status();
  ASSERT_TRUE(judged->failure.has_value());
  std::cout << "missing op: " << judged->failure->ShortDebugString() << "\n";
  EXPECT_EQ(judged->failure->reason(), forge::v1::FAILURE_REASON_UNSUPPORTED);
  EXPECT_EQ(judged->failure->stage(), forge::v1::FAILURE_STAGE_JUDGE);
  EXPECT_THAT(judged->failure->detail(),
              HasSubstr("the dispatcher has no operator aten::forge_no_such_op"));
}

}  // namespace
}  // namespace forge::sandbox
