#include "worker/daemon/worker_daemon.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/logging/logging.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/family.h"
#include "forge/v1/service.grpc.pb.h"
#include "worker/judge/host_tensor.h"
#include "grpcpp/grpcpp.h"

namespace forge::daemon {
namespace {

using forge::v1::WorkerService;

// Leases carry whole task graphs; gRPC's 4 MiB default is too small for big groups.
constexpr int kMaxMessageBytes = 64 << 20;
constexpr double kStageHistogramStart = 1e-4;  // seconds; 20 doubling buckets reach ~52 s
// Past this many owned tasks the owners are forgotten (and found again as leases arrive).
constexpr size_t kMaxOwnedTasks = 1 << 16;

// FAILURE_STAGE_COMPILE -> "compile".
std::string EnumLabel(const std::string& name, absl::string_view prefix) {
  return absl::AsciiStrToLower(absl::StripPrefix(name, prefix));
}

// gRPC's codes are absl's, number for number.
absl::StatusCode CodeOf(const grpc::Status& status) {
  return static_cast<absl::StatusCode>(status.error_code());
}

bool IsRetryable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

std::string Describe(const grpc::Status& status) {
  return absl::StrCat(absl::StatusCodeToString(CodeOf(status)), ": ", status.error_message());
}

// Waits that double after each failure in a row, from min to max.
class Backoff {
 public:
  Backoff(absl::Duration min, absl::Duration max) : min_(min), max_(max), next_(min) {}
  absl::Duration Next() {
    const absl::Duration wait = next_;
    next_ = std::min(next_ * 2, max_);
    return wait;
  }
  void Reset() { next_ = min_; }
  bool failing() const { return next_ != min_; }

 private:
  absl::Duration min_;
  absl::Duration max_;
  absl::Duration next_;
};

struct DaemonMetrics {
  metrics::Family<metrics::Counter>* candidates = nullptr;
  metrics::Counter* returned = nullptr;
  metrics::Family<metrics::Counter>* dropped = nullptr;
  std::array<metrics::Histogram*, kStageCount> stage_seconds{};
  metrics::Histogram* rpc_seconds = nullptr;
  metrics::Gauge* leases_active = nullptr;
  metrics::Family<metrics::Gauge>* gpu_busy = nullptr;
  metrics::Family<metrics::Counter>* rpc_errors = nullptr;
};

absl::StatusOr<DaemonMetrics> RegisterMetrics(metrics::Registry* registry) {
  DaemonMetrics m;
  FORGE_ASSIGN_OR_RETURN(
      m.candidates,
      registry->AddCounter({"forge_worker_candidates_total",
                            "Candidates evaluated, by outcome (measured, failed) and the stage "
                            "that ended them.",
                            {}}));
  FORGE_ASSIGN_OR_RETURN(
      metrics::Family<metrics::Counter> * returned,
      registry->AddCounter({"forge_worker_candidates_returned_total",
                            "Candidates given back to the coordinator unevaluated (shutdown, GPU "
                            "unavailable).",
                            {}}));
  m.returned = &returned->Add({});
  FORGE_ASSIGN_OR_RETURN(
      m.dropped,
      registry->AddCounter({"forge_worker_candidates_dropped_total",
                            "Candidates neither reported nor given back, by reason: the lease was "
                            "cancelled or expired.",
                            {}}));
  FORGE_ASSIGN_OR_RETURN(
      metrics::Family<metrics::Histogram> * stages,
      registry->AddHistogram({"forge_worker_stage_seconds",
                              "Time per candidate in each stage, and per call to the coordinator "
                              "(stage=rpc).",
                              {}},
                             metrics::ExponentialBuckets(kStageHistogramStart, 2, 20)));
  for (int stage = 0; stage < kStageCount; ++stage) {
    m.stage_seconds[stage] =
        &stages->Add({{"stage", std::string(StageName(static_cast<Stage>(stage)))}});
  }
  m.rpc_seconds = &stages->Add({{"stage", "rpc"}});
  FORGE_ASSIGN_OR_RETURN(
      metrics::Family<metrics::Gauge> * leases,
      registry->AddGauge({"forge_worker_leases_active",
                          "Leases with candidates in work or results not yet reported.",
                          {}}));
  m.leases_active = &leases->Add({});
  FORGE_ASSIGN_OR_RETURN(
      m.gpu_busy,
      registry->AddGauge({"forge_worker_gpu_busy_fraction",
                          "Fraction of the last heartbeat interval each GPU lane spent executing "
                          "candidates.",
                          {}}));
  FORGE_ASSIGN_OR_RETURN(
      m.rpc_errors,
      registry->AddCounter({"forge_worker_rpc_errors_total",
                            "Calls to the coordinator that failed, by call and gRPC code.",
                            {}}));
  return m;
}

// One Lease response and the bookkeeping of its candidates.
struct LeaseState {
  std::string id;
  absl::Time deadline = absl::InfiniteFuture();
  forge::v1::LeaseResponse response;  // owns the candidates and tasks the work items point into
  absl::flat_hash_map<std::string, const forge::v1::KernelTask*> tasks;  // by digest
  // Guarded by Impl::mu_.
  int outstanding = 0;  // candidates without an outcome yet
  int unreported = 0;   // outcomes in the outbox or in a Report call
  bool cancelled = false;
  bool expiry_logged = false;
};

// One leased candidate on its way through a lane.
struct WorkItem {
  std::shared_ptr<LeaseState> lease;
  const forge::v1::Candidate* candidate = nullptr;
  const forge::v1::KernelTask* task = nullptr;
  StageTimes times;
  std::optional<PreparedCandidate> prepared;
  // Guarded by Impl::mu_: given back at the end of the shutdown grace while a thread still
  // works on it; that thread then discards its outcome.
  bool abandoned = false;
};

struct Lane {
  Lane(std::unique_ptr<Executor> executor, Backoff unavailable_backoff)
      : executor(std::move(executor)), unavailable_backoff(unavailable_backoff) {}

