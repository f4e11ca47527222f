// Intake validation: what SubmitJob checks of a job before anything else reads it (the
// partitioner, the stores, the generators), so that no client input can overflow, exhaust or
// crash the coordinator, or be cached as if it were a model.
//
// ValidateGraph checks, in this order, and stops at the first problem:
//   - size: the serialized graph and its node count against the limits;
//   - every Value: a name, a known dtype (an enum value this build has, not UNSPECIFIED), a known
//     layout, a rank up to max_rank, no negative dimension, strides (when given) one per
//     dimension and not negative, a storage offset not negative, and its element count and bytes
//     (of the whole span its strides reach) computed with overflow checks and within
//     max_tensor_bytes;
//   - every Node: a name, an op spelled "namespace::name" and a schema that parses as
//     "namespace::name[.overload](arguments) -> returns" (balanced brackets) and names the node's
//     op. Ops Forge has no generator for are fine: they run as ATen tasks. A node may leave the
//     schema empty;
//   - every input with data (parameters, buffers, constants; the digest's form is the blob
//     store's to check): size_bytes equal to what the declared tensor holds (elements x dtype
//     bytes, the row-major contiguous form TensorData stores), inline bytes (when present) of that
//     size, and the sum over the graph within max_weight_bytes.
// ValidateJobOptions checks the budget (not negative, within the caps) and the priority (within
// +-max_priority).
// Errors are InvalidArgument and name the field: "value 'x': shape[1] is -3; ...".
#ifndef FORGE_SERVER_INTAKE_H_
#define FORGE_SERVER_INTAKE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "forge/v1/graph.pb.h"
#include "forge/v1/task.pb.h"

namespace forge::server {

struct IntakeLimits {
  // The serialized graph (weights travel as blobs, not in the graph).
  int64_t max_graph_bytes = 64LL << 20;
  int64_t max_nodes = 100'000;
  int max_rank = 16;
  // One tensor value's bytes, and all the data (parameters, buffers, constants) of one job.
  int64_t max_tensor_bytes = 64LL << 30;
  int64_t max_weight_bytes = 256LL << 30;
  // Options: budgets and priority.
  int64_t max_candidate_trials = 1'000'000;
  int64_t max_wall_seconds = 7 * 24 * 3600;
  int32_t max_priority = 100;
  // Jobs one owner may have queued or running at once (0: no limit); admins are exempt. Checked
  // by JobStore::CreateJob, not by ValidateJobOptions.
  int64_t max_active_jobs_per_owner = 100;
};

// The limits a client checks a job against before it sends it (the forge CLI does, through
// ValidateGraph and ValidateJobOptions, so its messages are the coordinator's): max_rank, which no
// coordinator setting changes, and every format check; the limits a coordinator's configuration
// sets (bytes, nodes, budgets, priority) are left to it, here as high as sums stay within int64.
IntakeLimits ClientSideLimits();

// Elements of `spec` (1 for a scalar); InvalidArgument for a negative dimension or a count that
// overflows int64.
absl::StatusOr<int64_t> CheckedElements(const forge::v1::TensorSpec& spec);

absl::Status ValidateGraph(const forge::v1::Graph& graph, const IntakeLimits& limits);
absl::Status ValidateJobOptions(const forge::v1::JobOptions& options, const IntakeLimits& limits);

}  // namespace forge::server

#endif  // FORGE_SERVER_INTAKE_H_
