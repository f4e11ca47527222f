#include "client/forge/cli.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/forge/admin.h"
#include "client/forge/connection.h"
#include "client/forge/exit_code.h"
#include "client/forge/inspect.h"
#include "client/forge/jobs.h"
#include "client/forge/model.h"
#include "client/forge/predict.h"
#include "compiler/cost/learned/cost_predictor.h"
#include "client/forge/results.h"
#include "client/forge/submit.h"
#include "client/forge/watch.h"
#include "common/version/version.h"
#include "compiler/codegen/family.h"

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

enum class FlagKind { kSwitch, kText, kInteger, kRepeated };

// One flag of a command: a FlagOnly key of the command's ConfigSchema.
struct Flag {
  const char* name;        // "name" for --name
  FlagKind kind;
  const char* value_name;  // shown in the help; nullptr for a switch
  const char* help;
  const char* default_value = "";  // kText only
  char short_name = 0;             // e.g. 'o' for -o
};

Flag Switch(const char* name, const char* help) {
  return {.name = name, .kind = FlagKind::kSwitch, .value_name = nullptr, .help = help};
}
Flag Text(const char* name, const char* value_name, const char* help,
          const char* default_value = "", char short_name = 0) {
  return {.name = name,
          .kind = FlagKind::kText,
          .value_name = value_name,
          .help = help,
          .default_value = default_value,
          .short_name = short_name};
}
// An int32 value.
Flag Integer(const char* name, const char* value_name, const char* help) {
  return {.name = name, .kind = FlagKind::kInteger, .value_name = value_name, .help = help};
}
Flag Repeated(const char* name, const char* value_name, const char* help) {
  return {.name = name, .kind = FlagKind::kRepeated, .value_name = value_name, .help = help};
}

const Flag kJsonFlag = Switch("json", "print JSON instead of text");
const Flag kGpuFlag =
    Text("gpu", "NAME", "GPU whose ceilings to use: h200 (default), h100, a100, ...", "h200");

struct Command;

// A command being run: its parsed command line and where to print.
struct Call {
  const Command& command;
  const CommandLine& line;
  std::ostream& out;
  std::ostream& err;

  const Config& config() const { return line.config; }
  const std::vector<std::string>& positional() const { return line.config.positional_args(); }
  bool Has(absl::string_view flag) const { return line.config.IsSet(flag); }
  bool Switch(absl::string_view flag) const { return line.config.GetBool(flag); }
  const std::string& Get(absl::string_view flag) const { return line.config.GetString(flag); }
};

struct Command {
  const char* name;
  const char* summary;
  const char* usage;
  const char* description;
  std::vector<Flag> flags;
  int min_positional;
  int max_positional;  // -1: any number
  bool remote;         // talks to a coordinator: takes the connection settings
  int (*run)(const Call& call);
};

ConfigSchema CommandSchema(const Command& command) {
  ConfigSchema schema;
  for (const Flag& flag : command.flags) {
    switch (flag.kind) {
      case FlagKind::kSwitch:
        schema.Bool(flag.name, false, flag.help);
        break;
      case FlagKind::kText:
        schema.String(flag.name, flag.default_value, flag.help);
        break;
      case FlagKind::kInteger:
        schema.Int64(flag.name, 0, flag.help,
                     {.min = std::numeric_limits<int32_t>::min(),
                      .max = std::numeric_limits<int32_t>::max()});
        break;
      case FlagKind::kRepeated:
        schema.StringList(flag.name, flag.help);
        break;
    }
    schema.FlagOnly();
    if (flag.short_name != 0) schema.ShortFlag(flag.short_name);
  }
  if (command.remote) AddConnectionKeys(schema);
  return schema;
}

std::string CommandHelp(const Command& command) {
  std::string help = absl::StrCat("usage: ", command.usage, "\n\n", command.description, "\n");
  if (!command.flags.empty()) absl::StrAppend(&help, "\nflags:\n");
  for (const Flag& flag : command.flags) {
    const std::string spelled = absl::StrCat(
        flag.short_name != 0 ? absl::StrCat("-", std::string(1, flag.short_name), ", ") : "", "--",
        flag.name, flag.value_name != nullptr ? absl::StrCat(" ", flag.value_name) : "");
    absl::StrAppendFormat(&help, "  %-24s %s%s\n", spelled, flag.help,
                          flag.kind == FlagKind::kRepeated ? " (repeatable)" : "");
  }
  if (command.remote) {
    absl::StrAppend(&help, "\nconnection (flags > FORGE_* environment > config file):\n");
    ConfigSchema connection;
    AddConnectionKeys(connection);
    for (const ConfigSchema::Key& key : connection.keys()) {
      absl::StrAppendFormat(
          &help, "  %-24s %s (env %s)\n",
          absl::StrCat("--", key.name, key.type == ConfigType::kBool ? "" : " VALUE"), key.help,
          key.env_name);
    }
  }
  return absl::StrCat(help, "\n", kExitCodesHelp);
}

