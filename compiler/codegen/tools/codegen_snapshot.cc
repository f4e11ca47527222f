// Prints what the generators make of every valid schedule point of every task of some graphs: one
// line per (task, family, point) with the SHA-256 of the generated source and its launch. Two
// builds' outputs compare with `diff`: a refactor of the generators must leave them identical.
//
//   codegen_snapshot GRAPH.pb|DIR ... > snapshot.tsv
//   codegen_snapshot --source=TEXT GRAPH.pb|DIR ...   (also prints the source of every line that
//                                                      contains TEXT, after that line)
//
// A DIR argument stands for every graph.pb and judge_graph.pb below it (problems.py export,
// tests/fixtures/make_models.py). Lines are sorted; each reads
//   graph  task-digest  family  template  k=v,...  status|sha256  kernel  grid  block  smem  version
// where an invalid point prints its Validate error instead of a digest (so a change to the
// constraints shows too).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "common/digest/sha256.h"
#include "compiler/codegen/family.h"
#include "compiler/graph/partition.h"
#include "forge/v1/graph.pb.h"

namespace forge {
namespace {

std::vector<std::string> GraphFiles(const std::vector<std::string>& arguments) {
  std::vector<std::string> files;
  for (const std::string& argument : arguments) {
    if (!std::filesystem::is_directory(argument)) {
      files.push_back(argument);
      continue;
    }
    for (const auto& entry : std::filesystem::recursive_directory_iterator(argument)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_regular_file() && (name == "graph.pb" || name == "judge_graph.pb")) {
        files.push_back(entry.path().string());
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string Dims(const std::array<uint32_t, 3>& dims) {
  return absl::StrCat(dims[0], "x", dims[1], "x", dims[2]);
}

std::string OneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\t', ' ');
  return text;
}

int Run(const std::vector<std::string>& arguments, const std::string& source_filter) {
  std::vector<std::string> lines;
  for (const std::string& file : GraphFiles(arguments)) {
    std::ifstream in(file, std::ios::binary);
    forge::v1::Graph graph;
    if (!in || !graph.ParseFromIstream(&in)) {
      std::cerr << "cannot read a forge.v1.Graph from " << file << "\n";
      return 1;
    }
    auto partition = graph::Partition(graph);
    if (!partition.ok()) {
      lines.push_back(absl::StrCat(file, "\tpartition\t", OneLine(partition.status().ToString())));
      continue;
    }
    for (const forge::v1::KernelTask& task : partition->tasks) {
      for (const codegen::KernelFamily* family : codegen::ApplicableFamilies(task)) {
        auto spaces = family->ScheduleSpace(task);
        if (!spaces.ok()) {
          lines.push_back(absl::StrCat(file, "\t", task.digest(), "\t", family->name(),
                                       "\tspace\t", OneLine(spaces.status().ToString())));
          continue;
        }
        for (const codegen::TemplateSpace& space : *spaces) {
          for (const codegen::SchedulePoint& point : codegen::EnumeratePoints(space)) {
            std::vector<std::string> parameters;
            for (const auto& [name, value] : point.parameters) {
              parameters.push_back(absl::StrCat(name, "=", value));
            }
            const std::string prefix =
                absl::StrCat(file, "\t", task.digest(), "\t", family->name(), "\t",
                             point.template_name, "\t", absl::StrJoin(parameters, ","), "\t");
            if (absl::Status valid = family->Validate(task, point); !valid.ok()) {
              lines.push_back(absl::StrCat(prefix, "invalid: ", OneLine(valid.ToString())));
              continue;
            }
            auto kernel = family->Generate(task, point);
            if (!kernel.ok()) {
              lines.push_back(absl::StrCat(prefix, "error: ", OneLine(kernel.status().ToString())));
              continue;
            }
            lines.push_back(absl::StrCat(
                prefix, Sha256Hex(kernel->source), "\t", kernel->kernel_name, "\t",
                Dims(kernel->launch.grid), "\t", Dims(kernel->launch.block), "\t",
                kernel->launch.dynamic_shared_bytes, "\t", kernel->generator_version));
            if (!source_filter.empty() && absl::StrContains(lines.back(), source_filter)) {
              lines.back() += absl::StrCat("\n", kernel->source);
            }
          }
        }
      }
    }
  }
  std::sort(lines.begin(), lines.end());
  for (const std::string& line : lines) std::cout << line << "\n";
  return 0;
}

}  // namespace
}  // namespace forge

int main(int argc, char** argv) {
  std::vector<std::string> arguments(argv + 1, argv + argc);
  std::string source_filter;
  if (!arguments.empty() && arguments[0].rfind("--source=", 0) == 0) {
    source_filter = arguments[0].substr(9);
    arguments.erase(arguments.begin());
  }
  if (arguments.empty()) {
    std::cerr << "usage: codegen_snapshot [--source=TEXT] GRAPH.pb|DIR ...\n";
    return 2;
  }
  return forge::Run(arguments, source_filter);
}