  std::unique_ptr<Executor> executor;
  metrics::Gauge* busy_gauge = nullptr;
  std::thread thread;
  // Guarded by Impl::mu_.
  std::deque<std::unique_ptr<WorkItem>> queued;  // not started
  std::deque<std::unique_ptr<WorkItem>> ready;   // prepared, waiting for the lane
  int in_flight = 0;                             // being prepared or executed
  bool leasing = false;                          // a Lease call for the lane is out
  absl::Time next_lease = absl::InfinitePast();  // after an empty lease: retry_after_ms
  absl::Time unavailable_until = absl::InfinitePast();
  Backoff unavailable_backoff;
  // Busy time since window_start, for the busy-fraction gauge.
  absl::Time window_start = absl::Now();
  absl::Duration busy_in_window;
  std::optional<absl::Time> busy_since;

  int pipeline() const { return static_cast<int>(queued.size() + ready.size()) + in_flight; }
};


// Outcomes of one lease waiting to be reported.
struct Outgoing {
  std::shared_ptr<LeaseState> lease;
  std::vector<forge::v1::Result> results;
  std::vector<std::string> returned;
  absl::Time since;                          // when the oldest outcome arrived
  absl::Time retry_at = absl::InfinitePast();  // after a failed Report

  int size() const { return static_cast<int>(results.size() + returned.size()); }
};

}  // namespace

class WorkerDaemon::Impl {
 public:
  Impl(WorkerDaemonOptions options, std::vector<std::unique_ptr<Executor>> executors,
       DaemonMetrics metrics)
      : options_(std::move(options)),
        metrics_(metrics),
        log_(GetLogger("worker")),
        lease_backoff_(options_.min_backoff, options_.max_backoff),
        report_backoff_(options_.min_backoff, options_.max_backoff) {
    for (std::unique_ptr<Executor>& executor : executors) {
      auto lane = std::make_unique<Lane>(std::move(executor),
                                         Backoff(options_.min_backoff, options_.max_backoff));
      lane->busy_gauge =
          &metrics_.gpu_busy->Add({{"gpu", absl::StrCat(lane->executor->gpu().index())}});
      lanes_.push_back(std::move(lane));
    }
    // Enough queued per lane that every compile thread has work while the lane executes.
    const int lanes = static_cast<int>(lanes_.size());
    lane_target_ = std::max(2, (2 * options_.compile_threads + lanes - 1) / lanes);
    worker_id_ = options_.worker_id;

    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    // gRPC's own reconnect backoff grows to 2 minutes; a coordinator back from a restart should
    // see its workers within our backoff.
    const int min_ms = static_cast<int>(absl::ToInt64Milliseconds(options_.min_backoff));
    const int max_ms = static_cast<int>(absl::ToInt64Milliseconds(options_.max_backoff));
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, min_ms);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, min_ms);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_ms);
    stub_ = WorkerService::NewStub(grpc::CreateCustomChannel(
        options_.coordinator,
        options_.credentials != nullptr ? options_.credentials
                                        : grpc::InsecureChannelCredentials(),
        args));
  }

  void Run();
  void Stop() {
    absl::MutexLock lock(&mu_);
    stop_requested_ = true;
  }
  std::string worker_id() const {
    absl::MutexLock lock(&mu_);
    return worker_id_;
  }
  WorkerStats stats() const {
    absl::MutexLock lock(&mu_);
    return stats_;
  }

 private:
  // Calls the coordinator with the RPC deadline, timing the call and counting its errors.
  template <typename Call>
  grpc::Status CallCoordinator(absl::string_view rpc, Call call);
  absl::Status Register();

  void HeartbeatLoop();
  void LeaseLoop();
  void PrepareLoop();
  void LaneLoop(Lane& lane);
  void ReportLoop();
  void Drain();

  void HandleLeaseLocked(int lane_index, absl::Time sent, const grpc::Status& status,
                         forge::v1::LeaseResponse response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WantsLeaseLocked(const Lane& lane, absl::Time now) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Whether the lanes together hold no more than their targets: candidates queued on the lane
  // that owns their task count against every lane's leasing.
  bool HasRoomLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Queues `item`, leased by lane `leaser`, on the lane that owns its task
  // (WorkerDaemonOptions::owned_task_bytes) while that lane can run candidates; otherwise on the
  // leaser, which then owns the task.
  void QueueLocked(int leaser, std::unique_ptr<WorkItem> item, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int LeaseSizeLocked(const Lane& lane) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Time NextLeaseTimeLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void SendReport(Outgoing outgoing);
  std::vector<Outgoing> TakeDueReportsLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time NextReportTimeLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Outcomes. Each ends the item's time as an outstanding candidate of its lease.
  void DeliverLocked(WorkItem& item, forge::v1::Result result) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void GiveBackLocked(WorkItem& item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int GiveBackAllLocked(std::deque<std::unique_ptr<WorkItem>>& items)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the item when its lease has expired; true if it did.
  bool DropIfExpiredLocked(WorkItem& item, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishOutstandingLocked(LeaseState& lease) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Outgoing& OutgoingLocked(const std::shared_ptr<LeaseState>& lease)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RetireIfDoneLocked(const LeaseState& lease) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CancelLeaseLocked(const std::string& lease_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LaneUnavailableLocked(Lane& lane, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the item's stage times to the metrics and logs its outcome.
  void RecordStagesLocked(const WorkItem& item, const forge::v1::Result& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateBusyGaugesLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AnyQueuedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Duration HeartbeatIntervalLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const WorkerDaemonOptions options_;
  const DaemonMetrics metrics_;
  const std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<WorkerService::Stub> stub_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  int lane_target_ = 2;  // candidates a lane keeps leased; it leases again at half
  std::vector<std::thread> threads_;

  mutable absl::Mutex mu_;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  forge::v1::LeaseSettings settings_ ABSL_GUARDED_BY(mu_);
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;      // no more leases
  bool final_flush_ ABSL_GUARDED_BY(mu_) = false;   // report everything now
  bool exiting_ ABSL_GUARDED_BY(mu_) = false;       // threads end
  bool register_again_ ABSL_GUARDED_BY(mu_) = false;
  bool heartbeat_failing_ ABSL_GUARDED_BY(mu_) = false;  // logs a failing streak once
  bool lease_kick_ ABSL_GUARDED_BY(mu_) = false;    // a lane's pipeline shrank
  // The lane that owns each large task (QueueLocked), by task digest.
  absl::flat_hash_map<std::string, int> task_owner_ ABSL_GUARDED_BY(mu_);
  bool report_kick_ ABSL_GUARDED_BY(mu_) = false;   // the outbox has news for the reporter
  absl::Time lease_backoff_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Backoff lease_backoff_ ABSL_GUARDED_BY(mu_);
  Backoff report_backoff_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<LeaseState>> active_leases_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Outgoing> outbox_ ABSL_GUARDED_BY(mu_);  // by lease id
  int reports_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<WorkItem*> in_flight_ ABSL_GUARDED_BY(mu_);
  WorkerStats stats_ ABSL_GUARDED_BY(mu_);
};

template <typename Call>
grpc::Status WorkerDaemon::Impl::CallCoordinator(absl::string_view rpc, Call call) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoNanoseconds(options_.rpc_timeout));
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = call(&context);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_.rpc_seconds->Observe(seconds);
  if (!status.ok()) {
    metrics_.rpc_errors
        ->Add({{"rpc", std::string(rpc)},
               {"code", std::string(absl::StatusCodeToString(CodeOf(status)))}})
        .Increment();
  }
  absl::MutexLock lock(&mu_);
  stats_.rpc_seconds += seconds;
  if (!status.ok()) ++stats_.rpc_errors;
  return status;
}

absl::Status WorkerDaemon::Impl::Register() {
  forge::v1::RegisterRequest request;
  request.set_worker_id(worker_id());
  request.set_hostname(options_.hostname);
  for (const std::unique_ptr<Lane>& lane : lanes_) *request.add_gpus() = lane->executor->gpu();
  request.set_compile_threads(options_.compile_threads);
  request.set_generator_version(codegen::GeneratorVersions());
  forge::v1::RegisterResponse response;
  const grpc::Status status = CallCoordinator("register", [&](grpc::ClientContext* context) {
    return stub_->Register(context, request, &response);
  });
  if (!status.ok()) {
    return absl::Status(CodeOf(status), absl::StrCat("Register with coordinator ",
                                                     options_.coordinator, ": ",
                                                     status.error_message()));
  }
  absl::MutexLock lock(&mu_);
  if (!response.worker_id().empty()) worker_id_ = response.worker_id();
  settings_ = response.lease_settings();
  ++stats_.registrations;
  LogWithFields(*log_, spdlog::level::info, "registered",
                {{"coordinator", options_.coordinator},
                 {"worker_id", worker_id_},
                 {"gpus", lanes_.size()},
                 {"emulated", lanes_.front()->executor->gpu().emulated() ? "yes" : "no"},
                 {"arch", lanes_.front()->executor->gpu().arch()},
                 {"max_candidates_per_lease", settings_.max_candidates_per_lease()},
                 {"lease_duration_ms", settings_.lease_duration_ms()},
                 {"heartbeat_interval_ms", settings_.heartbeat_interval_ms()}});
  return absl::OkStatus();
}

void WorkerDaemon::Impl::Run() {
  Backoff backoff(options_.min_backoff, options_.max_backoff);
  for (;;) {
    const absl::Status registered = Register();
    if (registered.ok()) break;
    const absl::Duration wait = backoff.Next();
    log_->warn("{}; retrying in {}", registered.ToString(), absl::FormatDuration(wait));
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stop_requested_), wait)) {
      log_->info("stopped before the coordinator at {} answered", options_.coordinator);
      return;
    }
  }

  threads_.emplace_back([this] { HeartbeatLoop(); });
  threads_.emplace_back([this] { LeaseLoop(); });
  threads_.emplace_back([this] { ReportLoop(); });
  for (int i = 0; i < options_.compile_threads; ++i) {
    threads_.emplace_back([this] { PrepareLoop(); });
  }
  for (std::unique_ptr<Lane>& lane : lanes_) {
    lane->thread = std::thread([this, lane = lane.get()] { LaneLoop(*lane); });
  }

  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&stop_requested_));
  }
  Drain();
  // A lane still inside Execute (a sandbox call runs to its own deadline) is waited for here,
  // after its candidate was given back and the last reports went out.
  for (std::thread& thread : threads_) thread.join();
  for (std::unique_ptr<Lane>& lane : lanes_) lane->thread.join();
  const WorkerStats final_stats = stats();
  LogWithFields(*log_, spdlog::level::info, "stopped",
                {{"measured", final_stats.measured},
                 {"failed", final_stats.failed},
                 {"returned", final_stats.returned},
                 {"dropped", final_stats.dropped}});
}