// Prints the error of a failed command and returns its exit code.
int Fail(const Call& call, const absl::Status& status) {
  call.err << "forge " << call.command.name << ": " << status.message() << "\n";
  return ExitCodeFor(status);
}

int UsageFailure(const Call& call, absl::string_view message) {
  call.err << "forge " << call.command.name << ": " << message << "\n";
  return kExitUsage;
}

// Connects with the command line's connection settings; prints why not and sets `exit_code`.
std::unique_ptr<JobClient> Connect(const Call& call, int& exit_code) {
  absl::StatusOr<ConnectionSettings> settings =
      LoadCommandConnectionSettings(CommandSchema(call.command), call.line.args);
  if (!settings.ok()) {
    exit_code = UsageFailure(call, settings.status().message());
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<JobClient>> client = JobClient::Connect(*settings);
  if (!client.ok()) {
    exit_code = Fail(call, client.status());
    return nullptr;
  }
  return *std::move(client);
}

// Prints the command's output or its error.
int Print(const Call& call, const absl::StatusOr<std::string>& output) {
  if (!output.ok()) return Fail(call, output.status());
  call.out << *output << std::flush;
  return kExitOk;
}

int RunLocalModelCommand(const Call& call,
                         const std::function<absl::StatusOr<std::string>(
                             const forge::v1::Graph&, const std::string&, bool)>& render) {
  absl::StatusOr<forge::v1::Graph> graph = ReadModelFile(call.positional()[0]);
  if (!graph.ok()) return Fail(call, graph.status());
  return Print(call, render(*graph, call.Get("gpu"), call.Switch("json")));
}

int RunInspect(const Call& call) {
  return RunLocalModelCommand(call, [](const auto& graph, const auto& gpu, bool json) {
    return InspectGraph(graph, InspectOptions{gpu, json});
  });
}

// With --learned, the coordinator's learned performance model for the GPU (CostModelService).
int RunPredict(const Call& call) {
  cost::CostPredictor learned;
  PredictOptions options;
  options.gpu = call.Get("gpu");
  options.json = call.Switch("json");
  options.explain = call.Switch("explain");
  options.transfer_from = call.Get("transfer-from");
  if (!options.transfer_from.empty() && !call.Switch("learned")) {
    return UsageFailure(call, "--transfer-from needs --learned (it transfers a learned model)");
  }
  if (call.Switch("learned")) {
    int exit_code = 0;
    std::unique_ptr<JobClient> client = Connect(call, exit_code);
    if (client == nullptr) return exit_code;
    forge::v1::GetCostModelRequest request;
    request.set_gpu(options.transfer_from.empty() ? options.gpu : options.transfer_from);
    absl::StatusOr<forge::v1::GetCostModelResponse> response = client->GetCostModel(request);
    if (!response.ok()) return Fail(call, response.status());
    if (absl::StatusOr<bool> installed = learned.Install(*response); !installed.ok()) {
      return Fail(call, installed.status());
    }
    options.learned = &learned;
    options.learned_origin = absl::StrCat("coordinator ", client->address(),
                                          response->space().empty()
                                              ? std::string()
                                              : absl::StrCat(", ", response->space()));
  }
  return RunLocalModelCommand(call, [&options](const auto& graph, const auto&, bool) {
    return PredictGraph(graph, options);
  });
}

// How `forge watch` renders: JSON lines when asked, the live view on a terminal, else log lines.
WatchOptions WatchOptionsFor(const Call& call) {
  WatchOptions options;
  options.gpu = call.Get("gpu");
  if (call.Switch("json")) {
    options.output = WatchOutput::kJsonLines;
  } else if (!call.Switch("plain") && &call.out == &std::cout && isatty(STDOUT_FILENO)) {
    options.output = WatchOutput::kTerminal;
    winsize size{};
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
      options.terminal_width = size.ws_col;
      options.max_task_rows = std::max(5, size.ws_row - 8);
    }
  }
  return options;
}

