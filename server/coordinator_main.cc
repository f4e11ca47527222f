// forge-coordinator: serves JobService (clients) and WorkerService (GPU workers) over gRPC, runs
// the scheduler and the searches, keeps jobs, leases and results in Redis and weight blobs on disk,
// and exposes /metrics. Settings come from flags, FORGE_* variables and a config file
// (common/config); --help lists them, --version prints the build's version. SIGTERM or SIGINT
// stops it gracefully: new calls are refused, calls in flight get shutdown.grace to finish.
//
// Security (docs/ARCHITECTURE.md, "Security model"): TLS with tls.cert/tls.key (mTLS with
// tls.client-ca), bearer tokens from auth.tokens and tokens signed with auth.token-secret
// (server/auth/auth.h). Without TLS it listens only
// on loopback unless --insecure; without tokens every caller is anonymous (warned at start). The
// grpc.health.v1 service is NOT_SERVING while Redis is unreachable; --probe=HOST:PORT checks it
// (exit 0 when SERVING) with the same TLS settings, for container probes.
//
// Garbage collection (server/sweeper.h): every gc.interval one coordinator of those sharing the
// Redis removes ended jobs older than gc.job-retention, lets graphs no job names expire and
// removes weight blobs no job names older than gc.blob-grace, and keeps the results cache within
// gc.max-results.
//
// The learned performance model (server/cost_model_trainer.h): every cost-model.interval the
// coordinator trains a new version of cost-model.space's model when cost-model.retrain-every new
// measured results arrived (and there are enough), stores it in Redis, and loads the newest
// version (its own or another coordinator's) into the search prior. forge.v1.CostModelService
// serves it to workers and `forge predict --learned` (server/cost_model_service.h).
//
// The compiled-object catalog (server/compiled_catalog): objects workers compiled, under
// catalog.dir, served to every worker by WorkerService (FetchCompiledObject, PublishCompiledObject);
// catalog.max-object-bytes and catalog.max-total-bytes bound it; catalog.enabled=false: none.
#include <pthread.h>
#include <signal.h>

#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/config/config.h"
#include "common/config/program.h"
#include "common/logging/logging.h"
#include "common/metrics/exposer.h"
#include "common/metrics/metrics.h"
#include "common/redis/redis_client.h"
#include "common/tls/tls.h"
#include "common/version/version.h"
#include "compiler/codegen/family.h"
#include "grpcpp/grpcpp.h"
#include "server/auth/auth.h"
#include "server/revocation/revocation.h"
#include "server/blob_store.h"
#include "server/compiled_catalog/compiled_catalog.h"
#include "server/cost_model_store.h"
#include "server/cost_model_service.h"
#include "server/cost_model_trainer.h"
#include "server/health/health.h"
#include "server/job_service.h"
#include "server/job_store.h"
#include "server/result_cache.h"
#include "server/scheduler.h"
#include "server/sweeper.h"
#include "server/worker_service.h"