void WorkerDaemon::Impl::Drain() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  lease_kick_ = true;
  int given_back = 0;
  for (std::unique_ptr<Lane>& lane : lanes_) given_back += GiveBackAllLocked(lane->queued);
  LogWithFields(*log_, spdlog::level::info, "stopping",
                {{"returned_unstarted", given_back},
                 {"in_flight", in_flight_.size()},
                 {"grace", absl::FormatDuration(options_.shutdown_grace)}});

  auto finished = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    if (!in_flight_.empty()) return false;
    return std::all_of(lanes_.begin(), lanes_.end(),
                       [](const std::unique_ptr<Lane>& lane) { return lane->ready.empty(); });
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&finished), options_.shutdown_grace)) {
    int abandoned = 0;
    for (std::unique_ptr<Lane>& lane : lanes_) abandoned += GiveBackAllLocked(lane->ready);
    for (WorkItem* item : in_flight_) {
      if (item->abandoned) continue;
      item->abandoned = true;
      GiveBackLocked(*item);
      ++abandoned;
    }
    log_->warn("shutdown grace of {} is over: gave back {} candidates still in work",
               absl::FormatDuration(options_.shutdown_grace), abandoned);
  }

  final_flush_ = true;
  report_kick_ = true;
  auto reported = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return outbox_.empty() && reports_in_flight_ == 0;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&reported), options_.report_grace)) {
    int unreported = 0;
    for (const auto& [lease_id, outgoing] : outbox_) unreported += outgoing.size();
    log_->warn("exiting with {} outcomes unreported after {} of trying", unreported,
               absl::FormatDuration(options_.report_grace));
  }
  exiting_ = true;
}