int RunSubmit(const Call& call) {
  SubmitOptions options;
  options.max_candidate_trials = call.config().GetInt64("budget");
  options.max_wall_seconds = call.config().GetInt64("max-seconds");
  options.priority = static_cast<int32_t>(call.config().GetInt64("priority"));
  const char* user = std::getenv("USER");
  options.owner = call.Has("owner") ? call.Get("owner") : (user == nullptr ? "" : user);
  absl::StatusOr<std::string> arch = ResolveTargetArch(call.Get("arch"));
  absl::StatusOr<std::map<std::string, std::string>> labels =
      ParseLabels(call.config().GetStringList("label"));
  if (!arch.ok() || !labels.ok()) {
    return UsageFailure(call, (arch.ok() ? labels.status() : arch.status()).message());
  }
  options.target_arch = *arch;
  options.labels = *labels;
  absl::StatusOr<std::vector<std::string>> paths = ExpandModelPaths(call.positional());
  if (!paths.ok()) return Fail(call, paths.status());
  if (call.Switch("check")) {  // intake's checks only: nothing is sent, no coordinator needed
    for (const std::string& path : *paths) {
      if (absl::Status status = CheckModel(path, options); !status.ok()) {
        return Fail(call, absl::Status(status.code(), absl::StrCat(path, ": ", status.message())));
      }
      call.out << path << ": passes the coordinator's intake checks\n";
    }
    return kExitOk;
  }

  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(call, exit_code);
  if (client == nullptr) return exit_code;
  std::vector<SubmitOutcome> outcomes = SubmitModels(*client, *paths, options);
  const bool json = call.Switch("json");
  const bool wait = call.Switch("wait");
  const bool follow = wait && !json && outcomes.size() == 1 && outcomes[0].status.ok();
  if (!wait || follow) call.out << RenderSubmitSummary(outcomes, json) << std::flush;
  if (!wait) return SubmitExitCode(outcomes, /*waited=*/false);
  for (SubmitOutcome& outcome : outcomes) {
    if (!outcome.status.ok()) continue;
    absl::StatusOr<forge::v1::Job> ended =
        follow ? FollowJob(*client, outcome.job.id(), WatchOptionsFor(call), call.out)
               : WaitForJob(*client, outcome.job.id());
    if (!ended.ok()) return Fail(call, ended.status());
    outcome.job = *std::move(ended);
  }
  if (!follow) call.out << RenderSubmitSummary(outcomes, json) << std::flush;
  return SubmitExitCode(outcomes, /*waited=*/true);
}

int RunWatch(const Call& call) {
  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(call, exit_code);
  if (client == nullptr) return exit_code;
  absl::StatusOr<forge::v1::Job> job =
      FollowJob(*client, call.positional()[0], WatchOptionsFor(call), call.out);
  if (!job.ok()) return Fail(call, job.status());
  return ExitCodeForJob(*job);
}

int RunStatus(const Call& call) {
  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(call, exit_code);
  if (client == nullptr) return exit_code;
  return Print(call, StatusCommand(*client, call.positional()[0], call.Switch("json")));
}

int RunJobs(const Call& call) {
  forge::v1::ListJobsRequest request;
  for (const std::string& state : call.config().GetStringList("state")) {
    absl::StatusOr<forge::v1::JobState> parsed = ParseJobState(state);
    if (!parsed.ok()) return UsageFailure(call, parsed.status().message());
    request.add_states(*parsed);
  }
  absl::StatusOr<std::map<std::string, std::string>> labels =
      ParseLabels(call.config().GetStringList("label"));
  if (!labels.ok()) return UsageFailure(call, labels.status().message());
  request.set_owner(call.Get("owner"));
  request.mutable_labels()->insert(labels->begin(), labels->end());
  request.set_page_size(static_cast<int32_t>(call.config().GetInt64("page-size")));
  request.set_page_token(call.Get("page-token"));
  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(call, exit_code);
  if (client == nullptr) return exit_code;
  return Print(call, JobsCommand(*client, request, call.Switch("all"), call.Switch("json")));
}

int RunWorkers(const Call& call) {
  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(call, exit_code);
  if (client == nullptr) return exit_code;
  return Print(call, WorkersCommand(*client, call.Switch("all"), call.Switch("json")));
}