namespace forge::server {
namespace {

// A submitted graph travels in one message; large models' graphs exceed gRPC's 4 MiB default.
constexpr int kMaxMessageBytes = 64 << 20;

ConfigSchema Schema() {
  ConfigSchema schema;
  schema.String("config", "", "Path of a config file; its values sit below env and flags.")
      .String("listen", "127.0.0.1:0",
              "gRPC address HOST:PORT; port 0 picks a free one (printed at startup).")
      .String("tls.cert", "", "PEM certificate chain to serve TLS with; empty: plaintext.")
      .String("tls.key", "", "PEM private key of tls.cert.")
      .String("tls.client-ca", "",
              "PEM roots of client certificates (mTLS); a presented certificate must verify.")
      .Bool("tls.require-client-cert", false, "Refuse clients without a certificate (mTLS).")
      .Bool("insecure", false, "Allow plaintext gRPC on a non-loopback listen address.")
      .String("auth.tokens", "",
              "Token file: lines \"TOKEN OWNER ROLE [caps]\"; empty: no authentication.")
      .String("auth.token-secret", "",
              "File of the secret (32+ bytes) that signs tokens `forge admin mint-token` makes; "
              "empty: no signed tokens.")
      .Duration("auth.revocation-cache", absl::Seconds(1),
                "How long revoked tokens are read from Redis once for (forge admin revoke-token "
                "through another coordinator takes this long to apply here).")
      .Duration("health.interval", absl::Seconds(1), "How often Redis is pinged for health.")
      .String("probe", "",
              "Check the health of the coordinator at HOST:PORT and exit (0: SERVING).")
      .String("probe.ca", "", "PEM roots that sign the coordinator's certificate, for --probe.")
      .String("probe.server-name", "", "Name to check the certificate against, for --probe.")
      .String("redis.host", "127.0.0.1", "Host of Redis.")
      .Int64("redis.port", 6379, "TCP port of Redis.", {.min = 1, .max = 65535})
      .String("redis.password", "", "Password for Redis AUTH; empty for none.")
      .Duration("redis.timeout", absl::Seconds(2), "Longest wait for a reply from Redis.")
      .String("blobs.dir", "forge-blobs", "Directory that holds uploaded weight blobs.")
      .Bool("catalog.enabled", true,
            "Keep the compiled-object catalog: objects workers compiled, served to every worker. "
            "Off: workers compile for themselves.")
      .String("catalog.dir", "",
              "Directory of the catalog's objects; empty: blobs.dir/catalog (beside the blobs' "
              "files, on the same volume).")
      .Int64("catalog.max-object-bytes", CompiledCatalogOptions().max_object_bytes,
             "Largest compiled object a worker may publish.",
             {.min = 1, .max = kMaxMessageBytes - (1 << 20)})
      .Int64("catalog.max-total-bytes", CompiledCatalogOptions().max_total_bytes,
             "Largest total of the catalog's objects; publishes past it are refused.", {.min = 1})
      .String("metrics.listen", "127.0.0.1:0",
              "HTTP address of /metrics; port 0 picks a free one; empty serves none.")
      .Duration("metrics.refresh", absl::Seconds(5),
                "How often the jobs-by-state gauge is read from Redis.")
      .Duration("watch.wait", absl::Seconds(1),
                "Longest a WatchJob call blocks in Redis before checking on its caller.")
      .Duration("lease.duration", absl::Seconds(30),
                "How long a lease lasts without a report or a heartbeat naming it.")
      .Duration("heartbeat.interval", absl::Seconds(1),
                "Heartbeat interval workers are told to keep (cancellations reach them this fast).")
      .Int64("lease.max-candidates", 32, "Most candidates one lease holds.",
             {.min = 1, .max = 4096})
      .Alias("lease.max_candidates")
      .Int64("search.trials-per-task", 24,
             "Trials per searchable task for jobs that set no budget.", {.min = 1, .max = 1 << 20})
      .Alias("search.trials_per_task")
      .Int64("search.min-trials-per-task", 4, "Least trials any task gets.",
             {.min = 1, .max = 1 << 20})
      .Alias("search.min_trials_per_task")
      .Int64("search.seed", 1, "Seed of every search's random choices.", {.min = 0})
      .Int64("search.cheap-first-per-task", SchedulerOptions().cheap_first_per_task,
             "Cheap results (no nvcc compile) every task of a job records before the job's "
             "expensive (nvcc) candidates are leased.",
             {.min = 0, .max = 1 << 20})
      .Int64("search.expensive-compile-percent", SchedulerOptions().expensive_compile_percent,
             "While a job has cheap candidates left, the most of a worker's compile threads "
             "(percent, at least one thread) its expensive (nvcc) candidates may hold.",
             {.min = 1, .max = 100})
      .Duration("scheduler.tick", absl::Milliseconds(250),
                "How often leases are checked for expiry, queued jobs started, searches saved.")
      .Duration("gc.interval", absl::Minutes(10),
                "How often ended jobs, unnamed graphs and unreferenced blobs are collected.")
      .Duration("gc.job-retention", SweeperOptions().job_retention,
                "How long an ended job's state, events and results stay readable.")
      .Duration("gc.model-grace", SweeperOptions().model_grace,
                "How long a graph no job names stays (more than gc.interval).")
      .Duration("gc.blob-grace", SweeperOptions().blob_grace,
                "How old a weight blob no job names must be before it is removed.")
      .Int64("gc.max-results", SweeperOptions().max_results,
             "Most results the cache keeps; the least recently read go first (0: no bound).",
             {.min = 0})
      .String("cost-model.space", "NVIDIA H200",
              "GPU (product name, as workers report it) whose measured results train the learned "
              "performance model of the search prior; empty: the analytic prior alone.")
      .Duration("cost-model.interval", absl::Minutes(1),
                "How often the learned performance model is retrained when due and reloaded.")
      .Int64("cost-model.retrain-every", CostModelTrainerOptions().retrain_every,
             "New measured results that make the next version of the learned performance model.",
             {.min = 1})
      .Duration("shutdown.grace", absl::Seconds(5),
                "Time calls in flight get to finish after SIGTERM.")
      .Int64("intake.max-graph-bytes", IntakeLimits().max_graph_bytes,
             "Largest serialized graph SubmitJob accepts.", {.min = 1, .max = kMaxMessageBytes})
      .Int64("intake.max-nodes", IntakeLimits().max_nodes, "Most nodes of a submitted graph.",
             {.min = 1})
      .Int64("intake.max-tensor-bytes", IntakeLimits().max_tensor_bytes,
             "Largest tensor (bytes its strides span) of a submitted graph.", {.min = 1})
      .Int64("intake.max-weight-bytes", IntakeLimits().max_weight_bytes,
             "Most bytes of parameters, buffers and constants per job.", {.min = 0})
      .Int64("intake.max-trials", IntakeLimits().max_candidate_trials,
             "Largest options.budget.max_candidate_trials a job may ask for.", {.min = 1})
      .Int64("intake.max-wall-seconds", IntakeLimits().max_wall_seconds,
             "Largest options.budget.max_wall_seconds a job may ask for.", {.min = 1})
      .Int64("intake.max-priority", IntakeLimits().max_priority,
             "Jobs' priorities must lie within plus or minus this.", {.min = 0, .max = 1 << 30})
      .Int64("intake.max-active-jobs-per-owner", IntakeLimits().max_active_jobs_per_owner,
             "Jobs one owner may have queued or running (0: no limit; admins are exempt).",
             {.min = 0});
  return AddLogOptions(schema);
}

// Calls `step` every `period`, on a thread of its own, until destroyed.
class Periodically {
 public:
  Periodically(absl::Duration period, std::function<void()> step)
      : thread_([this, period, step = std::move(step)] {
          while (!stop_.WaitForNotificationWithTimeout(period)) step();
        }) {}
  ~Periodically() {
    stop_.Notify();
    thread_.join();
  }