absl::Duration WorkerDaemon::Impl::HeartbeatIntervalLocked() const {
  return settings_.heartbeat_interval_ms() > 0
             ? absl::Milliseconds(settings_.heartbeat_interval_ms())
             : options_.default_heartbeat_interval;
}

void WorkerDaemon::Impl::HeartbeatLoop() {
  absl::MutexLock lock(&mu_);
  absl::Time next = absl::Now() + HeartbeatIntervalLocked();
  auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return exiting_ || register_again_; };
  while (!exiting_) {
    mu_.AwaitWithDeadline(absl::Condition(&wake), next);
    if (exiting_) break;
    if (register_again_) {
      register_again_ = false;
      mu_.Unlock();
      const absl::Status registered = Register();
      mu_.Lock();
      // A failed attempt is retried when the next heartbeat is told again.
      if (!registered.ok()) log_->warn("registering again: {}", registered.ToString());
      continue;
    }
    const absl::Time now = absl::Now();
    if (now < next) continue;
    next = now + HeartbeatIntervalLocked();
    UpdateBusyGaugesLocked(now);

    forge::v1::HeartbeatRequest request;
    request.set_worker_id(worker_id_);
    for (const auto& [lease_id, lease] : active_leases_) request.add_active_lease_ids(lease_id);
    forge::v1::HeartbeatResponse response;
    const absl::Time sent = absl::Now();
    mu_.Unlock();
    const grpc::Status status = CallCoordinator("heartbeat", [&](grpc::ClientContext* context) {
      return stub_->Heartbeat(context, request, &response);
    });
    mu_.Lock();
    if (!status.ok()) {
      if (!heartbeat_failing_) {
        log_->warn("heartbeat to {}: {}", options_.coordinator, Describe(status));
      }
      heartbeat_failing_ = true;
      continue;
    }
    heartbeat_failing_ = false;
    if (response.register_again()) {
      log_->info("the coordinator asks worker {} to register again", worker_id_);
      register_again_ = true;
    }
    for (const std::string& lease_id : response.cancelled_lease_ids()) CancelLeaseLocked(lease_id);
    // The coordinator renewed every lease it did not cancel: a long candidate (the first of a
    // large task computes the judge's references) keeps its lease while heartbeats go through.
    if (settings_.lease_duration_ms() > 0) {
      const absl::Time renewed = sent + absl::Milliseconds(settings_.lease_duration_ms());
      for (const std::string& lease_id : request.active_lease_ids()) {
        const auto it = active_leases_.find(lease_id);
        if (it != active_leases_.end() && !it->second->cancelled) {
          it->second->deadline = std::max(it->second->deadline, renewed);
        }
      }
    }
  }
}

void WorkerDaemon::Impl::UpdateBusyGaugesLocked(absl::Time now) {
  for (std::unique_ptr<Lane>& lane : lanes_) {
    absl::Duration busy = lane->busy_in_window;
    if (lane->busy_since.has_value()) {
      busy += now - *lane->busy_since;
      lane->busy_since = now;
    }
    const absl::Duration window = now - lane->window_start;
    if (window > absl::ZeroDuration()) lane->busy_gauge->Set(busy / window);
    lane->busy_in_window = absl::ZeroDuration();
    lane->window_start = now;
  }
}

bool WorkerDaemon::Impl::WantsLeaseLocked(const Lane& lane, absl::Time now) const {
  return !lane.leasing && now >= lane.next_lease && now >= lane.unavailable_until &&
         now >= lease_backoff_until_ && lane.pipeline() <= lane_target_ / 2 && HasRoomLocked();
}

bool WorkerDaemon::Impl::HasRoomLocked() const {
  int pipeline = 0;
  for (const std::unique_ptr<Lane>& lane : lanes_) pipeline += lane->pipeline();
  return pipeline <= lane_target_ * static_cast<int>(lanes_.size());
}

void WorkerDaemon::Impl::QueueLocked(int leaser, std::unique_ptr<WorkItem> item, absl::Time now) {
  int lane = leaser;
  if (options_.owned_task_bytes >= 0 &&
      judge::TaskStorageBytes(*item->task) >= options_.owned_task_bytes) {
    if (task_owner_.size() >= kMaxOwnedTasks) task_owner_.clear();  // owners are only a hint
    auto [owner, inserted] = task_owner_.try_emplace(item->task->digest(), leaser);
    if (!inserted && owner->second != leaser) {
      if (now >= lanes_[owner->second]->unavailable_until) {
        lane = owner->second;
        ++stats_.moved_to_owner;
      } else {
        owner->second = leaser;  // the owner cannot run candidates now: the leaser takes over
      }
    }
  }
  lanes_[lane]->queued.push_back(std::move(item));
}

