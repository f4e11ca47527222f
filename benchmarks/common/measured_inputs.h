// What the CPU-side benchmarks that compare models with GPU measurements share
// (benchmarks/emulated/calibrate.cc, benchmarks/cost_model/evaluate.cc): reading the generator
// benchmark's result files, the task of an exported problem, and a tool's main.
#ifndef FORGE_BENCHMARKS_COMMON_MEASURED_INPUTS_H_
#define FORGE_BENCHMARKS_COMMON_MEASURED_INPUTS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "forge/v1/task.pb.h"
#include "google/protobuf/struct.pb.h"

namespace forge::benchmarks {

// The records of a result file: one per JSON line, or, for a file that is one JSON object, the
// entries of its "anchors" list (or the object itself without one). NotFound for an unreadable
// file, InvalidArgument for a line that is not JSON.
absl::StatusOr<std::vector<google::protobuf::Struct>> ReadRecords(const std::string& path);

// The task of `family` that partitioning PROBLEMS_DIR/<problem>/graph.pb (benchmarks/gpu/
// problems.py export) gives. NotFound when the graph is unreadable or has no such task.
absl::StatusOr<forge::v1::KernelTask> ProblemTask(const std::string& problems_dir,
                                                  const std::string& problem,
                                                  forge::v1::KernelFamily family);

// A tool's main: `usage` on stderr and 2 with fewer than `min_args` arguments, else `run` over
// argv[1..]; its error on stderr and 1 when it fails.
int ToolMain(int argc, char** argv, int min_args, const std::string& usage,
             const std::function<absl::Status(const std::vector<std::string>&)>& run);

}  // namespace forge::benchmarks

#endif  // FORGE_BENCHMARKS_COMMON_MEASURED_INPUTS_H_
