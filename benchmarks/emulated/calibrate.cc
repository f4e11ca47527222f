// Compares the emulated backend's predictions with times measured on a real GPU
// (README.md beside this file).
//
//   emulated_calibrate GPU PROBLEMS_DIR RESULTS.json[l]...
//
// PROBLEMS_DIR holds the problems exported by benchmarks/gpu/problems.py export (full shapes:
// <name>/graph.pb). Each RESULTS file is JSON lines, or one JSON object with an "anchors" list;
// every record names its "problem" and carries measured schedule points, either "points" (each
// with "parameters" and "median_us") or a single "best". For each problem, the graph is
// partitioned, its one task of the record's family is taken, every measured point is generated,
// compiled for the GPU's architecture and predicted; the output is a markdown table per problem
// with the mean absolute percentage error and Spearman's rank correlation.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "benchmarks/common/measured_inputs.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/family.h"
#include "compiler/cost/learned/evaluation.h"
#include "google/protobuf/struct.pb.h"
#include "worker/emulated/emulated_backend.h"

namespace forge::emulated {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

struct MeasuredPoint {
  codegen::SchedulePoint point;
  double measured_us = 0;
};

struct Record {
  std::string problem;
  forge::v1::KernelFamily family = forge::v1::KERNEL_FAMILY_UNSPECIFIED;
  std::vector<MeasuredPoint> points;
};

absl::StatusOr<MeasuredPoint> ReadPoint(const Struct& point, absl::string_view template_name) {
  MeasuredPoint measured;
  measured.point.template_name = std::string(template_name);
  const auto parameters = point.fields().find("parameters");
  const auto median = point.fields().find("median_us");
  if (parameters == point.fields().end() || median == point.fields().end()) {
    return absl::InvalidArgumentError("a measured point needs 'parameters' and 'median_us'");
  }
  for (const auto& [name, value] : parameters->second.struct_value().fields()) {
    measured.point.parameters[name] = static_cast<int64_t>(value.number_value());
  }
  measured.measured_us = median->second.number_value();
  return measured;
}

absl::StatusOr<Record> ReadRecord(const Struct& object) {
  Record record;
  const auto& fields = object.fields();
  if (!fields.contains("problem")) return absl::InvalidArgumentError("record without 'problem'");
  record.problem = fields.at("problem").string_value();
  // The anchors of the generator benchmark are one family each: reductions have threads_per_row.
  std::vector<const Struct*> points;
  if (fields.contains("points")) {
    for (const Value& point : fields.at("points").list_value().values()) {
      points.push_back(&point.struct_value());
    }
  } else if (fields.contains("best")) {
    points.push_back(&fields.at("best").struct_value());
  }
  for (const Struct* point : points) {
    const bool reduction =
        point->fields().at("parameters").struct_value().fields().contains("threads_per_row");
    record.family = reduction ? forge::v1::KERNEL_FAMILY_REDUCTION : forge::v1::KERNEL_FAMILY_POINTWISE;
    FORGE_ASSIGN_OR_RETURN(MeasuredPoint measured,
                           ReadPoint(*point, reduction ? "row_reduce" : "pointwise_flat"));
    record.points.push_back(std::move(measured));
  }
  return record;
}

absl::StatusOr<std::vector<Record>> ReadResults(const std::string& path) {
  FORGE_ASSIGN_OR_RETURN(const std::vector<Struct> objects, benchmarks::ReadRecords(path));
  std::vector<Record> records;
  for (const Struct& object : objects) {
    FORGE_ASSIGN_OR_RETURN(Record record, ReadRecord(object));
    if (!record.points.empty()) records.push_back(std::move(record));
  }
  return records;
}

// args: GPU, PROBLEMS_DIR, then the result files.
absl::Status Run(const std::vector<std::string>& args) {
  const std::string& gpu_name = args[0];
  const std::string& problems_dir = args[1];
  const std::vector<std::string> result_paths(args.begin() + 2, args.end());
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<compile::CompilePool> pool,
                         compile::CompilePool::Create({.threads = 2}));
  const EmulatedBackend backend(pool.get());
  for (const std::string& path : result_paths) {
    FORGE_ASSIGN_OR_RETURN(std::vector<Record> records, ReadResults(path));
    for (const Record& record : records) {
      FORGE_ASSIGN_OR_RETURN(forge::v1::KernelTask task,
                             benchmarks::ProblemTask(problems_dir, record.problem, record.family));
      const codegen::KernelFamily* family = codegen::FindFamily(record.family);
      std::cout << "### " << record.problem << " (" << path.substr(path.rfind('/') + 1) << ")\n\n"
                << "| point | regs | measured us | predicted us | error | model |\n"
                << "|---|---|---|---|---|---|\n";
      std::vector<double> measured, predicted;
      double abs_percent_error = 0;
      for (const MeasuredPoint& point : record.points) {
        std::vector<std::string> parameters;
        for (const auto& [name, value] : point.point.parameters) {
          parameters.push_back(absl::StrCat(name, "=", value));
        }
        FORGE_ASSIGN_OR_RETURN(codegen::GeneratedKernel kernel, family->Generate(task, point.point));
        FORGE_ASSIGN_OR_RETURN(EmulatedResult outcome,
                               backend.Predict(task, kernel, gpu_name, "calibration"));
        if (!outcome.result.has_measurement()) {
          std::cout << "| " << absl::StrJoin(parameters, " ") << " | | " << point.measured_us
                    << " | failed | | " << outcome.explanation << " |\n";
          continue;
        }
        const forge::v1::Measurement& m = outcome.result.measurement();
        const double error = (m.median_us() - point.measured_us) / point.measured_us;
        abs_percent_error += std::abs(error) * 100;
        measured.push_back(point.measured_us);
        predicted.push_back(m.median_us());
        std::cout << absl::StrFormat("| %s | %d | %.1f | %.1f | %+.0f%% | %s |\n",
                                     absl::StrJoin(parameters, " "),
                                     m.metrics().registers_per_thread(), point.measured_us,
                                     m.median_us(), error * 100, outcome.explanation);
      }
      std::cout << absl::StrFormat("\n%s: %d points, MAPE %.1f%%, Spearman %s\n\n", record.problem,
                                   measured.size(), abs_percent_error / std::max<size_t>(measured.size(), 1),
                                   measured.size() > 1 ? absl::StrFormat("%.2f", cost::Spearman(measured, predicted))
                                                       : std::string("n/a (one point)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace forge::emulated

int main(int argc, char** argv) {
  return forge::benchmarks::ToolMain(argc, argv, 3, "emulated_calibrate GPU PROBLEMS_DIR RESULTS.json[l]...", forge::emulated::Run);
}
