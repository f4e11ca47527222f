// forge: the command-line client. One table of commands, each with its flags; this file parses the
// command line and calls the command's library function (inspect.h, predict.h, submit.h,
// watch.h, jobs.h, results.h), which does the work.
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "client/forge/connection.h"
#include "client/forge/exit_code.h"
#include "client/forge/inspect.h"
#include "client/forge/jobs.h"
#include "client/forge/model.h"
#include "client/forge/predict.h"
#include "client/forge/results.h"
#include "client/forge/submit.h"
#include "client/forge/watch.h"

namespace forge::client {
namespace {

constexpr char kExitCodesHelp[] =
    "exit codes:\n"
    "  0  success\n"
    "  1  the job FAILED or was CANCELLED (watch, submit --wait)\n"
    "  2  bad command line or connection settings\n"
    "  3  the coordinator is unreachable or did not answer in time\n"
    "  4  not found: job, model file or GPU name\n"
    "  5  any other error\n";

struct Flag {
  const char* name;        // "--name"
  const char* value_name;  // nullptr for a flag without a value
  const char* help;
  bool repeatable = false;
  char short_name = 0;  // e.g. 'o' for -o
};

// A parsed command line: positional arguments, flag values by name (the last one counts unless
// the flag is repeatable), and the connection flags, kept as written for LoadConnectionSettings.
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> values;
  std::vector<std::string> connection_flags;

  bool Has(const std::string& name) const { return values.contains(name); }
  std::string Get(const std::string& name, const std::string& fallback = "") const {
    auto found = values.find(name);
    return found == values.end() ? fallback : found->second.back();
  }
  std::vector<std::string> All(const std::string& name) const {
    auto found = values.find(name);
    return found == values.end() ? std::vector<std::string>{} : found->second;
  }
};

struct Command {
  const char* name;
  const char* summary;
  const char* usage;
  const char* description;
  std::vector<Flag> flags;
  int min_positional;
  int max_positional;  // -1: any number
  bool remote;         // talks to a coordinator: takes the connection flags
  int (*run)(const std::string& name, const Args& args);
};

const Flag kJsonFlag{"json", nullptr, "print JSON instead of text"};
const Flag kGpuFlag{"gpu", "NAME", "GPU whose ceilings to use: h200 (default), h100, a100, ..."};

std::string CommandHelp(const Command& command) {
  std::string help = absl::StrCat("usage: ", command.usage, "\n\n", command.description, "\n");
  if (!command.flags.empty()) absl::StrAppend(&help, "\nflags:\n");
  for (const Flag& flag : command.flags) {
    const std::string spelled = absl::StrCat(
        flag.short_name != 0 ? absl::StrCat("-", std::string(1, flag.short_name), ", ") : "", "--",
        flag.name, flag.value_name != nullptr ? absl::StrCat(" ", flag.value_name) : "");
    absl::StrAppendFormat(&help, "  %-24s %s%s\n", spelled, flag.help,
                          flag.repeatable ? " (repeatable)" : "");
  }
  if (command.remote) {
    absl::StrAppend(&help, "\nconnection (flags > FORGE_* environment > config file):\n");
    for (const ConnectionFlag& flag : ConnectionFlags()) {
      absl::StrAppendFormat(&help, "  %-24s %s\n",
                            absl::StrCat("--", flag.name, flag.takes_value ? " VALUE" : ""),
                            flag.help);
    }
  }
  return absl::StrCat(help, "\n", kExitCodesHelp);
}

int UsageError(const Command& command, absl::string_view message) {
  std::cerr << "forge " << command.name << ": " << message << "\n\n" << CommandHelp(command);
  return kExitUsage;
}

// Parses `argv` for `command`; an exit code when the command is done (help, usage error).
std::optional<int> Parse(const Command& command, const std::vector<std::string>& argv, Args& args) {
  bool flags_ended = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (flags_ended || arg == "-" || !absl::StartsWith(arg, "-")) {
      args.positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_ended = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      std::cout << CommandHelp(command);
      return kExitOk;
    }
    std::string name;
    std::optional<std::string> inline_value;
    if (absl::StartsWith(arg, "--")) {
      name = arg.substr(2);
      if (size_t equals = name.find('='); equals != std::string::npos) {
        inline_value = name.substr(equals + 1);
        name = name.substr(0, equals);
      }
    } else {
      for (const Flag& flag : command.flags) {
        if (arg.size() == 2 && flag.short_name == arg[1]) name = flag.name;
      }
      if (name.empty()) return UsageError(command, absl::StrCat("unknown flag ", arg));
    }
    if (command.remote) {
      const auto& connection = ConnectionFlags();
      auto found = std::find_if(connection.begin(), connection.end(),
                                [&](const ConnectionFlag& flag) { return name == flag.name; });
      if (found != connection.end()) {
        args.connection_flags.push_back(arg);
        if (found->takes_value && !inline_value.has_value()) {
          if (i + 1 >= argv.size()) return UsageError(command, absl::StrCat(arg, " needs a value"));
          args.connection_flags.push_back(argv[++i]);
        }
        continue;
      }
    }
    auto flag = std::find_if(command.flags.begin(), command.flags.end(),
                             [&](const Flag& candidate) { return name == candidate.name; });
    if (flag == command.flags.end()) return UsageError(command, absl::StrCat("unknown flag ", arg));
    std::string value = "true";
    if (flag->value_name != nullptr) {
      if (inline_value.has_value()) {
        value = *inline_value;
      } else if (i + 1 < argv.size()) {
        value = argv[++i];
      } else {
        return UsageError(command, absl::StrCat(arg, " needs a value (", flag->value_name, ")"));
      }
    } else if (inline_value.has_value()) {
      return UsageError(command, absl::StrCat("--", name, " takes no value"));
    }
    std::vector<std::string>& values = args.values[name];
    if (!flag->repeatable) values.clear();
    values.push_back(std::move(value));
  }
  const int count = static_cast<int>(args.positional.size());
  if (count < command.min_positional) {
    return UsageError(command, "missing arguments");
  }
  if (command.max_positional >= 0 && count > command.max_positional) {
    return UsageError(command, absl::StrCat("unexpected argument '",
                                            args.positional[command.max_positional], "'"));
  }
  return std::nullopt;
}