int WorkerDaemon::Impl::LeaseSizeLocked(const Lane& lane) const {
  int size = lane_target_ - lane.pipeline();
  if (options_.max_candidates_per_lease > 0) {
    size = std::min(size, options_.max_candidates_per_lease);
  }
  if (settings_.max_candidates_per_lease() > 0) {
    size = std::min(size, settings_.max_candidates_per_lease());
  }
  return std::max(size, 1);
}

absl::Time WorkerDaemon::Impl::NextLeaseTimeLocked() const {
  absl::Time next = absl::InfiniteFuture();
  for (const std::unique_ptr<Lane>& lane : lanes_) {
    // A lane with a full pipeline (or a worker without room) wakes the loop through lease_kick_
    // as it drains.
    if (lane->leasing || lane->pipeline() > lane_target_ / 2 || !HasRoomLocked()) continue;
    next = std::min(next, std::max({lane->next_lease, lane->unavailable_until,
                                    lease_backoff_until_}));
  }
  return next;
}

void WorkerDaemon::Impl::LeaseLoop() {
  absl::MutexLock lock(&mu_);
  auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || lease_kick_; };
  size_t next_lane = 0;  // round robin, so that no lane starves the others
  while (!stopping_) {
    const absl::Time now = absl::Now();
    std::optional<int> chosen;
    for (size_t i = 0; i < lanes_.size() && !chosen.has_value(); ++i) {
      const size_t index = (next_lane + i) % lanes_.size();
      if (WantsLeaseLocked(*lanes_[index], now)) chosen = static_cast<int>(index);
    }
    if (!chosen.has_value()) {
      lease_kick_ = false;
      mu_.AwaitWithDeadline(absl::Condition(&wake), NextLeaseTimeLocked());
      continue;
    }
    next_lane = (*chosen + 1) % lanes_.size();
    Lane& lane = *lanes_[*chosen];
    forge::v1::LeaseRequest request;
    request.set_worker_id(worker_id_);
    request.set_max_candidates(LeaseSizeLocked(lane));
    request.set_target_arch(lane.executor->gpu().arch());
    lane.leasing = true;
    mu_.Unlock();
    forge::v1::LeaseResponse response;
    const grpc::Status status = CallCoordinator("lease", [&](grpc::ClientContext* context) {
      return stub_->Lease(context, request, &response);
    });
    mu_.Lock();
    lane.leasing = false;
    HandleLeaseLocked(*chosen, now, status, std::move(response));
  }
}

void WorkerDaemon::Impl::HandleLeaseLocked(int lane_index, absl::Time sent,
                                           const grpc::Status& status,
                                           forge::v1::LeaseResponse response) {
  Lane& lane = *lanes_[lane_index];
  const absl::Time now = absl::Now();
  if (!status.ok()) {
    if (!lease_backoff_.failing()) {
      log_->warn("lease from {}: {}", options_.coordinator, Describe(status));
    }
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) register_again_ = true;
    lease_backoff_until_ = now + lease_backoff_.Next();
    return;
  }
  lease_backoff_.Reset();
  if (response.candidates_size() == 0) {
    lane.next_lease =
        now + std::max(absl::Milliseconds(response.retry_after_ms()), options_.min_backoff);
    return;
  }
  if (response.lease_id().empty()) {
    log_->error("the coordinator leased {} candidates without a lease id; ignoring them",
                response.candidates_size());
    lane.next_lease = now + options_.min_backoff;
    return;
  }

  auto lease = std::make_shared<LeaseState>();
  lease->response = std::move(response);
  lease->id = lease->response.lease_id();
  const int64_t duration_ms = lease->response.duration_ms() > 0
                                  ? lease->response.duration_ms()
                                  : settings_.lease_duration_ms();
  if (duration_ms > 0) lease->deadline = sent + absl::Milliseconds(duration_ms);
  for (const forge::v1::KernelTask& task : lease->response.tasks()) {
    lease->tasks.emplace(task.digest(), &task);
  }
  active_leases_[lease->id] = lease;
  metrics_.leases_active->Set(static_cast<double>(active_leases_.size()));
  ++stats_.leases;
  stats_.candidates_leased += lease->response.candidates_size();

  for (const forge::v1::Candidate& candidate : lease->response.candidates()) {
    auto item = std::make_unique<WorkItem>();
    item->lease = lease;
    item->candidate = &candidate;
    ++lease->outstanding;
    const auto task = lease->tasks.find(candidate.task_digest());
    if (task == lease->tasks.end()) {
      DeliverLocked(*item, FailureResult(candidate.digest(), forge::v1::FAILURE_STAGE_GENERATE,
                                         forge::v1::FAILURE_REASON_INTERNAL,
                                         absl::StrCat("task ", candidate.task_digest(),
                                                      " is not in lease ", lease->id)));
      continue;
    }
    item->task = task->second;
    if (stopping_) {
      GiveBackLocked(*item);  // the call was out when the daemon began to stop
    } else {
      QueueLocked(lane_index, std::move(item), now);
    }
  }
}

bool WorkerDaemon::Impl::AnyQueuedLocked() const {
  return std::any_of(lanes_.begin(), lanes_.end(),
                     [](const std::unique_ptr<Lane>& lane) { return !lane->queued.empty(); });
}