int RunCancel(const Call& call) {
  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(call, exit_code);
  if (client == nullptr) return exit_code;
  return Print(call, CancelCommand(*client, call.positional()[0], call.Get("reason"),
                                   call.Switch("json")));
}

int RunPurgeResults(const Call& call) {
  forge::v1::PurgeResultsRequest request;
  request.set_worker_identity(call.Get("worker"));
  request.set_unattributed(call.Switch("unattributed"));
  request.set_candidate_digest(call.Get("candidate"));
  request.set_task_digest(call.Get("task"));
  if (request.worker_identity().empty() && !request.unattributed() &&
      request.candidate_digest().empty() && request.task_digest().empty()) {
    return UsageFailure(call, "purge-results needs --worker, --unattributed, --candidate or --task");
  }
  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(call, exit_code);
  if (client == nullptr) return exit_code;
  return Print(call, PurgeResultsCommand(*client, request, call.Switch("json")));
}

int RunMintToken(const Call& call) {
  for (const char* needed : {"owner", "role", "secret-file"}) {
    if (!call.Has(needed)) return UsageFailure(call, absl::StrCat("mint-token needs --", needed));
  }
  absl::Duration lifetime;
  if (!absl::ParseDuration(call.Get("expires-in"), &lifetime) || lifetime <= absl::ZeroDuration()) {
    return UsageFailure(call, absl::StrCat("--expires-in \"", call.Get("expires-in"),
                                           "\" is not a positive duration (e.g. 12h, 30m)"));
  }
  const TokenClaims claims{.owner = call.Get("owner"),
                           .role = call.Get("role"),
                           .expires = absl::Now() + lifetime,
                           .caps = call.config().GetStringList("cap")};
  return Print(call, MintTokenCommand(call.Get("secret-file"), claims));
}

int RunRevokeToken(const Call& call) {
  forge::v1::RevokeTokenRequest request;
  const int named = call.Has("id") + call.Has("of-token") + call.Has("identity");
  if (named != 1) {
    return UsageFailure(call, "revoke-token needs exactly one of --id, --of-token and --identity");
  }
  if (call.Has("of-token")) {
    absl::StatusOr<std::string> id = TokenId(call.Get("of-token"));
    if (!id.ok()) return Fail(call, id.status());
    request.set_token_id(*id);
  } else {
    request.set_token_id(call.Get("id"));
  }
  request.set_worker_identity(call.Get("identity"));
  request.set_restore(call.Switch("restore"));
  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(call, exit_code);
  if (client == nullptr) return exit_code;
  return Print(call, RevokeTokenCommand(*client, request, call.Switch("json")));
}

// The actions of `forge admin`, with the flags each takes (the others' are refused).
struct AdminAction {
  const char* name;
  std::vector<const char*> flags;
  int (*run)(const Call& call);
};

const std::vector<AdminAction>& AdminActions() {
  static const auto* actions = new std::vector<AdminAction>{
      {"purge-results", {"worker", "unattributed", "candidate", "task", "json"}, RunPurgeResults},
      {"mint-token", {"owner", "role", "expires-in", "cap", "secret-file"}, RunMintToken},
      {"revoke-token", {"id", "of-token", "identity", "restore", "json"}, RunRevokeToken},
  };
  return *actions;
}

int RunAdmin(const Call& call) {
  const std::string& name = call.positional()[0];
  const auto action = std::find_if(AdminActions().begin(), AdminActions().end(),
                                   [&](const AdminAction& a) { return name == a.name; });
  if (action == AdminActions().end()) {
    return UsageFailure(call, absl::StrCat("unknown admin action '", name,
                                           "' (the actions: purge-results, mint-token, revoke-token)"));
  }
  for (const AdminAction& other : AdminActions()) {
    for (const char* flag : other.flags) {
      const bool own = std::find_if(action->flags.begin(), action->flags.end(), [&](const char* f) {
                         return absl::string_view(f) == flag;
                       }) != action->flags.end();
      if (!own && call.Has(flag)) {
        return UsageFailure(call, absl::StrCat("--", flag, " is not a flag of ", name));
      }
    }
  }
  return action->run(call);
}

