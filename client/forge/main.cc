// forge: the command-line client. Subcommands live in one table; each parses its own arguments.
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/forge/inspect.h"
#include "client/forge/predict.h"

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

constexpr char kPredictHelp[] =
    "usage: forge predict MODEL [--gpu NAME] [--json]\n"
    "\n"
    "Partitions a model into kernel tasks; for each task generates the default kernel of every\n"
    "applicable family, compiles it with NVRTC for the GPU's architecture and PREDICTS its time\n"
    "with the emulated backend's performance model. No GPU is used: every time is predicted.\n"
    "Prints per kernel: predicted us, roofline floor, % of floor, registers/spill bytes; then the\n"
    "best predicted time per task summed over the model against the floors.\n"
    "\n"
    "  --gpu NAME  GPU to predict for (default h200): a100, h100, h200, l40s, rtx4090, b200\n"
    "  --json      print JSON instead of a table\n";

// What inspect and predict both take: MODEL [--gpu NAME] [--json].
struct ModelArgs {
  std::string path;
  std::string gpu = "h200";
  bool json = false;
};

// Parses `args` into `parsed`; returns an exit code when the command is done (help or a usage
// error), nullopt when it should run.
std::optional<int> ParseModelArgs(absl::string_view command, const char* help,
                                  const std::vector<std::string>& args, ModelArgs& parsed) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << help;
      return kExitOk;
    } else if (arg == "--json") {
      parsed.json = true;
    } else if (arg == "--gpu" && i + 1 < args.size()) {
      parsed.gpu = args[++i];
    } else if (arg.rfind("--gpu=", 0) == 0) {
      parsed.gpu = arg.substr(6);
    } else if (!arg.empty() && arg[0] != '-' && parsed.path.empty()) {
      parsed.path = arg;
    } else {
      std::cerr << "forge " << command << ": unexpected argument '" << arg << "'\n" << help;
      return kExitUsage;
    }
  }
  if (parsed.path.empty()) {
    std::cerr << "forge " << command << ": missing MODEL\n" << help;
    return kExitUsage;
  }
  return std::nullopt;
}

// Parses, reads the model and prints what `render` makes of it.
int RunModelCommand(
    absl::string_view command, const char* help, const std::vector<std::string>& args,
    const std::function<absl::StatusOr<std::string>(const forge::v1::Graph&, const ModelArgs&)>&
        render) {
  ModelArgs parsed;
  if (std::optional<int> done = ParseModelArgs(command, help, args, parsed)) return *done;
  absl::StatusOr<forge::v1::Graph> graph = forge::client::ReadModelFile(parsed.path);
  if (!graph.ok()) {
    std::cerr << "forge " << command << ": " << graph.status().message() << "\n";
    return kExitFailed;
  }
  absl::StatusOr<std::string> report = render(*graph, parsed);
  if (!report.ok()) {
    std::cerr << "forge " << command << ": " << parsed.path << ": " << report.status().message()
              << "\n";
    return kExitFailed;
  }
  std::cout << *report;
  return kExitOk;
}

int RunInspect(const std::vector<std::string>& args) {
  return RunModelCommand("inspect", kInspectHelp, args,
                         [](const forge::v1::Graph& graph, const ModelArgs& parsed) {
                           return forge::client::InspectGraph(
                               graph, forge::client::InspectOptions{parsed.gpu, parsed.json});
                         });
}

int RunPredict(const std::vector<std::string>& args) {
  return RunModelCommand("predict", kPredictHelp, args,
                         [](const forge::v1::Graph& graph, const ModelArgs& parsed) {
                           return forge::client::PredictGraph(
                               graph, forge::client::PredictOptions{parsed.gpu, parsed.json});
                         });
}

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

constexpr Subcommand kSubcommands[] = {
    {"inspect", "partition a model graph and show its kernel tasks and roofline floors",
     RunInspect},
    {"predict", "compile each task's default kernels and PREDICT their times (emulated, no GPU)",
     RunPredict},
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