void WorkerDaemon::Impl::PrepareLoop() {
  absl::MutexLock lock(&mu_);
  auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return exiting_ || AnyQueuedLocked(); };
  for (;;) {
    mu_.Await(absl::Condition(&wake));
    if (exiting_) break;
    // The lane with the least work ahead of it goes first, so that every GPU stays fed.
    Lane* lane = nullptr;
    for (std::unique_ptr<Lane>& other : lanes_) {
      if (other->queued.empty()) continue;
      const int ahead = static_cast<int>(other->ready.size()) + other->in_flight;
      if (lane == nullptr || ahead < static_cast<int>(lane->ready.size()) + lane->in_flight) {
        lane = other.get();
      }
    }
    std::unique_ptr<WorkItem> item = std::move(lane->queued.front());
    lane->queued.pop_front();
    if (DropIfExpiredLocked(*item, absl::Now())) continue;
    WorkItem* work = item.get();
    in_flight_.insert(work);
    ++lane->in_flight;
    mu_.Unlock();
    work->prepared = lane->executor->Prepare(*work->task, *work->candidate, &work->times);
    mu_.Lock();
    in_flight_.erase(work);
    --lane->in_flight;
    if (work->abandoned) continue;
    if (work->prepared->failure.has_value()) {
      DeliverLocked(*work, *std::move(work->prepared->failure));
    } else if (absl::Now() < lane->unavailable_until) {
      GiveBackLocked(*work);
    } else {
      lane->ready.push_back(std::move(item));
    }
  }
}

void WorkerDaemon::Impl::LaneLoop(Lane& lane) {
  absl::MutexLock lock(&mu_);
  auto wake = [this, &lane]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return exiting_ || !lane.ready.empty();
  };
  for (;;) {
    mu_.Await(absl::Condition(&wake));
    if (exiting_) break;
    std::unique_ptr<WorkItem> item = std::move(lane.ready.front());
    lane.ready.pop_front();
    absl::Time now = absl::Now();
    if (DropIfExpiredLocked(*item, now)) continue;
    in_flight_.insert(item.get());
    ++lane.in_flight;
    lane.busy_since = now;
    // The time this candidate must beat to become its task's best, as the lease said.
    const auto bar = item->lease->response.sanitize_below_us().find(item->task->digest());
    if (bar != item->lease->response.sanitize_below_us().end()) {
      item->prepared->sanitize_below_us = bar->second;
    }
    mu_.Unlock();
    absl::StatusOr<forge::v1::Result> result =
        lane.executor->ExecuteReporting(*std::move(item->prepared), &item->times);
    mu_.Lock();
    now = absl::Now();
    if (lane.busy_since.has_value()) lane.busy_in_window += now - *lane.busy_since;
    lane.busy_since.reset();
    in_flight_.erase(item.get());
    --lane.in_flight;
    if (item->abandoned) continue;
    if (!result.ok()) {
      GiveBackLocked(*item);
      LaneUnavailableLocked(lane, result.status());
      continue;
    }
    lane.unavailable_backoff.Reset();
    DeliverLocked(*item, *std::move(result));
  }
}

void WorkerDaemon::Impl::LaneUnavailableLocked(Lane& lane, const absl::Status& status) {
  const absl::Duration wait = lane.unavailable_backoff.Next();
  lane.unavailable_until = absl::Now() + wait;
  const int given_back = 1 + GiveBackAllLocked(lane.ready) + GiveBackAllLocked(lane.queued);
  log_->warn("GPU {} cannot run candidates ({}); gave back {} and pausing it for {}",
             lane.executor->gpu().index(), status.ToString(), given_back,
             absl::FormatDuration(wait));
}

void WorkerDaemon::Impl::RecordStagesLocked(const WorkItem& item,
                                            const forge::v1::Result& result) {
  std::string stages;
  for (int stage = 0; stage < kStageCount; ++stage) {
    if (!item.times.ran(static_cast<Stage>(stage))) continue;
    const double seconds = item.times.seconds(static_cast<Stage>(stage));
    metrics_.stage_seconds[stage]->Observe(seconds);
    stats_.stage_seconds[stage] += seconds;
    absl::StrAppendFormat(&stages, "%s%s=%.3f", stages.empty() ? "" : ",",
                          StageName(static_cast<Stage>(stage)), seconds);
    if (static_cast<Stage>(stage) == Stage::kJudge && !item.times.judge_breakdown().empty()) {
      absl::StrAppend(&stages, "(", item.times.judge_breakdown(), ")");
    }
  }
  // One line per candidate: where a slow search spends its time shows in the worker's log, and
  // why a candidate failed (the start of its detail, on one line).
  const std::string task = item.candidate->task_digest().substr(0, 12);
  const std::string candidate = item.candidate->digest().substr(0, 12);
  if (result.has_measurement()) {
    LogWithFields(*log_, spdlog::level::info, "candidate",
                  {{"task", task},
                   {"candidate", candidate},
                   {"template", item.candidate->template_name()},
                   {"outcome", absl::StrFormat("%.2fus", result.measurement().median_us())},
                   {"seconds", stages}});
    return;
  }
  constexpr size_t kDetailChars = 300;
  std::string detail = result.failure().detail().substr(0, kDetailChars);
  absl::c_replace(detail, '\n', ' ');
  LogWithFields(*log_, spdlog::level::info, "candidate",
                {{"task", task},
                 {"candidate", candidate},
                 {"template", item.candidate->template_name()},
                 {"outcome", EnumLabel(forge::v1::FailureReason_Name(result.failure().reason()),
                                       "FAILURE_REASON_")},
                 {"seconds", stages},
                 {"detail", detail}});
}