int RunResults(const Call& call) {
  std::optional<forge::v1::Graph> model;
  if (call.Has("model")) {
    absl::StatusOr<forge::v1::Graph> graph = ReadModelFile(call.Get("model"));
    if (!graph.ok()) return Fail(call, graph.status());
    model = *std::move(graph);
  }
  int exit_code = kExitOk;
  std::unique_ptr<JobClient> client = Connect(call, exit_code);
  if (client == nullptr) return exit_code;
  forge::v1::GetResultsRequest request;
  request.set_job_id(call.positional()[0]);
  request.set_include_all_results(call.Switch("all"));
  absl::StatusOr<forge::v1::GetResultsResponse> results = client->GetResults(request);
  if (!results.ok()) return Fail(call, results.status());
  // The coordinator sends the submitted model along; --model still overrides it (older servers).
  if (!model.has_value() && results->has_graph()) model = results->graph();
  const ResultsOptions options{.gpu = call.Get("gpu")};
  absl::StatusOr<ResultsReport> report = RenderResultsReport(*results, options);
  if (!report.ok()) return Fail(call, report.status());
  const bool json = call.Switch("json");
  if (call.Has("output")) {
    absl::StatusOr<std::vector<std::string>> written = WriteResultsBundle(
        *results, model.has_value() ? &*model : nullptr, options, call.Get("output"));
    if (!written.ok()) return Fail(call, written.status());
    if (!model.has_value()) {
      call.err << "forge " << call.command.name
               << ": plan.json not written: the coordinator sent no model; pass --model PATH "
                  "(the submitted model) for it\n";
    }
    if (!json) {
      call.out << "wrote " << written->size() << " files to " << call.Get("output") << "\n";
      return kExitOk;
    }
  }
  call.out << (json ? report->json : report->markdown) << std::flush;
  return kExitOk;
}

int RunVersion(const Call& call) {
  const VersionInfo info{.program = "forge", .generators = codegen::GeneratorVersions()};
  call.out << (call.Switch("json") ? VersionJson(info) : VersionText(info));
  return kExitOk;
}

