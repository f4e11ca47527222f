// Graphs a client may send that once took the coordinator down, built as proto the way the
// importer writes them, and the emulated worker that leases their work, for tests of the
// coordinator's robustness (issue 19).
#ifndef FORGE_TESTS_SUPPORT_HOSTILE_GRAPHS_H_
#define FORGE_TESTS_SUPPORT_HOSTILE_GRAPHS_H_

#include <string>

#include "forge/v1/graph.pb.h"
#include "forge/v1/service.pb.h"

namespace forge::testing {

// What forge.optimize(nn.Identity()) sends: one float32 [4] input that is also the output, no
// node; it partitions into no task.
forge::v1::Graph IdentityGraph();

// `torch.relu(x) * 1.0001` repeated `links` times over a float32 [4096] input (2 * links nodes),
// as torch.export writes it.
forge::v1::Graph PointwiseChain(int links);

// The registration of an emulated H200 (sm_90) worker on "test-host" with these generators
// (codegen::GeneratorVersions() of the build under test).
forge::v1::RegisterRequest EmulatedWorker(const std::string& generator_versions);

}  // namespace forge::testing

#endif  // FORGE_TESTS_SUPPORT_HOSTILE_GRAPHS_H_