void WorkerDaemon::Impl::DeliverLocked(WorkItem& item, forge::v1::Result result) {
  RecordStagesLocked(item, result);
  if (result.has_measurement()) {
    ++stats_.measured;
    const bool predicted =
        result.measurement().kind() == forge::v1::MEASUREMENT_KIND_PREDICTED;
    metrics_.candidates->Add({{"outcome", "measured"}, {"stage", predicted ? "predict" : "time"}})
        .Increment();
  } else {
    ++stats_.failed;
    metrics_.candidates
        ->Add({{"outcome", "failed"},
               {"stage", EnumLabel(forge::v1::FailureStage_Name(result.failure().stage()),
                                   "FAILURE_STAGE_")}})
        .Increment();
  }
  LeaseState& lease = *item.lease;
  if (lease.cancelled) {
    ++stats_.dropped;
    metrics_.dropped->Add({{"reason", "cancelled"}}).Increment();
    FinishOutstandingLocked(lease);
    return;
  }
  Outgoing& outgoing = OutgoingLocked(item.lease);
  outgoing.results.push_back(std::move(result));
  ++lease.unreported;
  if (outgoing.size() >= options_.report_batch) report_kick_ = true;
  FinishOutstandingLocked(lease);
}

void WorkerDaemon::Impl::GiveBackLocked(WorkItem& item) {
  LeaseState& lease = *item.lease;
  if (lease.cancelled) {
    ++stats_.dropped;
    metrics_.dropped->Add({{"reason", "cancelled"}}).Increment();
    FinishOutstandingLocked(lease);
    return;
  }
  ++stats_.returned;
  metrics_.returned->Increment();
  Outgoing& outgoing = OutgoingLocked(item.lease);
  outgoing.returned.push_back(item.candidate->digest());
  ++lease.unreported;
  report_kick_ = true;  // a returned candidate is wanted back at once
  FinishOutstandingLocked(lease);
}

int WorkerDaemon::Impl::GiveBackAllLocked(std::deque<std::unique_ptr<WorkItem>>& items) {
  const int count = static_cast<int>(items.size());
  for (std::unique_ptr<WorkItem>& item : items) GiveBackLocked(*item);
  items.clear();
  return count;
}

bool WorkerDaemon::Impl::DropIfExpiredLocked(WorkItem& item, absl::Time now) {
  LeaseState& lease = *item.lease;
  if (now <= lease.deadline) return false;
  if (!lease.expiry_logged) {
    lease.expiry_logged = true;
    log_->warn("lease {} expired before all its candidates started; dropping the rest", lease.id);
  }
  ++stats_.dropped;
  metrics_.dropped->Add({{"reason", "expired"}}).Increment();
  FinishOutstandingLocked(lease);
  return true;
}

void WorkerDaemon::Impl::FinishOutstandingLocked(LeaseState& lease) {
  --lease.outstanding;
  lease_kick_ = true;
  RetireIfDoneLocked(lease);
}

Outgoing& WorkerDaemon::Impl::OutgoingLocked(const std::shared_ptr<LeaseState>& lease) {
  auto [it, inserted] = outbox_.try_emplace(lease->id);
  if (inserted) {
    it->second.lease = lease;
    it->second.since = absl::Now();
    report_kick_ = true;  // the reporter's next deadline may now be this entry's
  }
  return it->second;
}

void WorkerDaemon::Impl::RetireIfDoneLocked(const LeaseState& lease) {
  if (lease.outstanding > 0 || lease.unreported > 0) return;
  const auto it = active_leases_.find(lease.id);
  if (it == active_leases_.end() || it->second.get() != &lease) return;
  active_leases_.erase(it);
  metrics_.leases_active->Set(static_cast<double>(active_leases_.size()));
}

void WorkerDaemon::Impl::CancelLeaseLocked(const std::string& lease_id) {
  const auto it = active_leases_.find(lease_id);
  if (it == active_leases_.end()) return;
  const std::shared_ptr<LeaseState> lease = it->second;
  lease->cancelled = true;
  int unstarted = 0;
  // Its items may wait on any lane: those of tasks another lane owns were queued there.
  for (std::unique_ptr<Lane>& lane : lanes_) {
    for (std::deque<std::unique_ptr<WorkItem>>* items : {&lane->queued, &lane->ready}) {
      const auto of_lease = std::stable_partition(
          items->begin(), items->end(),
          [&](const std::unique_ptr<WorkItem>& item) { return item->lease != lease; });
      unstarted += static_cast<int>(items->end() - of_lease);
      items->erase(of_lease, items->end());
    }
  }
  int unreported = 0;
  if (const auto outgoing = outbox_.find(lease_id); outgoing != outbox_.end()) {
    unreported = outgoing->second.size();
    outbox_.erase(outgoing);
  }
  lease->outstanding -= unstarted;
  lease->unreported -= unreported;
  stats_.dropped += unstarted + unreported;
  metrics_.dropped->Add({{"reason", "cancelled"}}).Increment(unstarted + unreported);
  active_leases_.erase(it);
  metrics_.leases_active->Set(static_cast<double>(active_leases_.size()));
  lease_kick_ = true;
  LogWithFields(*log_, spdlog::level::info, "lease cancelled by the coordinator",
                {{"lease", lease_id},
                 {"dropped_unstarted", unstarted},
                 {"dropped_unreported", unreported},
                 {"in_flight", lease->outstanding}});
}

