// forge-worker: the GPU worker daemon. Registers with a coordinator, leases candidates, generates,
// compiles, judges and times them on this machine's GPUs (or predicts them on emulated GPUs) and
// reports the results. Settings come from flags, FORGE_* variables and a config file
// (common/config); --help lists them, --version prints the build's version. SIGTERM or SIGINT stops
// it gracefully: no more leases, unstarted candidates go back to the coordinator, in-flight ones
// finish within shutdown.grace
// and are reported, then it exits 0. A worker that emulates its GPU fetches the coordinator's
// learned performance model every cost-model.poll (cost_model_fetcher.h) and predicts with it.
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/config/config.h"
#include "common/config/program.h"
#include "common/logging/logging.h"
#include "common/metrics/exposer.h"
#include "common/metrics/metrics.h"
#include "common/tls/tls.h"
#include "common/version/version.h"
#include "compiler/codegen/family.h"
#include "worker/compile/catalog_client.h"
#include "worker/compile/compile_pool.h"
#include "worker/daemon/cost_model_fetcher.h"
#include "worker/daemon/emulated_executor.h"
#include "worker/daemon/gpu_executor.h"
#include "worker/daemon/worker_daemon.h"
#include "worker/judge/sanitizer.h"

namespace forge::daemon {
namespace {

constexpr char kFallbackGpu[] = "H200";

ConfigSchema Schema() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ConfigSchema schema;
  schema.String("config", "", "Path of a config file; its values sit below env and flags.")
      .String("coordinator", "", "The coordinator's WorkerService, HOST:PORT (required).")
      .String("emulate", "",
              "Emulate GPUs of this name from the arch table (e.g. H200, A100) instead of using "
              "real ones; every result is then PREDICTED. Empty: real GPUs when present, else "
              "emulated H200s.")
      .Int64("gpus", 1, "How many GPUs to emulate (with --emulate, or when no GPU is found).",
             {.min = 1, .max = 64})
      .Int64("compile-threads", cores,
             "Threads that generate and compile candidates (NVRTC, or one nvcc process each).",
             {.min = 1, .max = 1024})
      .String("compile-cache-dir", "",
              "Directory that keeps compiled cubins and shared objects across restarts; empty "
              "keeps them in memory.")
      .String("compile.nvcc", compile::DefaultNvccPath(),
              "The nvcc that builds host-launched (CUTLASS) candidates into shared objects.")
      .String("compile.cutlass-include", compile::DefaultCutlassInclude(),
              "CUTLASS's include directory for those builds (default: the headers the build "
              "found, scripts/setup's pinned CUTLASS); empty: none.")
      .Duration("compile.nvcc-timeout", absl::Minutes(10),
                "Longest one nvcc build may take before it is killed (a CUTLASS configuration "
                "takes ~45 s on one core).")
      .Bool("compile.catalog", true,
            "Look compiled objects up in the coordinator's fleet-wide catalog before compiling, "
            "and publish what this worker compiles (publishing needs a worker token).")
      .Bool("compile.catalog-cubins", false,
            "Also NVRTC cubins (shared objects always go through the catalog when it is on).")
      .String("worker-id", "",
              "Id to register with; reuse it across restarts. Empty: the coordinator assigns one.")
      .String("hostname", "", "Host name to register with; empty: this machine's.")
      .Bool("tls", false, "Reach the coordinator over TLS.")
      .String("tls-ca", "", "PEM roots that sign the coordinator's certificate; empty: system's.")
      .String("tls-cert", "", "PEM client certificate, when the coordinator wants one (mTLS).")
      .String("tls-key", "", "PEM private key of tls-cert.")
      .String("token", "", "The worker's bearer token (role worker); needs tls.")
      .Int64("metrics.port", 0, "HTTP port of /metrics; 0 serves none.", {.min = 0, .max = 65535})
      .Alias("metrics-port")
      .String("metrics.host", "0.0.0.0", "Address /metrics listens on.")
      .Alias("metrics-host")
      .String("sandbox-child", "",
              "The forge-sandbox-child executable; empty: the one next to this binary.")
      .String("judge.compute-sanitizer", "",
              "The compute-sanitizer that checks each result that would become its task's best "
              "(memcheck, racecheck, synccheck, initcheck); empty: the one on $PATH, else in "
              "$CUDA_HOME/bin, else /usr/local/cuda/bin. Without one, such results are reported "
              "unsanitized and the coordinator makes none of them a best.")
      .Int64("max-candidates-per-lease", 0,
             "Most candidates per Lease call; 0: as the coordinator allows.",
             {.min = 0, .max = 100000})
      .Duration("cost-model.poll", absl::Seconds(30),
                "How often an emulating worker fetches the coordinator's learned performance "
                "model (forge.v1.CostModelService); 0: never, the analytic model only.")
      .Duration("shutdown.grace", absl::Seconds(10),
                "Time in-flight candidates get to finish after SIGTERM.")
      .Alias("shutdown-grace");
  return AddLogOptions(schema);
}

std::string ThisHostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

// forge-sandbox-child next to this executable; in the build tree, where it was built.
std::string DefaultSandboxChild() {
  char self[PATH_MAX] = {};
  const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string path(self, length > 0 ? static_cast<size_t>(length) : 0);
  path = absl::StrCat(path.substr(0, path.rfind('/') + 1), "forge-sandbox-child");
#ifdef FORGE_SANDBOX_CHILD_IN_BUILD_TREE
  if (access(path.c_str(), X_OK) != 0) return FORGE_SANDBOX_CHILD_IN_BUILD_TREE;
#endif
  return path;
}

absl::StatusOr<std::vector<std::unique_ptr<Executor>>> EmulatedLanes(
    const std::string& gpu_name, int count, compile::CompilePool* pool,
    const cost::CostPredictor* learned) {
  std::vector<std::unique_ptr<Executor>> lanes;
  for (int index = 0; index < count; ++index) {
    absl::StatusOr<std::unique_ptr<EmulatedExecutor>> lane =
        EmulatedExecutor::Create(gpu_name, index, pool, learned);
    if (!lane.ok()) return lane.status();
    lanes.push_back(*std::move(lane));
  }
  return lanes;
}

// Real GPUs when the driver finds any; otherwise emulated ones, loudly, predicting with `learned`.
absl::StatusOr<std::vector<std::unique_ptr<Executor>>> Lanes(const Config& config,
                                                             compile::CompilePool* pool,
                                                             const cost::CostPredictor* learned) {
  auto log = GetLogger("worker");
  const int emulated_count = static_cast<int>(config.GetInt64("gpus"));
  if (const std::string& emulate = config.GetString("emulate"); !emulate.empty()) {
    log->info("emulating {} x {} (--emulate): results are PREDICTED, not measured",
              emulated_count, emulate);
    return EmulatedLanes(emulate, emulated_count, pool, learned);
  }
  absl::StatusOr<std::vector<gpu::DeviceProperties>> devices = DiscoverGpus();
  if (!devices.ok()) {
    log->warn("NO GPU: {}. Emulating {} x {} instead: every result of this worker is PREDICTED "
              "by the performance model, none is measured. Pass --emulate to choose the GPU.",
              devices.status().ToString(), emulated_count, kFallbackGpu);
    return EmulatedLanes(kFallbackGpu, emulated_count, pool, learned);
  }
  std::string sandbox_child = config.GetString("sandbox-child");
  if (sandbox_child.empty()) sandbox_child = DefaultSandboxChild();
  GpuExecutorOptions options;
  options.sandbox_child = sandbox_child;
  if (absl::StatusOr<std::string> sanitizer =
          judge::FindComputeSanitizer(config.GetString("judge.compute-sanitizer"));
      sanitizer.ok()) {
    options.compute_sanitizer = *sanitizer;
    log->info("compute-sanitizer {} checks every result that would become its task's best",
              *sanitizer);
  } else {
    log->warn("NOT SANITIZED: {}. Results that would become a task's best carry no "
              "compute-sanitizer evidence, and the coordinator makes none of them a best "
              "(--judge.compute-sanitizer=PATH names the tool).",
              std::string(sanitizer.status().message()));
  }
  std::vector<std::unique_ptr<Executor>> lanes;
  for (const gpu::DeviceProperties& device : *devices) {
    if (!TableEntryForDevice(device.name).ok()) {
      log->warn("GPU {} ({}) is not in the arch table: its measurements carry no roofline floor",
                device.ordinal, device.name);
    }
    absl::StatusOr<std::unique_ptr<GpuExecutor>> lane =
        GpuExecutor::Create(device, options, pool);
    if (!lane.ok()) return lane.status();
    log->info("GPU {}: {} ({}, {} SMs), sandbox child {}", device.ordinal, device.name,
              device.arch(), device.sm_count, sandbox_child);
    lanes.push_back(*std::move(lane));
  }
  return lanes;
}

int Run(int argc, char** argv) {
  int exit_code = 0;
  const std::optional<Config> config = LoadProgramConfig(
      Schema(), {argv + 1, argv + argc},
      {.about = "forge-worker: the Forge GPU worker daemon.",
       .version_text =
           VersionText({.program = "forge-worker", .generators = codegen::GeneratorVersions()})},
      std::cout, std::cerr, &exit_code);
  if (!config.has_value()) return exit_code;
  if (config->GetString("coordinator").empty()) {
    std::cerr << "config: coordinator is required (--coordinator=HOST:PORT or FORGE_COORDINATOR)\n";
    return 2;
  }
  if (absl::Status logging = InitLogging(LogOptionsFrom(*config)); !logging.ok()) {
    std::cerr << logging.message() << "\n";
    return 2;
  }
  auto log = GetLogger("worker");

  // Every thread started from here on inherits the mask, so the signals reach only sigwait below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ClientCredentials({.tls = config->GetBool("tls"),
                         .ca_file = config->GetString("tls-ca"),
                         .cert_file = config->GetString("tls-cert"),
                         .key_file = config->GetString("tls-key"),
                         .token = config->GetString("token")});
  if (!credentials.ok()) {
    log->critical("{}", credentials.status().ToString());
    return 2;
  }
  auto registry = std::make_shared<metrics::Registry>();

  const int compile_threads = static_cast<int>(config->GetInt64("compile-threads"));
  std::shared_ptr<compile::ObjectCatalog> catalog;
  if (config->GetBool("compile.catalog")) {
    catalog = std::make_shared<compile::CatalogClient>(compile::CatalogClientOptions{
        .coordinator = config->GetString("coordinator"), .credentials = *credentials});
  }
  absl::StatusOr<std::unique_ptr<compile::CompilePool>> pool = compile::CompilePool::Create(
      {.threads = compile_threads,
       .disk_cache_dir = config->GetString("compile-cache-dir"),
       .nvcc_path = config->GetString("compile.nvcc"),
       .cutlass_include = config->GetString("compile.cutlass-include"),
       .nvcc_timeout = config->GetDuration("compile.nvcc-timeout"),
       .catalog = catalog,
       .catalog_cubins = config->GetBool("compile.catalog-cubins"),
       .registry = registry.get()});
  if (!pool.ok()) {
    log->critical("{}", pool.status().ToString());
    return 1;
  }
  // The learned performance model of the emulated GPU, kept current by the fetcher below.
  cost::CostPredictor learned;
  absl::StatusOr<std::vector<std::unique_ptr<Executor>>> lanes =
      Lanes(*config, pool->get(), &learned);
  if (!lanes.ok()) {
    log->critical("{}", lanes.status().ToString());
    return 1;
  }
  std::unique_ptr<CostModelFetcher> fetcher;
  if (const absl::Duration poll = config->GetDuration("cost-model.poll");
      poll > absl::ZeroDuration() && !lanes->empty() && lanes->front()->gpu().emulated()) {
    fetcher = std::make_unique<CostModelFetcher>(
        CostModelFetcherOptions{.coordinator = config->GetString("coordinator"),
                                .credentials = *credentials,
                                .interval = poll},
        std::vector<FetchedModel>{{lanes->front()->gpu().name(), &learned}});
    fetcher->Start();
  }
  std::string hostname = config->GetString("hostname");
  if (hostname.empty()) hostname = ThisHostname();
  absl::StatusOr<std::unique_ptr<WorkerDaemon>> daemon = WorkerDaemon::Create(
      {.coordinator = config->GetString("coordinator"),
       .credentials = *credentials,
       .worker_id = config->GetString("worker-id"),
       .hostname = hostname,
       .compile_threads = compile_threads,
       .max_candidates_per_lease = static_cast<int>(config->GetInt64("max-candidates-per-lease")),
       .shutdown_grace = config->GetDuration("shutdown.grace")},
      *std::move(lanes), registry.get());
  if (!daemon.ok()) {
    log->critical("{}", daemon.status().ToString());
    return 1;
  }

  std::unique_ptr<metrics::MetricsExposer> exposer;
  if (const int64_t metrics_port = config->GetInt64("metrics.port"); metrics_port != 0) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsExposer>> started =
        metrics::MetricsExposer::Start(
            absl::StrCat(config->GetString("metrics.host"), ":", metrics_port));
    if (!started.ok()) {
      log->critical("{}", started.status().ToString());
      return 1;
    }
    exposer = *std::move(started);
    exposer->AddRegistry(registry);
    log->info("metrics on {}:{}/metrics", config->GetString("metrics.host"), exposer->port());
  }

  // Run returns only after Stop, so this thread has always finished by then.
  std::thread signal_waiter([&stop_signals, &daemon, &log] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    LogWithFields(*log, spdlog::level::info, "signal: stopping", {{"signal", strsignal(signal)}});
    (*daemon)->Stop();
  });
  (*daemon)->Run();
  signal_waiter.join();
  return 0;
}

}  // namespace
}  // namespace forge::daemon

int main(int argc, char** argv) { return forge::daemon::Run(argc, argv); }
