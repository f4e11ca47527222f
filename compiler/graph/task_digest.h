// The canonical digest of a kernel task's group: identical fused sub-graphs anywhere (in one model
// or across models) get the same digest, whatever their values and nodes are called.
#ifndef FORGE_COMPILER_GRAPH_TASK_DIGEST_H_
#define FORGE_COMPILER_GRAPH_TASK_DIGEST_H_

#include <string>

#include "forge/v1/graph.pb.h"

namespace forge::graph {

// The normalized copy of `group` that the digest covers:
// - value names become positional: "%0", "%1", ... for the group inputs in order, then the node
//   outputs in node order (the group's nodes are in topological order);
// - node names, schemas (implied by op and overload) and attributes (stack traces) are dropped,
//   as are the metadata, the input targets and data (weights are bound per instance) and tensor
//   devices (a task is the same on any GPU);
// - everything else stays: ops, overloads, arguments with their scalars, shapes, dtypes, strides,
//   storage offsets, layouts, input and output kinds.
// Names the group does not define are left as they are, so a malformed group still digests.
forge::v1::Graph CanonicalGroup(const forge::v1::Graph& group);

// SHA-256, 64 lower-case hex digits, of CanonicalGroup(group) in protobuf's deterministic binary
// serialization (fields in number order, map entries sorted; the canonical form has no maps left).
// Python reproduces it with CanonicalGroup's rules and SerializeToString(deterministic=True).
std::string TaskDigest(const forge::v1::Graph& group);

// SHA-256 of a whole submitted graph in the same serialization, as it is (not normalized): what
// names a job's model (Job.model_digest) on the coordinator and in the client.
std::string ModelDigest(const forge::v1::Graph& graph);

}  // namespace forge::graph

#endif  // FORGE_COMPILER_GRAPH_TASK_DIGEST_H_