 private:
  absl::Notification stop_;
  std::thread thread_;
};

// Keeps forge_coordinator_jobs{state} current from the per-state counts in Redis.
class JobGaugeRefresher {
 public:
  JobGaugeRefresher(JobStore* jobs, metrics::Family<metrics::Gauge>* gauges, absl::Duration period)
      : thread_([this, jobs, gauges, period] {
          do {
            absl::StatusOr<std::map<forge::v1::JobState, int64_t>> counts = jobs->CountByState();
            if (!counts.ok()) {
              GetLogger("coordinator")->warn("reading job counts: {}", counts.status().ToString());
              continue;
            }
            for (const auto& [state, count] : *counts) {
              const std::string name = absl::AsciiStrToLower(
                  absl::StripPrefix(forge::v1::JobState_Name(state), "JOB_STATE_"));
              gauges->Add({{"state", name}}).Set(static_cast<double>(count));
            }
          } while (!stop_.WaitForNotificationWithTimeout(period));
        }) {}
  ~JobGaugeRefresher() {
    stop_.Notify();
    thread_.join();
  }

 private:
  absl::Notification stop_;
  std::thread thread_;
};

// --probe: the exit code of a health check (0 SERVING, 1 otherwise), for container probes. Over
// TLS when probe.ca is set; with tls.cert/tls.key as the client certificate when mTLS is on.
int Probe(const Config& config) {
  const bool tls = !config.GetString("probe.ca").empty();
  const bool mtls = tls && !config.GetString("tls.client-ca").empty();
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ClientCredentials({.tls = tls,
                         .ca_file = config.GetString("probe.ca"),
                         .cert_file = mtls ? config.GetString("tls.cert") : "",
                         .key_file = mtls ? config.GetString("tls.key") : ""});
  if (!credentials.ok()) {
    std::cerr << credentials.status().message() << "\n";
    return 1;
  }
  grpc::ChannelArguments arguments;
  if (const std::string& name = config.GetString("probe.server-name"); !name.empty()) {
    arguments.SetSslTargetNameOverride(name);
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(config.GetString("probe"), *credentials, arguments);
  absl::StatusOr<bool> serving = CheckHealth(*channel, absl::Seconds(5));
  if (!serving.ok()) {
    std::cerr << serving.status().ToString() << "\n";
    return 1;
  }
  std::cout << (*serving ? "SERVING" : "NOT_SERVING") << std::endl;
  return *serving ? 0 : 1;
}

int Run(int argc, char** argv) {
  int exit_code = 0;
  const std::optional<Config> config = LoadProgramConfig(
      Schema(), {argv + 1, argv + argc},
      {.about = "forge-coordinator: the Forge job and worker services.",
       .version_text = VersionText(
           {.program = "forge-coordinator", .generators = codegen::GeneratorVersions()})},
      std::cout, std::cerr, &exit_code);
  if (!config.has_value()) return exit_code;
  if (absl::Status logging = InitLogging(LogOptionsFrom(*config)); !logging.ok()) {
    std::cerr << logging.message() << "\n";
    return 2;
  }
  if (!config->GetString("probe").empty()) return Probe(*config);
  auto log = GetLogger("coordinator");

  // Credentials before anything else starts, so that a bad setting fails fast.
  const std::string listen = config->GetString("listen");
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = ServerCredentials(
      {.cert = config->GetString("tls.cert"),
       .key = config->GetString("tls.key"),
       .client_ca = config->GetString("tls.client-ca"),
       .require_client_cert = config->GetBool("tls.require-client-cert")},
      listen, config->GetBool("insecure"));
  if (!credentials.ok()) {
    log->critical("{}", std::string(credentials.status().message()));
    return 2;
  }
  if (config->GetDuration("gc.model-grace") <= config->GetDuration("gc.interval")) {
    // A job submitted during a sweep may name a graph the sweep lets expire; the next sweep
    // keeps it, if it comes before the graph expires.
    log->critical("gc.model-grace ({}) must be longer than gc.interval ({})",
                  absl::FormatDuration(config->GetDuration("gc.model-grace")),
                  absl::FormatDuration(config->GetDuration("gc.interval")));
    return 2;
  }
  const bool tls = !config->GetString("tls.cert").empty();
  if (!tls) {
    log->warn("serving plaintext gRPC on {}: anyone who can reach it can read the traffic; set "
              "tls.cert and tls.key outside loopback development",
              listen);
  }
  Authenticator auth;
  if (const std::string& tokens = config->GetString("auth.tokens"); !tokens.empty()) {
    absl::StatusOr<Authenticator> loaded = Authenticator::FromFile(tokens);
    if (!loaded.ok()) {
      log->critical("{}", std::string(loaded.status().message()));
      return 2;
    }
    auth = *std::move(loaded);
    log->info("authentication on: {} token(s) from {}", auth.size(), tokens);
  }
  if (const std::string& secret_file = config->GetString("auth.token-secret");
      !secret_file.empty()) {
    absl::StatusOr<std::string> secret = ReadTokenSecret(secret_file);
    if (!secret.ok()) {
      log->critical("{}", std::string(secret.status().message()));
      return 2;
    }
    auth.AcceptSignedTokens(*std::move(secret));
    log->info("authentication on: tokens signed with the secret in {}", secret_file);
  }
  if (auth.open()) {
    log->warn("no auth.tokens: every caller is anonymous and may submit, read and cancel any job "
              "and act as any worker (loopback development only)");
  }

  // Every thread started from here on inherits the mask, so the signals reach only sigwait below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const RedisClientOptions redis_options{
      .host = config->GetString("redis.host"),
      .port = static_cast<int>(config->GetInt64("redis.port")),
      .command_timeout = config->GetDuration("redis.timeout"),
      .password = config->GetString("redis.password")};
  RedisClient redis(redis_options);
  // The scheduler loads its state from Redis, which may still be starting or loading its AOF;
  // without Redis after a minute, Scheduler::Create below fails and the coordinator exits.
  for (int attempt = 0; attempt < 120; ++attempt) {
    absl::StatusOr<RedisReply> pong = redis.Command({"PING"});
    if (pong.ok()) break;
    if (attempt == 0) log->warn("waiting for redis: {}", pong.status().ToString());
    absl::SleepFor(absl::Milliseconds(500));
  }
  absl::StatusOr<std::unique_ptr<BlobStore>> blobs =
      BlobStore::Open(&redis, config->GetString("blobs.dir"));
  if (!blobs.ok()) {
    log->critical("{}", blobs.status().ToString());
    return 1;
  }
  // Revoked tokens and worker identities (forge admin revoke-token, purges), on every call.
  if (!auth.open()) {
    auth.CheckRevocations(
        std::make_shared<Revocations>(&redis, config->GetDuration("auth.revocation-cache")));
  }
  // The catalog's metrics go to the coordinator's registry, made here for it.
  auto registry = std::make_shared<metrics::Registry>();
  std::unique_ptr<CompiledCatalog> catalog;
  std::string catalog_dir = config->GetString("catalog.dir");
  if (catalog_dir.empty()) catalog_dir = absl::StrCat(config->GetString("blobs.dir"), "/catalog");
  if (config->GetBool("catalog.enabled")) {
    absl::StatusOr<std::unique_ptr<CompiledCatalog>> opened = CompiledCatalog::Open(
        &redis, catalog_dir,
        {.max_object_bytes = config->GetInt64("catalog.max-object-bytes"),
         .max_total_bytes = config->GetInt64("catalog.max-total-bytes")},
        registry.get());
    if (!opened.ok()) {
      log->critical("{}", opened.status().ToString());
      return 1;
    }
    catalog = *std::move(opened);
  }
  JobStore jobs(&redis);
  // With authentication, results no authenticated worker reported are not served.
  ResultCache results(&redis, /*attributed_only=*/!auth.open());

  SchedulerOptions scheduler_options;
  scheduler_options.lease_duration = config->GetDuration("lease.duration");
  scheduler_options.heartbeat_interval = config->GetDuration("heartbeat.interval");
  scheduler_options.max_candidates_per_lease =
      static_cast<int>(config->GetInt64("lease.max-candidates"));
  scheduler_options.default_trials_per_task = config->GetInt64("search.trials-per-task");
  scheduler_options.min_trials_per_task = config->GetInt64("search.min-trials-per-task");
  scheduler_options.search.seed = static_cast<uint64_t>(config->GetInt64("search.seed"));
  scheduler_options.cheap_first_per_task =
      static_cast<int>(config->GetInt64("search.cheap-first-per-task"));
  scheduler_options.expensive_compile_percent =
      static_cast<int>(config->GetInt64("search.expensive-compile-percent"));
  scheduler_options.generator_versions = codegen::GeneratorVersions();
  // The learned model over the analytic prior; the analytic prior until one is trained.
  const std::string cost_model_space = config->GetString("cost-model.space");
  cost::CostPredictor learned_prior;
  if (!cost_model_space.empty()) scheduler_options.search.learned_prior = &learned_prior;
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler =
      Scheduler::Create(&redis, &jobs, &results, registry.get(), scheduler_options);
  if (!scheduler.ok()) {
    log->critical("loading the scheduler: {}", scheduler.status().ToString());
    return 1;
  }
  const IntakeLimits intake{
      .max_graph_bytes = config->GetInt64("intake.max-graph-bytes"),
      .max_nodes = config->GetInt64("intake.max-nodes"),
      .max_tensor_bytes = config->GetInt64("intake.max-tensor-bytes"),
      .max_weight_bytes = config->GetInt64("intake.max-weight-bytes"),
      .max_candidate_trials = config->GetInt64("intake.max-trials"),
      .max_wall_seconds = config->GetInt64("intake.max-wall-seconds"),
      .max_priority = static_cast<int32_t>(config->GetInt64("intake.max-priority")),
      .max_active_jobs_per_owner = config->GetInt64("intake.max-active-jobs-per-owner")};
  JobService service(&jobs, blobs->get(), scheduler->get(), registry.get(),
                     {.watch_redis = redis_options,
                      .watch_wait = config->GetDuration("watch.wait"),
                      .intake = intake,
                      .auth = auth,
                      .catalog = catalog.get()});
  WorkerService worker_service(scheduler->get(), service.rpc_counter(), registry.get(), auth,
                               catalog.get());
  Periodically ticker(config->GetDuration("scheduler.tick"), [&scheduler] {
    if (absl::Status ticked = (*scheduler)->Tick(); !ticked.ok()) {
      GetLogger("scheduler")->warn("tick: {}", ticked.ToString());
    }
  });
  Sweeper sweeper(&redis, &jobs, blobs->get(), &results, registry.get(),
                  {.job_retention = config->GetDuration("gc.job-retention"),
                   .model_grace = config->GetDuration("gc.model-grace"),
                   .blob_grace = config->GetDuration("gc.blob-grace"),
                   .max_results = config->GetInt64("gc.max-results"),
                   .lock_ttl = SweeperOptions().lock_ttl});
  Periodically sweeps(config->GetDuration("gc.interval"), [&sweeper] {
    if (absl::StatusOr<SweepStats> swept = sweeper.Sweep(absl::Now()); !swept.ok()) {
      GetLogger("coordinator")->warn("sweep: {}", swept.status().ToString());
    }
  });
  CostModelStore cost_models(&redis);
  CostModelTrainer trainer(&redis, &results, &cost_models,
                           {.retrain_every = config->GetInt64("cost-model.retrain-every")});
  // Workers and `forge predict` fetch the models (server/cost_model_service.h).
  CostModelService cost_model_service(
      &cost_models,
      cost_model_space.empty() ? std::vector<std::string>{}
                               : std::vector<std::string>{cost_model_space},
      auth);
  std::optional<Periodically> training;
  if (!cost_model_space.empty()) {
    training.emplace(config->GetDuration("cost-model.interval"), [&] {
      auto cost_log = GetLogger("cost-model");
      if (absl::StatusOr<TrainOutcome> outcome = trainer.MaybeTrain(cost_model_space);
          !outcome.ok()) {
        cost_log->warn("training: {}", outcome.status().ToString());
      } else if (outcome->trained) {
        cost_log->info("{}: {}", cost_model_space, outcome->reason);
      }
      absl::StatusOr<int64_t> version = cost_models.Version(cost_model_space);
      if (!version.ok() || *version == learned_prior.model_version()) return;
      absl::StatusOr<std::optional<cost::VersionedModel>> model = cost_models.Get(cost_model_space);
      if (!model.ok()) {
        cost_log->warn("loading version {}: {}", *version, model.status().ToString());
        return;
      }
      learned_prior.SetModel(*std::move(model));
      cost_log->info("{}: the search prior uses version {} ({})", cost_model_space,
                     learned_prior.model_version(),
                     learned_prior.UsesLearnedModel() ? "learned" : "analytic: too little data");
    });
  }
  absl::StatusOr<metrics::Family<metrics::Gauge>*> job_gauges =
      registry->AddGauge({"forge_coordinator_jobs", "Jobs by state, as recorded in Redis.", {}});
  if (!job_gauges.ok()) {
    log->critical("{}", job_gauges.status().ToString());
    return 1;
  }
  JobGaugeRefresher refresher(&jobs, *job_gauges, config->GetDuration("metrics.refresh"));

  std::unique_ptr<metrics::MetricsExposer> exposer;
  if (const std::string& metrics_listen = config->GetString("metrics.listen");
      !metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsExposer>> started =
        metrics::MetricsExposer::Start(metrics_listen);
    if (!started.ok()) {
      log->critical("{}", started.status().ToString());
      return 1;
    }
    exposer = *std::move(started);
    exposer->AddRegistry(registry);
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, *credentials, &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.RegisterService(&service);
  builder.RegisterService(&worker_service);
  builder.RegisterService(&cost_model_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    log->critical("cannot listen on {}", listen);
    return 1;
  }
  RedisHealthWatcher health(server.get(), &redis, config->GetDuration("health.interval"));
  const std::string host(listen.substr(0, listen.rfind(':')));
  const std::string address = absl::StrCat(host, ":", port);
  // On stdout for whoever started the process (tests, scripts) to read the chosen ports.
  std::cout << "forge-coordinator listening on " << address << std::endl;
  if (exposer != nullptr) {
    std::cout << "forge-coordinator metrics on " << host << ":" << exposer->port() << std::endl;
  }
  LogWithFields(*log, spdlog::level::info, "started",
                {{"listen", address},
                 {"tls", tls},
                 {"auth", auth.open() ? "none" : "tokens"},
                 {"redis", redis.address()},
                 {"blobs", config->GetString("blobs.dir")},
                 {"catalog", catalog != nullptr ? catalog_dir : "off"},
                 {"metrics_port", exposer != nullptr ? exposer->port() : 0}});

  int signal = 0;
  sigwait(&stop_signals, &signal);
  LogWithFields(*log, spdlog::level::info, "stopping", {{"signal", strsignal(signal)}});
  server->Shutdown(std::chrono::system_clock::now() +
                   absl::ToChronoNanoseconds(config->GetDuration("shutdown.grace")));
  log->info("stopped");
  return 0;
}

}  // namespace
}  // namespace forge::server

int main(int argc, char** argv) { return forge::server::Run(argc, argv); }