// Prints the error of a failed command and returns its exit code.
int Fail(const std::string& command, const absl::Status& status) {
  std::cerr << "forge " << command << ": " << status.message() << "\n";
  return ExitCodeFor(status);
}

// Parses an integer flag into `out`; false, with the reason in `error`, when it is not one.
template <typename Int>
bool IntFlag(const Args& args, const std::string& name, Int& out, std::string& error) {
  if (!args.Has(name)) return true;
  if (absl::SimpleAtoi(args.Get(name), &out)) return true;
  error = absl::StrCat("--", name, " \"", args.Get(name), "\" is not an integer");
  return false;
}

// Connects with the command line's connection flags; prints why not and sets `exit_code`.
std::unique_ptr<JobClient> Connect(const std::string& command, const Args& args, int& exit_code) {
  absl::StatusOr<ConnectionSettings> settings = LoadConnectionSettings(args.connection_flags);
  if (!settings.ok()) {
    std::cerr << "forge " << command << ": " << settings.status().message() << "\n";
    exit_code = kExitUsage;
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<JobClient>> client = JobClient::Connect(*settings);
  if (!client.ok()) {
    exit_code = Fail(command, client.status());
    return nullptr;
  }
  return *std::move(client);
}

// Prints the command's output or its error.
int Print(const std::string& command, const absl::StatusOr<std::string>& output) {
  if (!output.ok()) return Fail(command, output.status());
  std::cout << *output << std::flush;
  return kExitOk;
}

int RunLocalModelCommand(const std::string& name, const Args& args,
                         const std::function<absl::StatusOr<std::string>(
                             const forge::v1::Graph&, const std::string&, bool)>& render) {
  absl::StatusOr<forge::v1::Graph> graph = ReadModelFile(args.positional[0]);
  if (!graph.ok()) return Fail(name, graph.status());
  return Print(name, render(*graph, args.Get("gpu", "h200"), args.Has("json")));
}

int RunInspect(const std::string& name, const Args& args) {
  return RunLocalModelCommand(name, args, [](const auto& graph, const auto& gpu, bool json) {
    return InspectGraph(graph, InspectOptions{gpu, json});
  });
}

int RunPredict(const std::string& name, const Args& args) {
  return RunLocalModelCommand(name, args, [](const auto& graph, const auto& gpu, bool json) {
    return PredictGraph(graph, PredictOptions{gpu, json});
  });
}

// How `forge watch` renders: JSON lines when asked, the live view on a terminal, else log lines.
WatchOptions WatchOptionsFor(const Args& args) {
  WatchOptions options;
  options.gpu = args.Get("gpu", "h200");
  if (args.Has("json")) {
    options.output = WatchOutput::kJsonLines;
  } else if (!args.Has("plain") && isatty(STDOUT_FILENO)) {
    options.output = WatchOutput::kTerminal;
    winsize size{};
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
      options.terminal_width = size.ws_col;
      options.max_task_rows = std::max(5, size.ws_row - 8);
    }
  }
  return options;
}