int RunHelp(const Call& call);

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
       "forge predict MODEL [--gpu NAME] [--json] [--learned [--transfer-from GPU]] [--explain]",
       "Partitions a model into kernel tasks; for each task generates the default kernel of\n"
       "every applicable family, compiles it with NVRTC for the GPU's architecture and PREDICTS\n"
       "its time with the emulated backend's performance model. No GPU is used: every time is\n"
       "predicted. Prints per kernel: predicted us, roofline floor, % of floor, registers/spill\n"
       "bytes and the model that predicted it; then the best predicted time per task summed\n"
       "over the model against the floors, and the performance model with its measured error\n"
       "on results held back from training, per task family. With --learned the coordinator's\n"
       "learned model for the GPU refines the analytic one (the connection settings say where\n"
       "the coordinator is; without --learned none is contacted).",
       {kGpuFlag, kJsonFlag,
        Switch("learned", "fetch the coordinator's learned performance model for the GPU"),
        Switch("explain", "under each kernel, what drove its prediction (learned: per-feature "
                          "contributions; analytic: the model's account)"),
        Text("transfer-from", "GPU",
             "with --learned: use that GPU's learned model and carry its predictions to --gpu by "
             "the ratio of the two GPUs' ceilings on each kernel's bottleneck (PREDICTED, no "
             "measured error)",
             "")},
       1,
       1,
       true,
       RunPredict},
      {"submit",
       "upload models (only the weights the coordinator lacks) and start one job each",
       "forge submit MODEL... [--wait] [--arch ARCH] [--budget N] [--max-seconds S]\n"
       "                      [--priority P] [--label K=V] [--owner NAME] [--json]",
       "Each MODEL is a .pt2 archive, a directory written by `python -m forge export` (graph.pb,\n"
       "blobs/), or a directory of such models (one job each). Weights the coordinator already\n"
       "stores are not sent again. Prints one row per model and a summary. Every job is labelled\n"
       "model=<model name> unless --label model=... says otherwise.",
       {Switch("wait", "wait for the jobs to end (one job: shown live); exit 1 unless all DONE"),
        Text("arch", "ARCH", "target architecture, e.g. sm_90, or a GPU name (default sm_90)",
             "sm_90"),
        Integer("budget", "N",
                "candidate trials over the job, spread over its tasks by eager time (default 0: "
                "the coordinator's trials per task)"),
        Integer("max-seconds", "S",
                "end the search S seconds after the job starts, keeping each task's best so far "
                "(default 0: no limit)"),
        Integer("priority", "P", "scheduling priority, higher first (default 0)"),
        Repeated("label", "K=V", "label the jobs"),
        Text("owner", "NAME", "owner of the jobs (default $USER)"),
        kGpuFlag,
        Switch("plain", "with --wait: log lines even on a terminal"),
        Switch("check",
               "only run the coordinator's intake checks on each MODEL with these options and "
               "exit (nothing is sent; the Python SDK runs this before it uploads)"),
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
       {kGpuFlag, Switch("plain", "log lines even on a terminal"), kJsonFlag},
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
       {Repeated("state", "STATE", "queued, running, done, failed or cancelled"),
        Text("owner", "NAME", "jobs of this owner"),
        Repeated("label", "K=V", "jobs with this label"),
        Integer("page-size", "N", "jobs per page (the coordinator caps it at 500)"),
        Text("page-token", "T", "the page after the one that printed this token"),
        Switch("all", "every page"),
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
       {Switch("all", "include workers whose heartbeats stopped"), kJsonFlag},
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
       {Text("output", "DIR", "write the bundle into DIR", "", 'o'),
        Text("model", "PATH",
             "the submitted model, for plan.json (checked against the job's digest)"),
        kGpuFlag,
        Switch("all", "fetch every result, not only the best (compares predicted/measured)"),
        kJsonFlag},
       1,
       1,
       true,
       RunResults},
      {"cancel",
       "stop a job; results found so far are kept",
       "forge cancel JOB [--reason TEXT] [--json]",
       "Cancels a queued or running job.",
       {Text("reason", "TEXT", "why, for the job's record", "cancelled with forge cancel"),
        kJsonFlag},
       1,
       1,
       true,
       RunCancel},
      {"admin",
       "administer the coordinator: purge-results, mint-token, revoke-token",
       "forge admin purge-results (--worker ID | --unattributed | --candidate DIGEST |\n"
       "                           --task DIGEST)... [--json]\n"
       "       forge admin mint-token --owner NAME --role ROLE --secret-file PATH\n"
       "                              [--expires-in 24h] [--cap KEY=N]...\n"
       "       forge admin revoke-token (--id ID | --of-token TOKEN | --identity NAME)\n"
       "                                [--restore] [--json]",
       "purge-results removes results from the shared results cache: every result the worker\n"
       "identity ID reported (a worker that reported false numbers), those reported without an\n"
       "identity, or those of one candidate or task; several filters combine with AND. The\n"
       "searches of the tasks that lost results start over from the results left, so no later\n"
       "job gets a best derived from the removed ones. Needs a token of role admin; the\n"
       "coordinator logs each purge. Purging --worker ID also revokes that worker identity:\n"
       "its tokens are refused from then on, so it cannot register or report again.\n\n"
       "mint-token prints a token signed with the coordinator's token secret (its\n"
       "auth.token-secret file): OWNER with ROLE (read, submit, admin or worker) and caps\n"
       "(max-priority=N, max-trials=N, max-wall-seconds=N), valid for --expires-in. It runs\n"
       "locally: whoever can read the secret can mint any token. Each token carries a random id.\n\n"
       "revoke-token refuses one token before it expires: by its --id, or --of-token TOKEN\n"
       "(its id is read here: a signed token's id, or a digest of a token file's token), or\n"
       "every token of the worker identity NAME (--identity); --restore lets it back. Every\n"
       "coordinator of the Redis refuses it within auth.revocation-cache (1 s). Needs an admin\n"
       "token; the coordinator logs each change.",
       {Text("worker", "ID", "purge-results: results this worker identity reported"),
        Switch("unattributed", "purge-results: results reported without a worker identity"),
        Text("candidate", "DIGEST", "purge-results: results of this candidate"),
        Text("task", "DIGEST", "purge-results: results of this task"),
        kJsonFlag,
        Text("owner", "NAME", "mint-token: the token's owner"),
        Text("role", "ROLE", "mint-token: read, submit, admin or worker"),
        Text("expires-in", "DURATION", "mint-token: how long the token is valid", "24h"),
        Repeated("cap", "KEY=N", "mint-token: a cap, as in a token file"),
        Text("secret-file", "PATH", "mint-token: the coordinator's auth.token-secret file"),
        Text("id", "ID", "revoke-token: the id of the token to refuse"),
        Text("of-token", "TOKEN", "revoke-token: the token to refuse (its id is sent)"),
        Text("identity", "NAME", "revoke-token: the worker identity whose tokens to refuse"),
        Switch("restore", "revoke-token: let the token or identity back instead")},
       1,
       1,
       true,
       RunAdmin},
      {"version",
       "print the version of forge and of its kernel generators",
       "forge version [--json]   (or forge --version [--json])",
       "Prints the version (the project's, with the git commit it was built from) and the\n"
       "versions of the kernel generators, which decide which workers can take a job's\n"
       "candidates. --json prints them as one JSON object.",
       {kJsonFlag},
       0,
       0,
       false,
       RunVersion},
      {"help",
       "describe the commands, or one command",
       "forge help [COMMAND]",
       "Without a command, lists the commands; with one, describes it (as forge COMMAND --help).",
       {},
       0,
       1,
       false,
       RunHelp},
  };
  return *commands;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& command : Commands()) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

