#include "client/forge/inspect.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/arch/arch.h"
#include "common/dtype/dtype.h"
#include "common/text/json.h"
#include "common/version/version.h"
#include "compiler/graph/cost.h"
#include "compiler/graph/op_classes.h"
#include "compiler/graph/partition.h"

namespace forge::client {
namespace {

using ::forge::v1::KernelTask;
using ::forge::v1::TensorSpec;

struct TaskRow {
  std::string short_digest;
  std::string family;  // "GEMM"
  std::string ops;     // "linear+gelu"
  std::vector<std::string> inputs;   // "[8, 64] float32"
  std::vector<std::string> outputs;
  const KernelTask* task;
  Roofline floor;
};

std::string Describe(const TensorSpec& spec) {
  return absl::StrCat("[", absl::StrJoin(spec.shape(), ", "), "] ", DTypeName(spec.dtype()));
}

std::string JsonTensors(const google::protobuf::RepeatedPtrField<TensorSpec>& specs) {
  std::vector<std::string> items;
  for (const TensorSpec& spec : specs) {
    items.push_back(absl::StrCat("{\"shape\": [", absl::StrJoin(spec.shape(), ", "),
                                 "], \"dtype\": ", JsonString(DTypeName(spec.dtype())), "}"));
  }
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

std::string RenderJson(const GpuArch& gpu, const std::vector<TaskRow>& rows, int instances,
                       double total_floor_us) {
  std::vector<std::string> tasks;
  for (const TaskRow& row : rows) {
    std::vector<std::string> notes;
    for (const std::string& note : row.task->notes()) notes.push_back(JsonString(note));
    tasks.push_back(absl::StrCat(
        "    {\"digest\": ", JsonString(row.task->digest()),
        ", \"family\": ", JsonString(row.family), ", \"ops\": ", JsonString(row.ops),
        ", \"inputs\": ", JsonTensors(row.task->inputs()),
        ", \"outputs\": ", JsonTensors(row.task->outputs()),
        ", \"flops\": ", row.task->flops(), ", \"min_bytes\": ", row.task->min_bytes(),
        ", \"floor_us\": ", absl::StrFormat("%.6g", row.floor.seconds * 1e6),
        ", \"bound\": ", JsonString(BoundName(row.floor.bound)),
        ", \"occurrences\": ", row.task->occurrences(),
        ", \"notes\": [", absl::StrJoin(notes, ", "), "]}"));
  }
  return absl::StrCat("{\n  \"version\": ", JsonString(FullVersion()),
                      ",\n  \"gpu\": ", JsonString(gpu.name), ",\n  \"tasks\": [\n",
                      absl::StrJoin(tasks, ",\n"), "\n  ],\n  \"totals\": {\"tasks\": ", instances,
                      ", \"unique_tasks\": ", rows.size(), ", \"floor_us\": ",
                      absl::StrFormat("%.6g", total_floor_us), "}\n}\n");
}

std::string RenderText(const GpuArch& gpu, const std::vector<TaskRow>& rows, int instances,
                       double total_floor_us) {
  std::string out = absl::StrFormat("%-12s  %-9s  %-32s  %9s  %9s  %10s  %-13s  %4s\n", "task",
                                    "family", "ops", "GFLOP", "MB", "floor us", "bound", "occ");
  for (const TaskRow& row : rows) {
    absl::StrAppendFormat(&out, "%-12s  %-9s  %-32s  %9.4f  %9.4f  %10.3f  %-13s  %4d\n",
                          row.short_digest, row.family, row.ops, row.task->flops() / 1e9,
                          row.task->min_bytes() / 1e6, row.floor.seconds * 1e6,
                          BoundName(row.floor.bound), row.task->occurrences());
    absl::StrAppend(&out, "              in:  ", absl::StrJoin(row.inputs, ", "), "\n",
                    "              out: ", absl::StrJoin(row.outputs, ", "), "\n");
    for (const std::string& note : row.task->notes()) {
      absl::StrAppend(&out, "              note: ", note, "\n");
    }
  }
  absl::StrAppendFormat(&out,
                        "\n%d tasks (%d unique); roofline floor of the model on %s: %.3f us\n",
                        instances, static_cast<int>(rows.size()), gpu.name, total_floor_us);
  return out;
}

}  // namespace

std::string OpSummary(const forge::v1::Graph& group) {
  std::vector<std::string> compute;
  std::vector<std::string> all;
  for (const auto& node : group.nodes()) {
    const std::string op(absl::StripPrefix(node.op(), "aten::"));
    if (graph::ClassifyNode(node) != graph::OpClass::kView) compute.push_back(op);
    all.push_back(op);
  }
  return absl::StrJoin(compute.empty() ? all : compute, "+");
}

std::string BottleneckHint(const GpuArch& gpu, const KernelTask& task, double median_us) {
  const MathMode mode = graph::FloorMathMode(task);
  const double flops = static_cast<double>(task.flops());
  const double bytes = static_cast<double>(task.min_bytes());
  absl::StatusOr<Roofline> floor = RooflineFloor(gpu, flops, bytes, mode);
  if (!floor.ok() || median_us <= 0) return "";
  if (floor->seconds <= 0) return "launch-bound: no DRAM traffic or arithmetic";
  const double seconds = median_us * 1e-6;
  const double bandwidth_share = bytes / seconds / gpu.dram_bytes_per_second;
  const double peak = gpu.PeakFlops(mode);
  const double compute_share = peak > 0 ? flops / seconds / peak : 0;
  const double bound_share =
      floor->bound == Bound::kMemory ? bandwidth_share : compute_share;
  if (bound_share > 1.0) {
    return absl::StrFormat("faster than the roofline floor (%.0f%% of %s): re-verify",
                           bound_share * 100,
                           floor->bound == Bound::kMemory ? "bandwidth" : "peak");
  }
  if (floor->bound == Bound::kMemory) {
    return absl::StrFormat("memory-bound at %.0f%% of bandwidth (compute %.0f%% of %s peak)",
                           bandwidth_share * 100, compute_share * 100, MathModeName(mode));
  }
  return absl::StrFormat("compute-bound at %.0f%% of %s peak (bandwidth %.0f%%)",
                         compute_share * 100, MathModeName(mode), bandwidth_share * 100);
}

absl::StatusOr<std::string> InspectGraph(const forge::v1::Graph& graph,
                                         const InspectOptions& options) {
  absl::StatusOr<GpuArch> gpu = FindGpu(options.gpu);
  if (!gpu.ok()) return gpu.status();
  absl::StatusOr<graph::PartitionResult> partition = graph::Partition(graph);
  if (!partition.ok()) return partition.status();

  std::vector<TaskRow> rows;
  double total_floor_us = 0;
  for (const KernelTask& task : partition->tasks) {
    absl::StatusOr<Roofline> floor =
        RooflineFloor(*gpu, static_cast<double>(task.flops()),
                      static_cast<double>(task.min_bytes()), graph::FloorMathMode(task));
    if (!floor.ok()) return floor.status();
    TaskRow row{.short_digest = task.digest().substr(0, 12),
                .family = std::string(absl::StripPrefix(
                    forge::v1::KernelFamily_Name(task.family()), "KERNEL_FAMILY_")),
                .ops = OpSummary(task.group()),
                .inputs = {},
                .outputs = {},
                .task = &task,
                .floor = *floor};
    for (const TensorSpec& spec : task.inputs()) row.inputs.push_back(Describe(spec));
    for (const TensorSpec& spec : task.outputs()) row.outputs.push_back(Describe(spec));
    total_floor_us += floor->seconds * 1e6 * task.occurrences();
    rows.push_back(std::move(row));
  }
  const int instances = static_cast<int>(partition->instances.size());
  return options.json ? RenderJson(*gpu, rows, instances, total_floor_us)
                      : RenderText(*gpu, rows, instances, total_floor_us);
}

}  // namespace forge::client
