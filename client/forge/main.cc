// forge: the command-line client. Subcommands live in one table; each parses its own arguments.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/forge/inspect.h"

namespace {

// Exit codes, also listed by `forge --help`.
constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;  // the command ran and failed: unreadable file, unknown GPU, ...
constexpr int kExitUsage = 2;   // bad command line

constexpr char kInspectHelp[] =
    "usage: forge inspect MODEL [--gpu NAME] [--json]\n"
    "\n"
    "Partitions a forge.v1.Graph (binary protobuf, as forge.export or the .pt2 importer write it)\n"
    "into kernel tasks and prints each task: digest, family, ops, shapes, GFLOP, MB, roofline\n"
    "floor on the GPU and occurrences, then totals.\n"
    "\n"
    "  --gpu NAME  GPU for the roofline floor (default h200): a100, h100, h200, l40s, rtx4090, b200\n"
    "  --json      print JSON instead of a table\n";

int RunInspect(const std::vector<std::string>& args) {
  forge::client::InspectOptions options;
  std::string path;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kInspectHelp;
      return kExitOk;
    } else if (arg == "--json") {
      options.json = true;
    } else if (arg == "--gpu" && i + 1 < args.size()) {
      options.gpu = args[++i];
    } else if (arg.rfind("--gpu=", 0) == 0) {
      options.gpu = arg.substr(6);
    } else if (!arg.empty() && arg[0] != '-' && path.empty()) {
      path = arg;
    } else {
      std::cerr << "forge inspect: unexpected argument '" << arg << "'\n" << kInspectHelp;
      return kExitUsage;
    }
  }
  if (path.empty()) {
    std::cerr << "forge inspect: missing MODEL\n" << kInspectHelp;
    return kExitUsage;
  }
  absl::StatusOr<forge::v1::Graph> graph = forge::client::ReadModelFile(path);
  if (!graph.ok()) {
    std::cerr << "forge inspect: " << graph.status().message() << "\n";
    return kExitFailed;
  }
  absl::StatusOr<std::string> report = forge::client::InspectGraph(*graph, options);
  if (!report.ok()) {
    std::cerr << "forge inspect: " << path << ": " << report.status().message() << "\n";
    return kExitFailed;
  }
  std::cout << *report;
  return kExitOk;
}

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

constexpr Subcommand kSubcommands[] = {
    {"inspect", "partition a model graph and show its kernel tasks and roofline floors",
     RunInspect},
};

std::string Help() {
  std::string help = "usage: forge COMMAND [ARGS...]\n\ncommands:\n";
  for (const Subcommand& command : kSubcommands) {
    absl::StrAppend(&help, "  ", command.name, "  ", command.summary, "\n");
  }
  absl::StrAppend(&help,
                  "\n'forge COMMAND --help' describes a command.\n\n"
                  "exit codes: 0 success, 1 the command failed (unreadable or malformed input, "
                  "unknown GPU), 2 bad command line\n");
  return help;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << Help();
    return kExitUsage;
  }
  const absl::string_view command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << Help();
    return kExitOk;
  }
  for (const Subcommand& subcommand : kSubcommands) {
    if (command == subcommand.name) {
      return subcommand.run(std::vector<std::string>(argv + 2, argv + argc));
    }
  }
  std::cerr << "forge: unknown command '" << command << "'\n" << Help();
  return kExitUsage;
}