int RunSubmit(const std::string& name, const Args& args) {
  SubmitOptions options;
  std::string error;
  if (!IntFlag(args, "budget", options.max_candidate_trials, error) ||
      !IntFlag(args, "max-seconds", options.max_wall_seconds, error) ||
      !IntFlag(args, "priority", options.priority, error)) {
    std::cerr << "forge " << name << ": " << error << "\n";
    return kExitUsage;
  }
  const char* user = std::getenv("USER");
  options.owner = args.Get("owner", user == nullptr ? "" : user);
  absl::StatusOr<std::string> arch = ResolveTargetArch(args.Get("arch", "sm_90"));
  absl::StatusOr<std::map<std::string, std::string>> labels = ParseLabels(args.All("label"));
  if (!arch.ok() || !labels.ok()) {
    std::cerr << "forge " << name << ": " << (arch.ok() ? labels.status() : arch.status()).message()
              << "\n";
    return kExitUsage;
  }
  options.target_arch = *arch;
  options.labels = *labels;
  absl::StatusOr<std::vector<std::string>> paths = ExpandModelPaths(args.positional);
  if (!paths.ok()) return Fail(name, paths.status());

  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(name, args, exit_code);
  if (client == nullptr) return exit_code;
  std::vector<SubmitOutcome> outcomes = SubmitModels(*client, *paths, options);
  const bool json = args.Has("json");
  const bool wait = args.Has("wait");
  const bool follow = wait && !json && outcomes.size() == 1 && outcomes[0].status.ok();
  if (!wait || follow) std::cout << RenderSubmitSummary(outcomes, json) << std::flush;
  if (!wait) return SubmitExitCode(outcomes, /*waited=*/false);
  for (SubmitOutcome& outcome : outcomes) {
    if (!outcome.status.ok()) continue;
    absl::StatusOr<forge::v1::Job> ended =
        follow ? FollowJob(*client, outcome.job.id(), WatchOptionsFor(args), std::cout)
               : WaitForJob(*client, outcome.job.id());
    if (!ended.ok()) return Fail(name, ended.status());
    outcome.job = *std::move(ended);
  }
  if (!follow) std::cout << RenderSubmitSummary(outcomes, json) << std::flush;
  return SubmitExitCode(outcomes, /*waited=*/true);
}

int RunWatch(const std::string& name, const Args& args) {
  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(name, args, exit_code);
  if (client == nullptr) return exit_code;
  absl::StatusOr<forge::v1::Job> job =
      FollowJob(*client, args.positional[0], WatchOptionsFor(args), std::cout);
  if (!job.ok()) return Fail(name, job.status());
  return ExitCodeForJob(*job);
}

int RunStatus(const std::string& name, const Args& args) {
  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(name, args, exit_code);
  if (client == nullptr) return exit_code;
  return Print(name, StatusCommand(*client, args.positional[0], args.Has("json")));
}

int RunJobs(const std::string& name, const Args& args) {
  forge::v1::ListJobsRequest request;
  for (const std::string& state : args.All("state")) {
    absl::StatusOr<forge::v1::JobState> parsed = ParseJobState(state);
    if (!parsed.ok()) {
      std::cerr << "forge " << name << ": " << parsed.status().message() << "\n";
      return kExitUsage;
    }
    request.add_states(*parsed);
  }
  absl::StatusOr<std::map<std::string, std::string>> labels = ParseLabels(args.All("label"));
  int32_t page_size = 0;
  std::string error;
  if (!labels.ok()) error = std::string(labels.status().message());
  if (!labels.ok() || !IntFlag(args, "page-size", page_size, error)) {
    std::cerr << "forge " << name << ": " << error << "\n";
    return kExitUsage;
  }
  request.set_owner(args.Get("owner"));
  request.mutable_labels()->insert(labels->begin(), labels->end());
  request.set_page_size(page_size);
  request.set_page_token(args.Get("page-token"));
  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(name, args, exit_code);
  if (client == nullptr) return exit_code;
  return Print(name, JobsCommand(*client, request, args.Has("all"), args.Has("json")));
}

int RunWorkers(const std::string& name, const Args& args) {
  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(name, args, exit_code);
  if (client == nullptr) return exit_code;
  return Print(name, WorkersCommand(*client, args.Has("all"), args.Has("json")));
}

