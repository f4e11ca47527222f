#include "compiler/search/candidate.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/codegen/family.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::search {
namespace {

using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::SoftmaxTask;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::v1::Candidate;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;

KernelTask ReluTask() {
  return TaskBuilder()
      .Input("x", kF32, {64, 1024})
      .Node("relu", "relu", "default", {TensorArg("self", "x")}, kF32, {64, 1024})
      .Output("relu")
      .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
}

const codegen::KernelFamily& Pointwise() {
  return *codegen::FindFamily(forge::v1::KERNEL_FAMILY_POINTWISE);
}

codegen::SchedulePoint PointwisePoint(int64_t threads, int64_t elements, int64_t width) {
  return {"pointwise_flat",
          {{"threads_per_block", threads}, {"elements_per_thread", elements},
           {"vector_width", width}}};
}

Candidate FixedCandidate() {
  Candidate candidate;
  candidate.set_task_digest(std::string(64, 'a'));
  candidate.set_family(forge::v1::KERNEL_FAMILY_POINTWISE);
  candidate.set_template_name("pointwise_flat");
  (*candidate.mutable_parameters())["vector_width"] = 4;
  (*candidate.mutable_parameters())["threads_per_block"] = 256;
  candidate.set_generator_version("pointwise-1");
  candidate.set_target_arch("sm_90");
  return candidate;
}

TEST(CandidateTest, MakeCandidateCarriesThePointAndItsDigest) {
  const KernelTask task = ReluTask();
  const codegen::SchedulePoint point = PointwisePoint(256, 2, 4);
  absl::StatusOr<Candidate> candidate = MakeCandidate(task, Pointwise(), point, "sm_90");
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  EXPECT_EQ(candidate->task_digest(), task.digest());
  EXPECT_EQ(candidate->family(), forge::v1::KERNEL_FAMILY_POINTWISE);
  EXPECT_EQ(candidate->template_name(), "pointwise_flat");
  EXPECT_EQ(candidate->parameters().at("elements_per_thread"), 2);
  EXPECT_EQ(candidate->generator_version(), Pointwise().generator_version());
  EXPECT_EQ(candidate->target_arch(), "sm_90");
  EXPECT_EQ(candidate->digest().size(), 64u);
  EXPECT_EQ(candidate->digest(), CandidateDigest(*candidate));
  EXPECT_EQ(PointOf(*candidate).parameters, point.parameters);
  EXPECT_EQ(PointOf(*candidate).template_name, point.template_name);
}

// The digest names a candidate on every coordinator and in the results cache: its encoding must
// not drift. The value below was computed apart from this code, in Python, from the encoding
// candidate.cc documents: SHA-256 of u64le(len) + bytes for "forge.candidate.v1", the task
// digest, u64le(family), the template, u64le(parameter count), per parameter in name order its
// name and u64le(value), then the generator version and the arch.
TEST(CandidateTest, DigestIsStable) {
  EXPECT_EQ(CandidateDigest(FixedCandidate()),
            "36c40ac48cd5d877b5d9ce9aeb9fc319b93042825ccf249522dfabcdf89f2cf8");
}

TEST(CandidateTest, DigestIgnoresMapOrderAndTheDigestField) {
  Candidate reordered = FixedCandidate();
  reordered.mutable_parameters()->clear();
  (*reordered.mutable_parameters())["threads_per_block"] = 256;
  (*reordered.mutable_parameters())["vector_width"] = 4;
  reordered.set_digest("anything");
  EXPECT_EQ(CandidateDigest(reordered), CandidateDigest(FixedCandidate()));
}

TEST(CandidateTest, EveryFieldChangesTheDigest) {
  std::vector<Candidate> variants(9, FixedCandidate());
  variants[1].set_task_digest(std::string(64, 'b'));
  variants[2].set_family(forge::v1::KERNEL_FAMILY_REDUCTION);
  variants[3].set_template_name("pointwise_flat2");
  (*variants[4].mutable_parameters())["vector_width"] = 2;
  variants[5].mutable_parameters()->erase("vector_width");
  (*variants[5].mutable_parameters())["vector_widtH"] = 4;
  variants[6].set_generator_version("pointwise-2");
  variants[7].set_target_arch("sm_80");
  (*variants[8].mutable_parameters())["elements_per_thread"] = 1;
  absl::flat_hash_set<std::string> digests;
  for (const Candidate& variant : variants) digests.insert(CandidateDigest(variant));
  EXPECT_EQ(digests.size(), variants.size());
}

// Length prefixes keep field boundaries: moving characters from one string field to the next
// gives another digest.
TEST(CandidateTest, DigestKeepsFieldBoundaries) {
  Candidate a = FixedCandidate();
  a.set_generator_version("pointwise-1");
  a.set_target_arch("sm_90");
  Candidate b = a;
  b.set_generator_version("pointwise-1sm_");
  b.set_target_arch("90");
  EXPECT_NE(CandidateDigest(a), CandidateDigest(b));
  Candidate c = a;
  c.mutable_parameters()->clear();
  (*c.mutable_parameters())["ab"] = 1;
  Candidate d = c;
  d.mutable_parameters()->clear();
  (*d.mutable_parameters())["a"] = 1;
  d.set_generator_version("bpointwise-1");
  EXPECT_NE(CandidateDigest(c), CandidateDigest(d));
}

TEST(CandidateTest, MakeCandidateRejectsWhatValidateRejects) {
  // 8 float32 lanes exceed a 16-byte vector access.
  absl::StatusOr<Candidate> candidate =
      MakeCandidate(ReluTask(), Pointwise(), PointwisePoint(1024, 8, 8), "sm_90");
  EXPECT_EQ(candidate.status().code(), absl::StatusCode::kInvalidArgument);
  candidate = MakeCandidate(ReluTask(), Pointwise(), PointwisePoint(256, 3, 1), "sm_90");
  EXPECT_EQ(candidate.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(candidate.status().message(), HasSubstr("elements_per_thread"));
  // The pointwise family does not apply to a softmax.
  candidate =
      MakeCandidate(SoftmaxTask(kF32, 256, 2048), Pointwise(), PointwisePoint(256, 1, 1), "sm_90");
  EXPECT_EQ(candidate.status().code(), absl::StatusCode::kUnimplemented);
}

// A point the target cannot run never becomes a candidate: rows shared by a thread block
// cluster need sm_90.
TEST(CandidateTest, MakeCandidateRejectsPointsTheArchCannotRun) {
  const KernelTask task = SoftmaxTask(kF32, 64, 393216);
  const codegen::KernelFamily& reduction = *codegen::FindFamily(forge::v1::KERNEL_FAMILY_REDUCTION);
  const codegen::SchedulePoint point = {"row_reduce",
                                        {{"threads_per_row", 1024},
                                         {"rows_per_block", 1},
                                         {"vector_width", 4},
                                         {"cache_row", 1},
                                         {"cluster_blocks", 8},
                                         {"online_softmax", 1},
                                         {"max_registers", 0}}};
  EXPECT_TRUE(MakeCandidate(task, reduction, point, "sm_90").ok());
  const absl::Status sm80 = MakeCandidate(task, reduction, point, "sm_80").status();
  EXPECT_EQ(sm80.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(sm80.message(), HasSubstr("sm_90"));
}

TEST(CandidateTest, MakeCandidateNeedsATaskDigestAndAnArch) {
  KernelTask task = ReluTask();
  EXPECT_THAT(MakeCandidate(task, Pointwise(), PointwisePoint(256, 1, 4), "").status().message(),
              HasSubstr("target arch"));
  task.clear_digest();
  EXPECT_THAT(
      MakeCandidate(task, Pointwise(), PointwisePoint(256, 1, 4), "sm_90").status().message(),
      HasSubstr("digest"));
}

TEST(CandidateTest, BaselineIsTheAtenFallback) {
  const KernelTask task = SoftmaxTask(kF32, 256, 2048);
  absl::StatusOr<Candidate> baseline = BaselineCandidate(task, "sm_90");
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  EXPECT_EQ(baseline->family(), forge::v1::KERNEL_FAMILY_ATEN);
  EXPECT_TRUE(baseline->parameters().empty());
  EXPECT_EQ(baseline->digest(), CandidateDigest(*baseline));
  absl::StatusOr<codegen::GeneratedKernel> kernel = GenerateCandidate(task, *baseline);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_TRUE(codegen::IsAtenFallback(*kernel));
}

TEST(CandidateTest, GenerateCandidateGeneratesThePoint) {
  const KernelTask task = ReluTask();
  const codegen::SchedulePoint point = PointwisePoint(128, 4, 2);
  absl::StatusOr<Candidate> candidate = MakeCandidate(task, Pointwise(), point, "sm_90");
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  absl::StatusOr<codegen::GeneratedKernel> kernel = GenerateCandidate(task, *candidate);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->source, Pointwise().Generate(task, point)->source);
  EXPECT_EQ(kernel->parameters, point.parameters);
}

TEST(CandidateTest, GenerateCandidateChecksTaskVersionAndDigest) {
  const KernelTask task = ReluTask();
  absl::StatusOr<Candidate> candidate =
      MakeCandidate(task, Pointwise(), PointwisePoint(128, 4, 2), "sm_90");
  ASSERT_TRUE(candidate.ok()) << candidate.status();

  KernelTask other_task = task;
  other_task.set_digest(std::string(64, 'c'));
  EXPECT_EQ(GenerateCandidate(other_task, *candidate).status().code(),
            absl::StatusCode::kInvalidArgument);

  Candidate old_generator = *candidate;
  old_generator.set_generator_version("pointwise-0");
  old_generator.set_digest(CandidateDigest(old_generator));
  EXPECT_EQ(GenerateCandidate(task, old_generator).status().code(),
            absl::StatusCode::kFailedPrecondition);

  Candidate tampered = *candidate;
  (*tampered.mutable_parameters())["vector_width"] = 4;
  absl::Status status = GenerateCandidate(task, tampered).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("does not match its fields"));

  Candidate conv = *candidate;
  conv.set_family(forge::v1::KERNEL_FAMILY_CONV);
  conv.set_digest(CandidateDigest(conv));
  EXPECT_THAT(GenerateCandidate(task, conv).status().message(),
              HasSubstr("KERNEL_FAMILY_CONV"));
}

}  // namespace
}  // namespace forge::search
