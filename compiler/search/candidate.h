// Candidates as data: a (task, family, template, schedule point, generator version, target arch)
// and the digest that names it everywhere (leases, results cache, reports).
//
// The digest is SHA-256 over a canonical encoding of those six things (parameters sorted by
// name), so the same point of the same task for the same arch and generator is the same
// candidate in every job, on every coordinator.
#ifndef FORGE_COMPILER_SEARCH_CANDIDATE_H_
#define FORGE_COMPILER_SEARCH_CANDIDATE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/codegen/family.h"
#include "forge/v1/task.pb.h"

namespace forge::search {

// The candidate for `point` of `family` on `task`, with its digest, after family.Validate and
// family.SupportsArch. InvalidArgument/Unimplemented as Validate says; FailedPrecondition for a
// point `target_arch` cannot run. Its compile_cost is left unset: the search space sets it from
// the point's plan, which it computes anyway (SearchSpace::Build).
absl::StatusOr<forge::v1::Candidate> MakeCandidate(const forge::v1::KernelTask& task,
                                                   const codegen::KernelFamily& family,
                                                   const codegen::SchedulePoint& point,
                                                   absl::string_view target_arch);

// The ATen fallback candidate of `task` (compile cost COMPILE_COST_NONE): timing it gives the
// task's eager baseline.
absl::StatusOr<forge::v1::Candidate> BaselineCandidate(const forge::v1::KernelTask& task,
                                                       absl::string_view target_arch);

// True for a candidate whose compile costs a worker tens of seconds (COMPILE_COST_NVCC: CUTLASS's
// shared objects); everything else (NVRTC cubins, library calls, ATen, an unknown cost) is cheap.
// The scheduler leases every task's cheap candidates before expensive ones (server/scheduler.h).
bool IsExpensive(const forge::v1::Candidate& candidate);

// The digest MakeCandidate gives, from the candidate's fields (digest itself ignored).
std::string CandidateDigest(const forge::v1::Candidate& candidate);

// The schedule point a candidate carries.
codegen::SchedulePoint PointOf(const forge::v1::Candidate& candidate);

// Generates the candidate's kernel: finds its family, checks its task digest and generator
// version against this build's, then Generate(task, PointOf(candidate)). FailedPrecondition when
// the generator version differs (the candidate belongs to another build), InvalidArgument for a
// task/candidate mismatch or a digest that does not match the fields.
absl::StatusOr<codegen::GeneratedKernel> GenerateCandidate(const forge::v1::KernelTask& task,
                                                           const forge::v1::Candidate& candidate);

}  // namespace forge::search

#endif  // FORGE_COMPILER_SEARCH_CANDIDATE_H_