int RunCancel(const std::string& name, const Args& args) {
  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(name, args, exit_code);
  if (client == nullptr) return exit_code;
  return Print(name,
               CancelCommand(*client, args.positional[0],
                             args.Get("reason", "cancelled with forge cancel"), args.Has("json")));
}

int RunResults(const std::string& name, const Args& args) {
  std::optional<forge::v1::Graph> model;
  if (args.Has("model")) {
    absl::StatusOr<forge::v1::Graph> graph = ReadModelFile(args.Get("model"));
    if (!graph.ok()) return Fail(name, graph.status());
    model = *std::move(graph);
  }
  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(name, args, exit_code);
  if (client == nullptr) return exit_code;
  forge::v1::GetResultsRequest request;
  request.set_job_id(args.positional[0]);
  request.set_include_all_results(args.Has("all"));
  absl::StatusOr<forge::v1::GetResultsResponse> results = client->GetResults(request);
  if (!results.ok()) return Fail(name, results.status());
  // The coordinator sends the submitted model along; --model still overrides it (older servers).
  if (!model.has_value() && results->has_graph()) model = results->graph();
  const ResultsOptions options{.gpu = args.Get("gpu", "h200")};
  absl::StatusOr<ResultsReport> report = RenderResultsReport(*results, options);
  if (!report.ok()) return Fail(name, report.status());
  if (args.Has("output")) {
    absl::StatusOr<std::vector<std::string>> written = WriteResultsBundle(
        *results, model.has_value() ? &*model : nullptr, options, args.Get("output"));
    if (!written.ok()) return Fail(name, written.status());
    if (!model.has_value()) {
      std::cerr << "forge " << name
                << ": plan.json not written: the coordinator sent no model; pass --model PATH "
                   "(the submitted model) for it\n";
    }
    if (!args.Has("json")) {
      std::cout << "wrote " << written->size() << " files to " << args.Get("output") << "\n";
      return kExitOk;
    }
  }
  std::cout << (args.Has("json") ? report->json : report->markdown) << std::flush;
  return kExitOk;
}

