#include "benchmarks/common/measured_inputs.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "compiler/graph/partition.h"
#include "forge/v1/graph.pb.h"
#include "google/protobuf/util/json_util.h"

namespace forge::benchmarks {

using google::protobuf::Struct;
using google::protobuf::Value;

absl::StatusOr<std::vector<Struct>> ReadRecords(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << file.rdbuf();
  std::vector<Struct> records;
  Struct whole;
  if (google::protobuf::util::JsonStringToMessage(text.str(), &whole).ok()) {
    if (!whole.fields().contains("anchors")) return std::vector<Struct>{whole};
    for (const Value& anchor : whole.fields().at("anchors").list_value().values()) {
      records.push_back(anchor.struct_value());
    }
    return records;
  }
  text.clear();
  text.seekg(0);
  std::string line;
  while (std::getline(text, line)) {
    if (line.empty()) continue;
    Struct record;
    if (!google::protobuf::util::JsonStringToMessage(line, &record).ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": a line is not JSON"));
    }
    records.push_back(std::move(record));
  }
  return records;
}

absl::StatusOr<forge::v1::KernelTask> ProblemTask(const std::string& problems_dir,
                                                  const std::string& problem,
                                                  forge::v1::KernelFamily family) {
  const std::string path = absl::StrCat(problems_dir, "/", problem, "/graph.pb");
  std::ifstream file(path, std::ios::binary);
  forge::v1::Graph graph;
  if (!file || !graph.ParseFromIstream(&file)) {
    return absl::NotFoundError(absl::StrCat("cannot read the graph ", path));
  }
  FORGE_ASSIGN_OR_RETURN(graph::PartitionResult partition, graph::Partition(graph));
  for (const forge::v1::KernelTask& task : partition.tasks) {
    if (task.family() == family) return task;
  }
  return absl::NotFoundError(
      absl::StrCat(path, ": no task of family ", forge::v1::KernelFamily_Name(family)));
}

int ToolMain(int argc, char** argv, int min_args, const std::string& usage,
             const std::function<absl::Status(const std::vector<std::string>&)>& run) {
  if (argc < min_args + 1) {
    std::cerr << "usage: " << usage << "\n";
    return 2;
  }
  const absl::Status status = run(std::vector<std::string>(argv + 1, argv + argc));
  if (!status.ok()) {
    std::cerr << status << "\n";
    return 1;
  }
  return 0;
}

}  // namespace forge::benchmarks
