#include "compiler/search/candidate.h"

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/digest/sha256.h"
#include "common/status/status_macros.h"

namespace forge::search {
namespace {

// The canonical encoding the digest covers: a version tag, then every field as fixed-width
// little-endian integers or length-prefixed bytes, so no two field lists encode alike.
class CanonicalEncoder {
 public:
  void Integer(std::uint64_t value) {
    for (int byte = 0; byte < 8; ++byte) bytes_.push_back(static_cast<char>(value >> (8 * byte)));
  }
  void Text(absl::string_view text) {
    Integer(text.size());
    bytes_.append(text.data(), text.size());
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

}  // namespace

std::string CandidateDigest(const forge::v1::Candidate& candidate) {
  CanonicalEncoder encoder;
  encoder.Text("forge.candidate.v1");
  encoder.Text(candidate.task_digest());
  encoder.Integer(static_cast<std::uint64_t>(candidate.family()));
  encoder.Text(candidate.template_name());
  // The proto map has no order; std::map sorts by name.
  const std::map<std::string, std::int64_t> parameters(candidate.parameters().begin(),
                                                       candidate.parameters().end());
  encoder.Integer(parameters.size());
  for (const auto& [name, value] : parameters) {
    encoder.Text(name);
    encoder.Integer(static_cast<std::uint64_t>(value));
  }
  encoder.Text(candidate.generator_version());
  encoder.Text(candidate.target_arch());
  return Sha256Hex(encoder.bytes());
}

absl::StatusOr<forge::v1::Candidate> MakeCandidate(const forge::v1::KernelTask& task,
                                                   const codegen::KernelFamily& family,
                                                   const codegen::SchedulePoint& point,
                                                   absl::string_view target_arch) {
  if (task.digest().empty()) {
    return absl::InvalidArgumentError("candidate for a task without a digest (KernelTask.digest)");
  }
  if (target_arch.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("candidate for task ", task.digest(), " without a target arch"));
  }
  FORGE_RETURN_IF_ERROR(family.Validate(task, point));
  FORGE_RETURN_IF_ERROR(family.SupportsArch(task, point, target_arch));
  forge::v1::Candidate candidate;
  candidate.set_task_digest(task.digest());
  candidate.set_family(family.kind());
  candidate.set_template_name(point.template_name);
  candidate.mutable_parameters()->insert(point.parameters.begin(), point.parameters.end());
  candidate.set_generator_version(std::string(family.generator_version()));
  candidate.set_target_arch(std::string(target_arch));
  candidate.set_digest(CandidateDigest(candidate));
  return candidate;
}

bool IsExpensive(const forge::v1::Candidate& candidate) {
  return candidate.compile_cost() == forge::v1::COMPILE_COST_NVCC;
}

absl::StatusOr<forge::v1::Candidate> BaselineCandidate(const forge::v1::KernelTask& task,
                                                       absl::string_view target_arch) {
  const codegen::KernelFamily* aten = codegen::FindFamily(forge::v1::KERNEL_FAMILY_ATEN);
  if (aten == nullptr) return absl::InternalError("no ATen fallback family is registered");
  FORGE_ASSIGN_OR_RETURN(const std::vector<codegen::TemplateSpace> spaces,
                         aten->ScheduleSpace(task));
  if (spaces.size() != 1) {
    return absl::InternalError(absl::StrCat("the ATen fallback offers ", spaces.size(),
                                            " templates for task ", task.digest(),
                                            "; its baseline needs exactly one"));
  }
  const codegen::SchedulePoint point = codegen::DefaultPoint(spaces.front());
  FORGE_ASSIGN_OR_RETURN(forge::v1::Candidate candidate,
                         MakeCandidate(task, *aten, point, target_arch));
  FORGE_ASSIGN_OR_RETURN(const codegen::LaunchPlan plan, aten->Plan(task, point));
  candidate.set_compile_cost(codegen::CompileCostOf(plan));
  return candidate;
}

codegen::SchedulePoint PointOf(const forge::v1::Candidate& candidate) {
  return codegen::SchedulePoint{
      candidate.template_name(),
      std::map<std::string, std::int64_t>(candidate.parameters().begin(),
                                          candidate.parameters().end())};
}

absl::StatusOr<codegen::GeneratedKernel> GenerateCandidate(const forge::v1::KernelTask& task,
                                                           const forge::v1::Candidate& candidate) {
  const codegen::KernelFamily* family = codegen::FindFamily(candidate.family());
  if (family == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("candidate ", candidate.digest(), ": no generator implements family ",
                     forge::v1::KernelFamily_Name(candidate.family())));
  }
  if (candidate.task_digest() != task.digest()) {
    return absl::InvalidArgumentError(absl::StrCat("candidate ", candidate.digest(),
                                                   " belongs to task ", candidate.task_digest(),
                                                   ", not to task ", task.digest()));
  }
  if (candidate.generator_version() != family->generator_version()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "candidate ", candidate.digest(), " was made by generator ",
        candidate.generator_version(), "; this build's ", family->name(), " generator is ",
        family->generator_version()));
  }
  if (const std::string digest = CandidateDigest(candidate); digest != candidate.digest()) {
    return absl::InvalidArgumentError(absl::StrCat("candidate digest ", candidate.digest(),
                                                   " does not match its fields (they digest to ",
                                                   digest, ")"));
  }
  return family->Generate(task, PointOf(candidate));
}

}  // namespace forge::search