const std::vector<Command>& Commands() {
  static const auto* commands = new std::vector<Command>{
      {"inspect",
       "partition a model and show its kernel tasks and roofline floors",
       "forge inspect MODEL [--gpu NAME] [--json]",
       "Partitions a model (a .pt2 archive, a directory written by `python -m forge export`, or\n"
       "a forge.v1.Graph file) into kernel tasks and prints each task: digest, family, ops,\n"
       "shapes, GFLOP, MB, roofline floor on the GPU and occurrences, then totals.",
       {kGpuFlag, kJsonFlag},
       1,
       1,
       false,
       RunInspect},
      {"predict",
       "compile each task's default kernels and PREDICT their times (no GPU)",
       "forge predict MODEL [--gpu NAME] [--json]",
       "Partitions a model into kernel tasks; for each task generates the default kernel of\n"
       "every applicable family, compiles it with NVRTC for the GPU's architecture and PREDICTS\n"
       "its time with the emulated backend's performance model. No GPU is used: every time is\n"
       "predicted. Prints per kernel: predicted us, roofline floor, % of floor, registers/spill\n"
       "bytes; then the best predicted time per task summed over the model against the floors.",
       {kGpuFlag, kJsonFlag},
       1,
       1,
       false,
       RunPredict},
      {"submit",
       "upload models (only the weights the coordinator lacks) and start one job each",
       "forge submit MODEL... [--wait] [--arch ARCH] [--budget N] [--max-seconds S] [--priority P]\n"
       "                      [--label K=V] [--owner NAME] [--json]",
       "Each MODEL is a .pt2 archive, a directory written by `python -m forge export` (graph.pb,\n"
       "blobs/), or a directory of such models (one job each). Weights the coordinator already\n"
       "stores are not sent again. Prints one row per model and a summary. Every job is labelled\n"
       "model=<model name> unless --label model=... says otherwise.",
       {{"wait", nullptr, "wait for the jobs to end (one job: shown live); exit 1 unless all DONE"},
        {"arch", "ARCH", "target architecture, e.g. sm_90, or a GPU name (default sm_90)"},
        {"budget", "N",
         "candidate trials over the job, spread over its tasks by eager time (default 0: the "
         "coordinator's trials per task)"},
        {"max-seconds", "S",
         "end the search S seconds after the job starts, keeping each task's best so far "
         "(default 0: no limit)"},
        {"priority", "P", "scheduling priority, higher first (default 0)"},
        {"label", "K=V", "label the jobs", true},
        {"owner", "NAME", "owner of the jobs (default $USER)"},
        kGpuFlag,
        {"plain", nullptr, "with --wait: log lines even on a terminal"},
        kJsonFlag},
       1,
       -1,
       true,
       RunSubmit},
      {"watch",
       "follow a job live until it ends",
       "forge watch JOB [--gpu NAME] [--plain] [--json]",
       "Follows a job's events until it ends. On a terminal the view is redrawn in place:\n"
       "progress bar, candidates per second, per task the best time, speedup over eager, % of\n"
       "the roofline floor and the bottleneck (memory- or compute-bound, and how much of that\n"
       "ceiling it reaches). Otherwise one line per event; --json gives one JobEvent per line.\n"
       "PREDICTED times (emulated backend, no GPU) are marked. Exit code 0 when the job ends\n"
       "DONE, 1 when it FAILED or was CANCELLED.",
       {kGpuFlag, {"plain", nullptr, "log lines even on a terminal"}, kJsonFlag},
       1,
       1,
       true,
       RunWatch},
      {"status",
       "show one job",
       "forge status JOB [--json]",
       "Prints a job's state, progress, options and times.",
       {kJsonFlag},
       1,
       1,
       true,
       RunStatus},
      {"jobs",
       "list jobs, newest first",
       "forge jobs [--state S] [--owner NAME] [--label K=V] [--page-size N] [--page-token T]\n"
       "           [--all] [--json]",
       "Lists the jobs matching every filter given, a page at a time (50 by default).",
       {{"state", "STATE", "queued, running, done, failed or cancelled", true},
        {"owner", "NAME", "jobs of this owner"},
        {"label", "K=V", "jobs with this label", true},
        {"page-size", "N", "jobs per page (the coordinator caps it at 500)"},
        {"page-token", "T", "the page after the one that printed this token"},
        {"all", nullptr, "every page"},
        kJsonFlag},
       0,
       0,
       true,
       RunJobs},
      {"workers",
       "list the coordinator's GPU workers",
       "forge workers [--all] [--json]",
       "Lists the workers the coordinator knows, live ones first; emulated GPUs (PREDICTED\n"
       "times) are marked.",
       {{"all", nullptr, "include workers whose heartbeats stopped"}, kJsonFlag},
       0,
       0,
       true,
       RunWorkers},
      {"results",
       "write a job's result bundle: kernels, plan, report, plots",
       "forge results JOB [-o DIR] [--model PATH] [--gpu NAME] [--all] [--json]",
       "Fetches a job's results. With -o, writes the bundle: tasks/<task>/kernel.cu (the\n"
       "winner regenerated from its candidate) and candidate.json (launch, schedule,\n"
       "measurement, judge evidence), plan.json (needs --model), report.md, report.json,\n"
       "speedup.png and roofline.png. Prints report.md (or report.json with --json).\n"
       "PREDICTED times are labelled as such in every file.",
       {{"output", "DIR", "write the bundle into DIR", false, 'o'},
        {"model", "PATH", "the submitted model, for plan.json (checked against the job's digest)"},
        kGpuFlag,
        {"all", nullptr, "fetch every result, not only the best (compares predicted/measured)"},
        kJsonFlag},
       1,
       1,
       true,
       RunResults},
      {"cancel",
       "stop a job; results found so far are kept",
       "forge cancel JOB [--reason TEXT] [--json]",
       "Cancels a queued or running job.",
       {{"reason", "TEXT", "why, for the job's record"}, kJsonFlag},
       1,
       1,
       true,
       RunCancel},
  };
  return *commands;
}

std::string Help() {
  std::string help = "usage: forge COMMAND [ARGS...]\n\ncommands:\n";
  for (const Command& command : Commands()) {
    absl::StrAppendFormat(&help, "  %-8s %s\n", command.name, command.summary);
  }
  absl::StrAppend(&help,
                  "\n'forge COMMAND --help' describes a command. Remote commands find the "
                  "coordinator\nwith --server, FORGE_SERVER or `server = \"HOST:PORT\"` in "
                  "~/.config/forge/config.\n\n",
                  kExitCodesHelp);
  return help;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << Help();
    return kExitUsage;
  }
  const absl::string_view name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    std::cout << Help();
    return kExitOk;
  }
  for (const Command& command : Commands()) {
    if (name != command.name) continue;
    Args args;
    if (std::optional<int> done = Parse(command, {argv + 2, argv + argc}, args)) return *done;
    return command.run(command.name, args);
  }
  std::cerr << "forge: unknown command '" << name << "'\n" << Help();
  return kExitUsage;
}

}  // namespace
}  // namespace forge::client

int main(int argc, char** argv) { return forge::client::Main(argc, argv); }