std::string Help() {
  std::string help = "usage: forge COMMAND [ARGS...]\n\ncommands:\n";
  for (const Command& command : Commands()) {
    absl::StrAppendFormat(&help, "  %-8s %s\n", command.name, command.summary);
  }
  absl::StrAppend(&help,
                  "\n'forge help COMMAND' (or 'forge COMMAND --help') describes a command. Remote "
                  "commands find\nthe coordinator with --server, FORGE_SERVER or `server = "
                  "\"HOST:PORT\"` in ~/.config/forge/config.\n\n",
                  kExitCodesHelp);
  return help;
}

// "forge: unknown command 'x' (did you mean 'y'?)", for a name that is no command.
std::string UnknownCommand(absl::string_view name) {
  std::optional<std::string> closest = ClosestName(name, CommandNames());
  return absl::StrCat("forge: unknown command '", name, "'",
                      closest.has_value() ? absl::StrCat(" (did you mean '", *closest, "'?)") : "",
                      "\n'forge --help' lists the commands.\n");
}

int RunHelp(const Call& call) {
  if (call.positional().empty()) {
    call.out << Help();
    return kExitOk;
  }
  const Command* command = FindCommand(call.positional()[0]);
  if (command == nullptr) {
    call.err << UnknownCommand(call.positional()[0]);
    return kExitUsage;
  }
  call.out << CommandHelp(*command);
  return kExitOk;
}

ParsedCommandLine UsageError(const Command& command, absl::string_view message) {
  return {.exit_code = kExitUsage,
          .err = absl::StrCat("forge ", command.name, ": ", message, "\n\n",
                              CommandHelp(command))};
}

}  // namespace

std::vector<std::string> CommandNames() {
  std::vector<std::string> names;
  for (const Command& command : Commands()) names.emplace_back(command.name);
  return names;
}

ParsedCommandLine ParseCommandLine(const std::vector<std::string>& args,
                                   const std::optional<std::vector<std::string>>& environment) {
  if (args.empty()) return {.exit_code = kExitUsage, .err = Help()};
  std::string name = args[0];
  if (name == "--help" || name == "-h") return {.exit_code = kExitOk, .out = Help()};
  if (name == "--version") name = "version";
  const Command* command = FindCommand(name);
  if (command == nullptr) return {.exit_code = kExitUsage, .err = UnknownCommand(name)};
  std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const std::string& arg : rest) {
    if (arg == "--") break;
    if (arg == "--help" || arg == "-h") return {.exit_code = kExitOk, .out = CommandHelp(*command)};
  }
  absl::StatusOr<Config> config =
      Config::Load(CommandSchema(*command), {.environment = environment, .args = rest});
  if (!config.ok()) return UsageError(*command, config.status().message());
  const int count = static_cast<int>(config->positional_args().size());
  if (count < command->min_positional) return UsageError(*command, "missing arguments");
  if (command->max_positional >= 0 && count > command->max_positional) {
    return UsageError(*command, absl::StrCat("unexpected argument '",
                                             config->positional_args()[command->max_positional],
                                             "'"));
  }
  std::string warnings;
  for (const std::string& warning : config->warnings()) absl::StrAppend(&warnings, warning, "\n");
  return {.command_line = CommandLine{.command = command->name,
                                      .args = std::move(rest),
                                      .config = *std::move(config)},
          .err = std::move(warnings)};
}

int RunForge(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const ParsedCommandLine parsed = ParseCommandLine(args);
  out << parsed.out;
  err << parsed.err;
  if (!parsed.command_line.has_value()) return parsed.exit_code;
  const Command& command = *FindCommand(parsed.command_line->command);
  return command.run(
      Call{.command = command, .line = *parsed.command_line, .out = out, .err = err});
}

}  // namespace forge::client