std::vector<Outgoing> WorkerDaemon::Impl::TakeDueReportsLocked(absl::Time now) {
  std::vector<Outgoing> due;
  for (auto it = outbox_.begin(); it != outbox_.end();) {
    Outgoing& outgoing = it->second;
    LeaseState& lease = *outgoing.lease;
    if (now > lease.deadline) {
      log_->warn("lease {} expired with {} results and {} returns unreported; dropping them",
                 lease.id, outgoing.results.size(), outgoing.returned.size());
      stats_.dropped += outgoing.size();
      metrics_.dropped->Add({{"reason", "expired"}}).Increment(outgoing.size());
      lease.unreported -= outgoing.size();
      const std::shared_ptr<LeaseState> keep = outgoing.lease;
      outbox_.erase(it++);
      RetireIfDoneLocked(*keep);
      continue;
    }
    const bool due_now = now >= outgoing.retry_at &&
                         (final_flush_ || outgoing.size() >= options_.report_batch ||
                          !outgoing.returned.empty() || now >= outgoing.since + options_.report_delay);
    if (due_now) {
      due.push_back(std::move(outgoing));
      outbox_.erase(it++);
    } else {
      ++it;
    }
  }
  return due;
}

absl::Time WorkerDaemon::Impl::NextReportTimeLocked() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [lease_id, outgoing] : outbox_) {
    const absl::Time batch_due = final_flush_ ? outgoing.retry_at
                                              : outgoing.since + options_.report_delay;
    next = std::min({next, std::max(outgoing.retry_at, batch_due), outgoing.lease->deadline});
  }
  return next;
}

void WorkerDaemon::Impl::ReportLoop() {
  absl::MutexLock lock(&mu_);
  auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return exiting_ || report_kick_; };
  while (!exiting_) {
    report_kick_ = false;
    std::vector<Outgoing> due = TakeDueReportsLocked(absl::Now());
    if (due.empty()) {
      mu_.AwaitWithDeadline(absl::Condition(&wake), NextReportTimeLocked());
      continue;
    }
    reports_in_flight_ += static_cast<int>(due.size());
    mu_.Unlock();
    for (Outgoing& outgoing : due) SendReport(std::move(outgoing));
    mu_.Lock();
  }
}

void WorkerDaemon::Impl::SendReport(Outgoing outgoing) {
  forge::v1::ReportRequest request;
  request.set_worker_id(worker_id());
  request.set_lease_id(outgoing.lease->id);
  for (forge::v1::Result& result : outgoing.results) request.mutable_results()->Add(std::move(result));
  for (std::string& digest : outgoing.returned) {
    request.add_returned_candidate_digests(std::move(digest));
  }
  const int count = outgoing.size();
  forge::v1::ReportResponse response;
  const grpc::Status status = CallCoordinator("report", [&](grpc::ClientContext* context) {
    return stub_->Report(context, request, &response);
  });

  absl::MutexLock lock(&mu_);
  --reports_in_flight_;
  LeaseState& lease = *outgoing.lease;
  if (status.ok()) {
    report_backoff_.Reset();
    lease.unreported -= count;
    stats_.rejected += response.rejected_candidate_digests_size();
    if (response.rejected_candidate_digests_size() > 0) {
      log_->info("the coordinator refused {} of {} results of lease {} (first: {})",
                 response.rejected_candidate_digests_size(), count, lease.id,
                 response.rejected_candidate_digests(0));
    }
    RetireIfDoneLocked(lease);
    return;
  }
  const absl::Time now = absl::Now();
  if (IsRetryable(status) && !lease.cancelled && now < lease.deadline && !exiting_) {
    if (!report_backoff_.failing()) {
      log_->warn("report to {}: {}; keeping {} outcomes to retry", options_.coordinator,
                 Describe(status), count);
    }
    // The unsent outcomes go back to the outbox ahead of any that arrived meanwhile.
    std::vector<forge::v1::Result> results(
        std::make_move_iterator(request.mutable_results()->begin()),
        std::make_move_iterator(request.mutable_results()->end()));
    std::vector<std::string> returned(
        std::make_move_iterator(request.mutable_returned_candidate_digests()->begin()),
        std::make_move_iterator(request.mutable_returned_candidate_digests()->end()));
    Outgoing& merged = OutgoingLocked(outgoing.lease);
    results.insert(results.end(), std::make_move_iterator(merged.results.begin()),
                   std::make_move_iterator(merged.results.end()));
    returned.insert(returned.end(), std::make_move_iterator(merged.returned.begin()),
                    std::make_move_iterator(merged.returned.end()));
    merged.results = std::move(results);
    merged.returned = std::move(returned);
    merged.since = std::min(merged.since, outgoing.since);
    merged.retry_at = now + report_backoff_.Next();
    return;
  }
  log_->error("report of {} outcomes of lease {} to {} failed ({}); dropping them", count,
              lease.id, options_.coordinator, Describe(status));
  stats_.dropped += count;
  lease.unreported -= count;
  RetireIfDoneLocked(lease);
}

WorkerDaemon::WorkerDaemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WorkerDaemon::~WorkerDaemon() = default;

absl::StatusOr<std::unique_ptr<WorkerDaemon>> WorkerDaemon::Create(
    WorkerDaemonOptions options, std::vector<std::unique_ptr<Executor>> lanes,
    metrics::Registry* registry) {
  if (lanes.empty()) return absl::InvalidArgumentError("a worker needs at least one GPU lane");
  if (options.coordinator.empty()) {
    return absl::InvalidArgumentError("no coordinator address (host:port) given");
  }
  if (options.compile_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("compile_threads must be at least 1, got ", options.compile_threads));
  }
  FORGE_ASSIGN_OR_RETURN(DaemonMetrics daemon_metrics, RegisterMetrics(registry));
  return std::unique_ptr<WorkerDaemon>(new WorkerDaemon(
      std::make_unique<Impl>(std::move(options), std::move(lanes), daemon_metrics)));
}

void WorkerDaemon::Run() { impl_->Run(); }
void WorkerDaemon::Stop() { impl_->Stop(); }
std::string WorkerDaemon::worker_id() const { return impl_->worker_id(); }
WorkerStats WorkerDaemon::stats() const { return impl_->stats(); }

}  // namespace forge::daemon
